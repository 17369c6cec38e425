#!/usr/bin/env bash
# up.sh — the whole local stack without Docker (what `make up` runs):
# the backing services, bin/seckill migrated and seeded, SECKILL_REPLICAS
# (default 3) replicas of `seckill serve` on 127.0.0.1:8081.., and nginx on
# SECKILL_LB_ADDR (default 127.0.0.1:8080) in front, for buyers (the operations
# surface refused), with its operations server on SECKILL_LB_OPS_ADDR (default
# 127.0.0.1:8079: admin drawer, admin API, /readyz, /metrics).
#
# Idempotent: pieces that already run are left as they are. A replica that
# runs an older binary than the one just built is NOT restarted; the script
# says so (make down && make up restarts everything).
#
# The contract with bin/seckill:
#   bin/seckill migrate   apply migrations, exit 0 (safe to run again)
#   bin/seckill seed      load the demo sale, exit 0 (safe to run again)
#   bin/seckill serve     serve HTTP on SECKILL_HTTP_ADDR until SIGTERM;
#                         GET /healthz answers 200 once it serves
# each configured by the SECKILL_* variables of scripts/env.sh, plus
# SECKILL_HTTP_ADDR and SECKILL_INSTANCE_ID per replica.
#
# SECKILL_STACK_TRACING=jaeger (make up TRACING=jaeger, see scripts/env.sh) also starts Jaeger
# (scripts/jaeger.sh) before the replicas, which export their traces to it. A replica already
# running with other tracing settings is not restarted either: the script says so.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"
# shellcheck source=scripts/env.sh
. "$SCRIPT_DIR/env.sh"

REPLICAS=$SECKILL_REPLICAS # env.sh's: the SECKILL_PEERS it sets name as many
SECKILL_BIN=$BIN_DIR/seckill
LB_ADDR=${SECKILL_LB_ADDR:-127.0.0.1:8080}
OPS_ADDR=${SECKILL_LB_OPS_ADDR:-127.0.0.1:8079}
BINARY_REBUILT='' # set by build_app when bin/seckill changed

main() {
	require_cmd curl curl # for the health checks
	"$SCRIPT_DIR/services.sh" up
	build_app
	run_app migrate
	run_app seed
	tracing_up
	start_replicas
	nginx_up
	print_summary
}

# tracing_up starts Jaeger when the stack traces into it.
tracing_up() {
	case $SECKILL_STACK_TRACING in
	off) ;;
	jaeger) "$SCRIPT_DIR/jaeger.sh" up ;;
	*) die "SECKILL_STACK_TRACING=$SECKILL_STACK_TRACING: want off or jaeger" ;;
	esac
}

nginx_up() {
	local n addrs=()
	for ((n = 1; n <= REPLICAS; n++)); do
		addrs+=("$(replica_addr "$n")")
	done
	"$SCRIPT_DIR/nginx.sh" up "${addrs[@]}"
}

# build_app builds bin/seckill and notes whether its content changed (go
# build rewrites the file even when nothing changed, so compare checksums).
build_app() {
	local before=''
	ensure_run_dirs
	[[ -f $SECKILL_BIN ]] && before=$(checksum "$SECKILL_BIN")
	log "building $SECKILL_BIN"
	(cd "$REPO_ROOT" && go build -o "$SECKILL_BIN" ./cmd/seckill)
	[[ $(checksum "$SECKILL_BIN") != "$before" ]] && BINARY_REBUILT=1
	return 0
}

checksum() { sha256sum "$1" | cut -d' ' -f1; }

# warn_tracing_differs NAME says so when a running replica's tracing settings (its environment,
# /proc/PID/environ) are not the ones this "up" asks for: it keeps them until make down && make up.
warn_tracing_differs() {
	local name=$1 pid got want
	pid=$(read_pid "$name") || return 0
	got=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -E '^(SECKILL_TRACING|SECKILL_TRACING_SAMPLE|OTEL_EXPORTER_OTLP_ENDPOINT)=' | sort | tr '\n' ' ') || true
	want=$(env | grep -E '^(SECKILL_TRACING|SECKILL_TRACING_SAMPLE|OTEL_EXPORTER_OTLP_ENDPOINT)=' | sort | tr '\n' ' ') || true
	if [[ $got != "$want" ]]; then
		warn "$name runs with tracing settings [${got% }], not [${want% }]: make down && make up to restart it with them"
	fi
}

run_app() {
	log "seckill $1"
	"$SECKILL_BIN" "$1" || die "seckill $1 failed"
}

start_replicas() {
	local n
	for ((n = 1; n <= REPLICAS; n++)); do
		start_replica "$n"
	done
	for ((n = 1; n <= REPLICAS; n++)); do
		wait_replica "$n"
	done
}

start_replica() {
	local n=$1 name="replica-$1"
	if is_running "$name"; then
		if [[ -n $BINARY_REBUILT ]]; then
			warn "$name (pid $(read_pid "$name")) still runs the previous binary: make down && make up to restart it"
		else
			log "$name: already running (pid $(read_pid "$name"))"
		fi
		warn_tracing_differs "$name"
		return 0
	fi
	if port_open "$REPLICA_HOST" $((REPLICA_BASE_PORT + n)); then
		die "$name: $(replica_addr "$n") is taken by a process these scripts did not start"
	fi
	start_replica_process "$n"
}

print_summary() {
	local n
	cat <<EOF

seckill-go is up.
  storefront     http://$LB_ADDR/   (nginx, least_conn over $REPLICAS replicas; for buyers:
                 /metrics, /readyz and the admin API answer 404 here)
  operations     http://$OPS_ADDR/   (the same, plus the admin drawer, admin API, /readyz)
EOF
	for ((n = 1; n <= REPLICAS; n++)); do
		printf '  replica-%d      http://%s/   log: %s\n' "$n" "$(replica_addr "$n")" "$(log_file "replica-$n")"
	done
	if [[ $SECKILL_STACK_TRACING == jaeger ]]; then
		printf '  jaeger         http://127.0.0.1:16686/   (traces of service seckill, sample %s; log: %s)\n' \
			"${SECKILL_TRACING_SAMPLE:-0.01}" "$(log_file jaeger)"
	fi
	cat <<EOF
  admin token    $SECKILL_ADMIN_TOKEN   (dev only)

  try:   curl -s http://$LB_ADDR/healthz
         curl -s http://$OPS_ADDR/readyz
         curl -s -X POST http://$LB_ADDR/api/v1/products/1/purchase \\
              -H 'Content-Type: application/json' -d '{"user_id":"u-42","quantity":1}'
  logs:  make logs        stop: make down
EOF
}

main "$@"
