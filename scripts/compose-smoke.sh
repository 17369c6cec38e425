#!/usr/bin/env bash
# compose-smoke.sh — start the shipped docker-compose.yml for real, on a machine that reaches no
# image registry (only Debian's packages and the Go module proxy): `make compose-smoke`.
#
#   1. a Docker engine: Debian's docker.io, installed if missing; started here if none answers
#      (dockerd --iptables=false --ip6tables=false --bridge=none: no firewall rules, no default
#      bridge; compose's own networks work) and stopped at the end by its pid;
#   2. images, each kept in the engine's cache for the next run:
#      - a Debian bookworm base from debootstrap --variant=minbase, imported (only when missing);
#      - a Go builder of go.mod's version (deploy/standin/golang.Dockerfile; only when missing);
#      - stand-ins for mysql, redis (also the five redlock servers), memcached, zookeeper,
#        apache/kafka and nginx (deploy/standin/Dockerfile, from Debian's packages; the Kafka one
#        is the project's dev broker);
#      - the project's two images from the real Dockerfile, built by compose itself;
#   3. the real docker-compose.yml with docker-compose.smoke.yml, which only swaps those images in
#      (its header lists every difference), as compose project "seckill-smoke", nginx on a free
#      host ports (SECKILL_HOST_PORT, SECKILL_OPS_HOST_PORT; `make up` holds 8080 and 8079):
#      - `up -d`: every service healthy through its own healthcheck, the one-shots (migrate, seed,
#        kafka-init) exited 0;
#      - the lock zoo's servers: redlock1..5 answer PING in their containers and from another one
#        by the names of SECKILL_REDLOCK_ADDRS, with no persistence (save "", appendonly no);
#        memcached answers stats;
#      - the storefront and the product list through nginx; the operations surface (/metrics,
#        /readyz, the admin API) refused by its public server and answered by its operations
#        server; one purchase, queued, then confirmed; the same on the seeded sale of each zoo
#        strategy whose servers compose starts (redlock, memcached), if the app serves it (GET
#        /api/v1/strategies: served), so that the app is seen to use them;
#      - `docker compose run --rm loadtest` with mysql, redis, zk and the none control over the
#        three replicas, app2's container killed (`docker kill`) as the first attack starts (it
#        must land before that attack ends) and `up -d app2`; the
#        report's verdicts must be PASS, and OVERSOLD for none;
#      - `down -v`: no container, network or volume of the project is left.
#
# BuildKit builds both Dockerfiles (their cache mounts), with the host's network (no default
# bridge). The Docker CLI at /usr/local/bin on these machines has no buildx plugin, so builds go
# through docker.io's own CLI (20.10), which drives the engine's built-in BuildKit by itself.
# Compose is Debian's docker-compose 1.29 (v1, installed if missing), or `docker compose` (v2)
# where only that exists.
#
# Settings (environment):
#   SMOKE_LOADTEST_FLAGS  flags of the load test (default: -strategies mysql,redis,zk,redis-lua,none, with
#                         the load test's own defaults: 500 units, 10,000 buyers × 3 attempts)
#   SMOKE_KILL            the replica to kill during the first attack (default app2; empty: none)
#   SMOKE_IMAGES_ONLY     1: build the images (engine and tools included) and stop there, leaving
#                         them in the engine's cache for a later run (.ci/run builds them at the
#                         lowest priority beside make test)
#   SECKILL_HOST_PORT     nginx's public port on 127.0.0.1 (default: the first free one from 18080)
#   SECKILL_OPS_HOST_PORT its operations port on 127.0.0.1 (default: the first free one from 18079)
# Reports of the load test land in loadtest/results/, as with `make loadtest`.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

