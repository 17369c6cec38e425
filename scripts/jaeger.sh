#!/usr/bin/env bash
# jaeger.sh up|down|status|build — Jaeger for the local stack, on demand (issue #33; what
# `make up TRACING=jaeger` starts, see scripts/env.sh's SECKILL_STACK_TRACING).
#
#   build    build bin/jaeger from tools/jaeger (its own module: Jaeger's dependency tree stays
#            out of go.mod), if the binary is missing or older than tools/jaeger/go.mod or go.sum
#   up       build, then start it unless it runs, and wait until it answers
#   down     stop the Jaeger that "up" started
#   status   print whether it runs and answers (nothing if it was never started and nothing answers)
#
# It is Jaeger v2's all-in-one (github.com/jaegertracing/jaeger/cmd/jaeger, an OpenTelemetry
# Collector build) with its built-in configuration: OTLP receivers (gRPC 4317, HTTP 4318), the
# UI and query API on 16686, traces in memory (the newest 100,000; gone when it stops). Every
# listener on 127.0.0.1 (JAEGER_LISTEN_HOST, and --set for the query extension's two, which that
# variable does not reach), as the rest of the stack. The replicas export to
# http://127.0.0.1:4318/v1/traces (OTEL_EXPORTER_OTLP_ENDPOINT is the base URL).
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

JAEGER_HOST=127.0.0.1
JAEGER_UI_PORT=16686
JAEGER_OTLP_HTTP_PORT=4318
JAEGER_BIN=$BIN_DIR/jaeger
JAEGER_MODULE=$REPO_ROOT/tools/jaeger
JAEGER_PKG=github.com/jaegertracing/jaeger/cmd/jaeger

main() {
	case "${1:-}" in
	build) jaeger_build ;;
	up) jaeger_up ;;
	down) stop_process jaeger 15 ;;
	status) jaeger_status ;;
	*)
		echo "usage: $0 up|down|status|build" >&2
		exit 2
		;;
	esac
}

# jaeger_build builds bin/jaeger when tools/jaeger's module is newer than it. A first build
# compiles Jaeger's few hundred packages: minutes on two cores; later ones reuse go's cache.
jaeger_build() {
	local start
	ensure_run_dirs
	if [[ -x $JAEGER_BIN && $JAEGER_BIN -nt $JAEGER_MODULE/go.mod && $JAEGER_BIN -nt $JAEGER_MODULE/go.sum ]]; then
		return 0
	fi
	start=$(now_ns)
	log "building $JAEGER_BIN from tools/jaeger (the first build takes minutes)"
	(cd "$JAEGER_MODULE" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$JAEGER_BIN" "$JAEGER_PKG") ||
		die "could not build Jaeger (tools/jaeger)"
	log "built $JAEGER_BIN in $(elapsed_since "$start")"
}

jaeger_answers() {
	http_ok "http://$JAEGER_HOST:$JAEGER_UI_PORT/" && port_open "$JAEGER_HOST" "$JAEGER_OTLP_HTTP_PORT"
}

jaeger_up() {
	require_cmd curl curl
	jaeger_build
	if is_running jaeger; then
		log "jaeger: already running (pid $(read_pid jaeger))"
	elif jaeger_answers; then
		log "jaeger: something already answers on $JAEGER_HOST:$JAEGER_UI_PORT and :$JAEGER_OTLP_HTTP_PORT: used as it is"
		return 0
	else
		if port_open "$JAEGER_HOST" "$JAEGER_UI_PORT" || port_open "$JAEGER_HOST" "$JAEGER_OTLP_HTTP_PORT"; then
			die "jaeger: $JAEGER_HOST:$JAEGER_UI_PORT or :$JAEGER_OTLP_HTTP_PORT is taken by a process these scripts did not start"
		fi
		log "jaeger: starting (UI http://$JAEGER_HOST:$JAEGER_UI_PORT/, OTLP/HTTP :$JAEGER_OTLP_HTTP_PORT)"
		# JAEGER_LISTEN_HOST binds the built-in configuration's receivers and extensions; the
		# query extension (UI 16686, its gRPC API 16685) listens on every interface unless told.
		JAEGER_LISTEN_HOST=$JAEGER_HOST start_bg jaeger "$JAEGER_BIN" \
			--set=extensions.jaeger_query.http.endpoint="$JAEGER_HOST:$JAEGER_UI_PORT" \
			--set=extensions.jaeger_query.grpc.endpoint="$JAEGER_HOST:16685"
	fi
	wait_ready jaeger 60 jaeger_answers || die "jaeger did not answer (log: $(log_file jaeger))"
	log "jaeger: ready"
}

# jaeger_status prints nothing where Jaeger was never started and nothing answers (the default
# stack has none).
jaeger_status() {
	local state=DOWN started=''
	[[ -f $(pid_file jaeger) ]] && started=1
	jaeger_answers && state=up
	[[ -n $started || $state == up ]] || return 0
	if is_running jaeger; then
		state+=" (started by these scripts, pid $(read_pid jaeger))"
	elif [[ $state == up ]]; then
		state+=" (not started by these scripts)"
	fi
	printf '%-10s %-16s %s\n' jaeger "$JAEGER_HOST:$JAEGER_UI_PORT" "$state (UI; OTLP/HTTP on :$JAEGER_OTLP_HTTP_PORT)"
}

main "$@"