PROJECT=seckill-smoke
LOADTEST_FLAGS=${SMOKE_LOADTEST_FLAGS:--strategies mysql,redis,zk,redis-lua,none}
KILL=${SMOKE_KILL-app2}
IMAGES_ONLY=${SMOKE_IMAGES_ONLY:-}
DEBIAN_MIRROR=http://deb.debian.org/debian
# deploy/compose.env's (a public dev default), for the admin API through the operations server.
ADMIN_TOKEN=$(sed -n 's/^SECKILL_ADMIN_TOKEN=//p' "$REPO_ROOT/deploy/compose.env")
BASE_IMAGE=seckill-standin/debian:bookworm
# The stand-ins, by target of deploy/standin/Dockerfile: the images docker-compose.smoke.yml
# names (deploy/compose_test.go checks that the two agree).
declare -A STANDINS=(
	[mariadb]=seckill-standin/mariadb:10.11
	[redis]=seckill-standin/redis:7.0
	[memcached]=seckill-standin/memcached:1.6
	[zookeeper]=seckill-standin/zookeeper:3.8
	[kafka]=seckill-standin/kafka:devbroker
	[nginx]=seckill-standin/nginx:1.22
)

WORK=''        # scratch directory: logs, build contexts
DOCKERD_PID='' # the engine this script started, if it did
STACK=''       # set once compose may have created something
COMPOSE=()
GO_IMAGE=''
BASE_URL='' # nginx's public server
OPS_URL=''  # nginx's operations server
HEALTHY='' # the healthy containers, as all_healthy last saw them
START=$(now_ns)

main() {
	cd "$REPO_ROOT"
	WORK=$(mktemp -d /tmp/seckill-compose-smoke.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	require_cmd curl curl
	require_cmd jq jq
	engine_up
	pick_tools
	phase "engine and tools ready"

	build_base
	build_go
	build_parallel
	phase "images built"
	if [[ $IMAGES_ONLY == 1 ]]; then
		log "compose smoke: images only (SMOKE_IMAGES_ONLY=1), built in $(elapsed_since "$START")"
		return
	fi

	stack_up
	phase "stack up and healthy"
	check_zoo_servers
	phase "the lock zoo's servers answer"
	check_storefront
	phase "storefront and purchases through nginx"
	run_loadtest
	phase "load test done"

	stack_down
	phase "down -v"
	log "compose smoke: PASS in $(elapsed_since "$START")"
}

phase() { log "== $1 ($(elapsed_since "$START") since start)"; }

# compose runs the compose tool on the shipped file and the smoke override, as project
# seckill-smoke.
compose() { "${COMPOSE[@]}" -p "$PROJECT" -f docker-compose.yml -f docker-compose.smoke.yml "$@"; }

# ---------------------------------------------------------------- the engine and the tools

engine_up() {
	if docker info >/dev/null 2>&1; then
		log "Docker engine: one already answers; it is used and left running"
		return
	fi
	require_cmd dockerd docker.io
	log "starting dockerd (no iptables rules, no default bridge)"
	# Its own session: a Ctrl-C of this script must not stop the engine before cleanup has
	# taken the stack down with it.
	setsid dockerd --iptables=false --ip6tables=false --bridge=none >"$WORK/dockerd.log" 2>&1 &
	DOCKERD_PID=$!
	# 180 s: at the lowest priority beside make test (.ci/run), a cold start takes its time.
	if ! wait_until "dockerd" 180 docker info; then
		tail -n 20 "$WORK/dockerd.log" >&2
		die "dockerd did not answer"
	fi
	log "dockerd started (pid $DOCKERD_PID)"
}

# pick_tools chooses a Docker CLI that builds with BuildKit and the compose tool.
pick_tools() {
	export DOCKER_BUILDKIT=1 COMPOSE_DOCKER_CLI_BUILD=1
	if ! docker buildx version >/dev/null 2>&1; then
		local v
		v=$(/usr/bin/docker version --format '{{.Client.Version}}' 2>/dev/null) ||
			die "the docker CLI has no buildx and /usr/bin/docker (docker.io) is missing"
		case $v in
		19.* | 20.*) ;;
		*) die "/usr/bin/docker is $v: without buildx, only a CLI before 23 builds with BuildKit" ;;
		esac
		# docker-compose 1.29 runs `docker build` from PATH.
		mkdir -p "$WORK/bin"
		ln -s /usr/bin/docker "$WORK/bin/docker"
		PATH=$WORK/bin:$PATH
		log "docker CLI for builds: /usr/bin/docker $v (the engine's built-in BuildKit, no buildx)"
	fi
	if command -v docker-compose >/dev/null 2>&1; then
		COMPOSE=(docker-compose)
	elif docker compose version >/dev/null 2>&1; then
		COMPOSE=(docker compose)
	else
		apt_install docker-compose
		COMPOSE=(docker-compose)
	fi
	log "compose: $("${COMPOSE[@]}" version | sed -n 1p)"
}

# ---------------------------------------------------------------- images

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# build TAG LOGNAME ARGS... runs docker build, its output in a log shown on failure.
build() {
	local tag=$1 name=$2 start
	shift 2
	start=$(now_ns)
	if ! docker build --network host --progress plain -t "$tag" "$@" >"$WORK/build-$name.log" 2>&1; then
		grep -v '^$' "$WORK/build-$name.log" | tail -n 60 >&2
		die "docker build of $tag failed"
	fi
	log "built $tag in $(elapsed_since "$start")"
}

# build_base imports a debootstrap'ed Debian bookworm, with the apt sources of the machine's
# release (main, updates, security) and a policy-rc.d that keeps package scripts from starting
# services during builds, as Debian's images on the registry have.
build_base() {
	if image_exists "$BASE_IMAGE"; then
		log "$BASE_IMAGE: cached"
		return
	fi
	require_cmd debootstrap debootstrap
	local rootfs=$WORK/rootfs start
	start=$(now_ns)
	log "debootstrap --variant=minbase bookworm (the base of every stand-in)"
	if ! debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1; then
		tail -n 20 "$WORK/debootstrap.log" >&2
		die "debootstrap failed"
	fi
	cat >"$rootfs/etc/apt/sources.list" <<-EOF
		deb $DEBIAN_MIRROR bookworm main
		deb $DEBIAN_MIRROR bookworm-updates main
		deb $DEBIAN_MIRROR-security bookworm-security main
	EOF
	printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
	chmod +x "$rootfs/usr/sbin/policy-rc.d"
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
	tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
	rm -rf "$rootfs"
	log "built $BASE_IMAGE in $(elapsed_since "$start")"
}

# go_version prints go.mod's Go version (its toolchain line's, if it has one), as the Dockerfile's
# GO_VERSION must be.
go_version() {
	local v
	v=$(sed -n 's/^toolchain go//p' go.mod)
	[[ -n $v ]] || v=$(sed -n 's/^go //p' go.mod)
	[[ -n $v ]] || die "go.mod has no go line"
	printf '%s' "$v"
}

build_go() {
	local version goroot ctx=$WORK/goctx
	version=$(go_version)
	GO_IMAGE=seckill-standin/golang:$version
	grep -q "GO_IMAGE: $GO_IMAGE\$" docker-compose.smoke.yml ||
		die "docker-compose.smoke.yml does not build with $GO_IMAGE (go.mod's Go is $version)"
	if image_exists "$GO_IMAGE"; then
		log "$GO_IMAGE: cached"
		return
	fi
	command -v go >/dev/null || die "go is not on PATH: it finds the Go $version toolchain for the builder image"
	# The machine's Go if it is that version, else the toolchain module from the proxy.
	goroot=$(GOTOOLCHAIN=go$version go env GOROOT)
	[[ $("$goroot/bin/go" env GOVERSION) == "go$version" ]] || die "$goroot is not Go $version"
	mkdir -p "$ctx/ca-certificates"
	cp -a "$goroot" "$ctx/go"
	find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$ctx/ca-certificates/" \; 2>/dev/null || true
	log "Go builder from $goroot ($(find "$ctx/ca-certificates" -name '*.crt' | wc -l) local CA certificates)"
	build "$GO_IMAGE" golang -f deploy/standin/golang.Dockerfile --build-arg "BASE=$BASE_IMAGE" "$ctx"
	rm -rf "$ctx"
}

# build_parallel builds the stand-ins and the project's images at once: the stand-ins mostly
# wait for Debian's mirror, the Go builds for the CPU. Measured cold on two busy cores (load
# average 5 to 8): every image in 5m06s, against 5m34s one after the other. Each build's log is
# shown if it fails.
build_parallel() {
	local -A pids=()
	local target name failed=''
	for target in "${!STANDINS[@]}"; do
		build "${STANDINS[$target]}" "$target" -f deploy/standin/Dockerfile --target "$target" \
			--build-arg "BASE=$BASE_IMAGE" --build-arg "GO_IMAGE=$GO_IMAGE" . &
		pids[$target]=$!
	done
	build_project &
	pids[project]=$!
	for name in "${!pids[@]}"; do
		wait "${pids[$name]}" || failed+=" $name"
	done
	[[ -z $failed ]] || die "image builds failed:$failed"
}

# build_project has compose build the project's images from the real Dockerfile: seckill-go:dev
# (target runtime, through migrate; every app service shares it) and the load test's.
build_project() {
	local start
	start=$(now_ns)
	if ! compose build migrate loadtest >"$WORK/build-project.log" 2>&1; then
		grep -v '^$' "$WORK/build-project.log" | tail -n 60 >&2
		die "compose build failed"
	fi
	log "built seckill-go:dev and seckill-go-loadtest:dev (compose build) in $(elapsed_since "$start")"
}

# ---------------------------------------------------------------- the stack

# free_port VAR FROM [NOT] prints the port that VAR names, else the first free one on 127.0.0.1
# from FROM on (every other port: the two searches interleave), never NOT. `make up` holds
# 8080 and 8079.
free_port() {
	local var=$1 port=${!1:-} not=${3:-}
	if [[ -z $port ]]; then
		for ((port = $2; port < $2 + 200; port += 2)); do
			[[ $port != "$not" ]] && ! port_open 127.0.0.1 "$port" && break
		done
	fi
	[[ $port != "$not" ]] || die "$var=$port: the other published port of nginx"
	port_open 127.0.0.1 "$port" && die "127.0.0.1:$port is taken: set $var to a free port"
	printf '%s' "$port"
}

stack_up() {
	local port ops
	port=$(free_port SECKILL_HOST_PORT 18080) || exit 1
	ops=$(free_port SECKILL_OPS_HOST_PORT 18079 "$port") || exit 1
	export SECKILL_HOST_PORT=$port SECKILL_OPS_HOST_PORT=$ops
	BASE_URL=http://127.0.0.1:$port
	OPS_URL=http://127.0.0.1:$ops

	STACK=1
	compose down -v --remove-orphans >/dev/null 2>&1 || true # what an interrupted run left
	log "compose up -d (nginx on 127.0.0.1:$port, its operations server on 127.0.0.1:$ops)"
	if ! compose up -d >"$WORK/up.log" 2>&1; then
		cat "$WORK/up.log" >&2
		die "compose up failed"
	fi
	wait_until "every service healthy" 180 all_healthy || die "not every service became healthy"
	local svc code
	for svc in migrate seed kafka-init; do
		code=$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$(compose ps -q "$svc")")
		[[ $code == "exited 0" ]] || die "one-shot $svc: $code, want exited 0"
	done
	all_healthy
	log "healthy: $HEALTHY"
	log "one-shots exited 0: migrate seed kafka-init"
}

# all_healthy succeeds when every container of the project that has a healthcheck runs and is
# healthy, nginx among them.
all_healthy() {
	local ids states
	ids=$(compose ps -q)
	[[ -n $ids ]] || return 1
	# shellcheck disable=SC2086 # one id a word
	states=$(docker inspect -f '{{.Name}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}-{{end}}' $ids)
	grep -Eq '[_-]nginx[_-]1 running healthy$' <<<"$states" || return 1
	awk '$3 != "-" && ($2 != "running" || $3 != "healthy") { bad = 1 } END { exit bad }' <<<"$states" || return 1
	HEALTHY=$(awk '$3 == "healthy" { sub(/^\//, "", $1); print $1 }' <<<"$states" | paste -sd ' ')
}

# container SERVICE prints the id of the service's running container, from the engine directly
# (docker-compose 1.29 takes a second or more a call).
container() {
	local id
	id=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=$1")
	[[ -n $id && $id != *$'\n'* ]] || die "service $1: want one running container, got '${id//$'\n'/ }'"
	printf '%s' "$id"
}

# service_healthy SERVICE succeeds when the service's container is healthy.
service_healthy() {
	[[ $(docker inspect -f '{{.State.Health.Status}}' "$(compose ps -q "$1")") == healthy ]]
}

check_storefront() {
	# The page is read whole before grep looks at it: grep -q stops reading at its first match,
	# and a curl still writing then fails with "Failed writing body" (23), which pipefail makes the
	# pipeline's failure.
	local page
	if ! page=$(curl -fsS --max-time 5 "$BASE_URL/") || ! grep -qi '<title>' <<<"$page"; then
		die "GET / through nginx: no storefront page"
	fi
	check_ops_surface
	local products strategies st served
	products=$(curl -fsS --max-time 5 "$BASE_URL/api/v1/products") || die "GET /api/v1/products through nginx failed"
	log "storefront: $(jq '.products | length' <<<"$products") products listed through nginx"
	purchase "$products" mysql "relayed by the worker through Kafka, consumed, stored"

	# The zoo strategies whose servers compose starts, where the app serves them: the purchase
	# goes through their lock, on redlock1..5 or memcached.
	strategies=$(curl -fsS --max-time 5 "$BASE_URL/api/v1/strategies") || die "GET /api/v1/strategies through nginx failed"
	for st in redlock memcached; do
		# (not `.served // "unknown"`: jq's // takes false for missing)
		served=$(jq -r --arg s "$st" '[.strategies[] | select(.name == $s)] | if length > 0 then .[0].served | tostring else "unknown" end' <<<"$strategies")
		case $served in
		true) purchase "$products" "$st" "through its lock on its own servers" ;;
		false) log "strategy $st: not served by this build of the app (GET /api/v1/strategies); no purchase" ;;
		*) log "strategy $st: not in this build's catalog (GET /api/v1/strategies); no purchase" ;;
		esac
	done
}

# purchase PRODUCTS STRATEGY WHAT buys one unit of the first open sale of STRATEGY among PRODUCTS
# (GET /api/v1/products' answer) through nginx: 202 queued, then confirmed within 30 s.
purchase() {
	local products=$1 strategy=$2 what=$3 id answer order status=''
	id=$(jq -r --arg s "$strategy" '[.products[] | select(.strategy == $s and .stock > 0
		and (.sale_starts_at | sub("\\.[0-9]+"; "") | fromdateiso8601) <= now)][0].id // empty' <<<"$products")
	[[ -n $id ]] || die "no open $strategy sale among the seeded products"
	answer=$(curl -sS --max-time 10 -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' \
		-H "Idempotency-Key: compose-smoke-$$-$strategy" -d '{"user_id":"compose-smoke","quantity":1}' \
		"$BASE_URL/api/v1/products/$id/purchase")
	[[ ${answer##*$'\n'} == 202 ]] || die "purchase of product $id ($strategy): $answer"
	answer=${answer%$'\n'*}
	[[ $(jq -r .status <<<"$answer") == queued ]] || die "purchase of product $id ($strategy): $answer, want status queued"
	order=$(jq -r .order_id <<<"$answer")
	log "purchase of product $id ($strategy): 202, order $order queued"
	local deadline=$((SECONDS + 30))
	while ((SECONDS < deadline)); do
		status=$(curl -fsS --max-time 5 "$BASE_URL/api/v1/orders/$order?user_id=compose-smoke" | jq -r .status) || status=''
		[[ $status == confirmed ]] && break
		sleep 0.2
	done
	[[ $status == confirmed ]] || die "order $order ($strategy): status '$status' 30 s after the purchase, want confirmed"
	log "order $order ($strategy): confirmed ($what)"
}

# check_zoo_servers: the lock zoo's servers answer, in their containers and, for the redlock
# servers, from another container by the names the app is given (SECKILL_REDLOCK_ADDRS); the
# redlock servers keep nothing across a restart (no RDB snapshots, no append-only file).
check_zoo_servers() {
	local i svc id redis answer
	redis=$(container redis)
	for i in 1 2 3 4 5; do
		svc=redlock$i
		id=$(container "$svc")
		answer=$(docker exec "$id" redis-cli ping 2>&1) || die "$svc: redis-cli ping failed: $answer"
		[[ $answer == PONG ]] || die "$svc: redis-cli ping answered '$answer', want PONG"
		answer=$(docker exec "$redis" redis-cli -h "$svc" -p 6379 ping 2>&1) || die "redis -> $svc:6379: $answer"
		[[ $answer == PONG ]] || die "redis-cli -h $svc ping (from the redis container) answered '$answer', want PONG"
		answer=$(docker exec "$id" redis-cli config get save 2>&1 | sed -n 2p)
		[[ -z $answer ]] || die "$svc: save '$answer', want none (no RDB snapshots)"
		answer=$(docker exec "$id" redis-cli config get appendonly 2>&1 | sed -n 2p)
		[[ $answer == no ]] || die "$svc: appendonly '$answer', want no"
	done
	log "redlock1..5: PONG in their containers and from the redis container by name; save \"\", appendonly no"
	answer=$(docker exec "$(container memcached)" sh -c "printf 'stats\r\nquit\r\n' | nc -w 2 127.0.0.1 11211" 2>&1 | tr -d '\r') ||
		die "memcached: stats failed: $answer"
	grep -q '^STAT version ' <<<"$answer" || die "memcached: stats answered '$answer'"
	log "memcached: stats answered (version $(sed -n 's/^STAT version //p' <<<"$answer"), limit_maxbytes $(sed -n 's/^STAT limit_maxbytes //p' <<<"$answer"))"
}

# check_ops_surface: the public server refuses the operations surface with the API's 404; the
# operations server passes it (the admin API with the token, /readyz, /metrics).
check_ops_surface() {
	local path answer
	for path in /metrics /readyz /api/v1/admin/products; do
		answer=$(curl -sS --max-time 5 -w ' %{http_code}' -H "Authorization: Bearer $ADMIN_TOKEN" "$BASE_URL$path")
		[[ $answer == '{"error":{"code":"not_found",'*' 404' ]] || die "public GET $path: $answer, want the API's 404 not_found"
		curl -fsS --max-time 5 -o /dev/null -H "Authorization: Bearer $ADMIN_TOKEN" "$OPS_URL$path" ||
			die "GET $path on the operations server failed"
	done
	log "public server: /metrics, /readyz, /api/v1/admin/ refused (404); the operations server answers them"
}

# run_loadtest runs the load test in its container, kills a replica during the first attack and
# brings it back, and checks the report's verdicts.
run_loadtest() {
	local out=$WORK/loadtest.log lt rc killed_in='' victim=''
	log "docker compose run --rm loadtest $LOADTEST_FLAGS${KILL:+ (kill $KILL during the first attack)}"
	# The container to kill, looked up before the attack: at the moment itself `docker kill` (a
	# Go CLI, ~0.1 s) rather than `compose kill`, which is Python and took 10 s to start on a busy
	# machine, past the end of an 8-second attack.
	if [[ -n $KILL ]]; then
		victim=$(compose ps -q "$KILL") || die "compose ps $KILL failed"
		[[ -n $victim ]] || die "no container of $KILL to kill"
	fi
	: >"$out"
	# Unbuffered: docker-compose 1.29 is Python, whose output to a file comes in blocks, and the
	# kill below waits for the line that starts the first attack.
	# shellcheck disable=SC2086 # the flags are words
	PYTHONUNBUFFERED=1 compose run --rm -T loadtest $LOADTEST_FLAGS </dev/null >"$out" 2>&1 &
	lt=$!
	tail -n +1 -f --pid="$lt" "$out" >&2 &
	if [[ -n $KILL ]]; then
		until grep -q ': product [0-9]*, ' "$out" || ! kill -0 "$lt" 2>/dev/null; do sleep 0.1; done
		if kill -0 "$lt" 2>/dev/null; then
			killed_in=$(grep -m1 -o '[a-z-]*: product [0-9]*, ' "$out" | cut -d: -f1)
			docker kill "$victim" >/dev/null 2>&1 || die "docker kill $KILL ($victim) failed"
			if grep -q "^[0-9:]*  $killed_in: [0-9]* answers" "$out"; then
				die "the $killed_in attack ended before $KILL was killed: the kill tested nothing (a larger -stock makes it longer)"
			fi
			log "killed $KILL during the $killed_in attack; compose up -d $KILL"
			compose up -d "$KILL" >"$WORK/restart.log" 2>&1 || {
				cat "$WORK/restart.log" >&2
				die "compose up -d $KILL failed"
			}
			wait_until "$KILL healthy again" 120 service_healthy "$KILL" || die "$KILL did not become healthy again"
			log "$KILL is back and healthy"
		fi
	fi
	rc=0
	wait "$lt" || rc=$?
	sleep 0.2 # the tail's last lines
	((rc == 0)) || die "the load test exited $rc"
	check_verdicts "$out" "$killed_in"
}

# check_verdicts LOG KILLED_IN reads the run's JSON report: every strategy PASS, none OVERSOLD.
check_verdicts() {
	local out=$1 killed_in=$2 id report
	id=$(sed -n 's|^report: /results/\([0-9-]*\)\.html.*|\1|p' "$out" | tail -n 1)
	report=loadtest/results/$id.json
	[[ -n $id && -r $report ]] || die "no report of the load test (want loadtest/results/<run>.json)"
	log "verdicts ($report):"
	jq -r '.strategies[] | "  \(.strategy): \(.verdict), \(.requests) requests, \(.accepted) accepted, \(.outcomes.transport_error // 0) without an answer"' "$report" >&2
	local bad
	bad=$(jq -r '.strategies[] | select((.strategy == "none") != (.verdict == "OVERSOLD") or
		(.strategy != "none" and .verdict != "PASS")) | "\(.strategy): \(.verdict)"' "$report")
	[[ -z $bad ]] || die "verdicts: $bad (want PASS, and OVERSOLD for none)"
	jq -e '.passed' "$report" >/dev/null || die "the report did not pass"
	if [[ -n $killed_in ]]; then
		log "$killed_in: $(jq -r --arg s "$killed_in" '.strategies[] | select(.strategy == $s) | .outcomes.transport_error // 0' "$report") requests lost to the kill, settled by retries with their keys"
	fi
}

stack_down() {
	compose down -v --remove-orphans >"$WORK/down.log" 2>&1 || {
		cat "$WORK/down.log" >&2
		die "compose down failed"
	}
	STACK=''
	local left
	left=$(leftovers)
	[[ -z $left ]] || die "left behind after down -v: $left"
	log "down -v: no container, network or volume of $PROJECT left"
}

# leftovers lists what the project still has in the engine.
leftovers() {
	local f=label=com.docker.compose.project=$PROJECT
	{
		docker ps -aq --filter "$f" | sed 's/^/container /'
		docker network ls -q --filter "$f" | sed 's/^/network /'
		docker volume ls -q --filter "$f" | sed 's/^/volume /'
	} | paste -sd ' '
}

# ---------------------------------------------------------------- cleanup

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $STACK ]] && docker info >/dev/null 2>&1; then
		if ((rc != 0)); then
			log "failed: the state of the stack, and its last log lines"
			compose ps >&2 || true
			compose logs --no-color --tail 30 >&2 2>&1 || true
		fi
		compose down -v --remove-orphans >/dev/null 2>&1 || true
		local ids
		ids=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
		# shellcheck disable=SC2086 # one id a word
		[[ -z $ids ]] || docker rm -f $ids >/dev/null 2>&1 || true
	fi
	if [[ -n $DOCKERD_PID ]]; then
		log "stopping dockerd (pid $DOCKERD_PID)"
		kill -TERM "$DOCKERD_PID" 2>/dev/null || true
		local deadline=$((SECONDS + 60))
		while kill -0 "$DOCKERD_PID" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
		if kill -0 "$DOCKERD_PID" 2>/dev/null; then
			warn "dockerd still runs after 60 s: SIGKILL"
			kill -KILL "$DOCKERD_PID" 2>/dev/null || true
		fi
	fi
	[[ -z $WORK ]] || rm -rf "$WORK"
	exit "$rc"
}

main "$@"
