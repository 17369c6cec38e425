#!/usr/bin/env bash
# jaeger.sh up|down|status|build — Jaeger for the local stack, on demand (issue #33; what
# `make up TRACING=jaeger` starts, see scripts/env.sh's SECKILL_STACK_TRACING).
#
#   build    build bin/jaeger from tools/jaeger (its own module: Jaeger's dependency tree stays
#            out of go.mod), if the binary is missing or older than tools/jaeger/go.mod or go.sum
#   ui DIR   build the UI's assets from a checkout of github.com/jaegertracing/jaeger-ui at DIR
#            (tag v1.76.0, Jaeger's own; npm ci and npm run build there) into bin/jaeger-ui
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
#
# The UI: the module proxy's jaeger module has no UI assets (Jaeger's release builds embed them
# from its jaeger-ui submodule, built with npm), so bin/jaeger alone serves a placeholder page at
# 16686 while its query API (/api/traces) works. With the assets in JAEGER_UI_ASSETS (default
# bin/jaeger-ui, which "ui DIR" fills) "up" has Jaeger serve them: the real UI. The jaeger-ui
# source is on GitHub only (not reachable from the project's machines: see docs/stacks.md).
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
JAEGER_UI_ASSETS=${JAEGER_UI_ASSETS:-$BIN_DIR/jaeger-ui}

main() {
	case "${1:-}" in
	build) jaeger_build ;;
	ui) jaeger_ui "${2:-}" ;;
	up) jaeger_up ;;
	down) stop_process jaeger 15 ;;
	status) jaeger_status ;;
	*)
		echo "usage: $0 up|down|status|build|ui DIR" >&2
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

# jaeger_ui DIR builds the UI's assets from the jaeger-ui checkout at DIR into JAEGER_UI_ASSETS.
# Its package.json asks for node >= 24 (and its .npmrc makes that strict); Debian 12's node 20
# builds it with --engine-strict=false.
jaeger_ui() {
	local src=$1 start
	[[ -f $src/packages/jaeger-ui/package.json ]] || die "usage: $0 ui DIR, DIR a checkout of github.com/jaegertracing/jaeger-ui (tag v1.76.0)"
	require_cmd npm npm
	start=$(now_ns)
	log "jaeger-ui: npm ci and npm run build in $src (minutes)"
	(cd "$src" && npm ci --ignore-scripts --no-audit --no-fund --engine-strict=false && npm run build) >"$(log_file jaeger-ui-build)" 2>&1 ||
		die "jaeger-ui: build failed (log: $(log_file jaeger-ui-build))"
	[[ -f $src/packages/jaeger-ui/build/index.html ]] || die "jaeger-ui: no packages/jaeger-ui/build/index.html after the build"
	rm -rf "$JAEGER_UI_ASSETS"
	cp -r "$src/packages/jaeger-ui/build" "$JAEGER_UI_ASSETS"
	log "jaeger-ui: assets in $JAEGER_UI_ASSETS after $(elapsed_since "$start"); make down && make up TRACING=jaeger to serve them"
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
		local args=(--set=extensions.jaeger_query.http.endpoint="$JAEGER_HOST:$JAEGER_UI_PORT"
			--set=extensions.jaeger_query.grpc.endpoint="$JAEGER_HOST:16685")
		if [[ -f $JAEGER_UI_ASSETS/index.html ]]; then
			args+=(--set=extensions.jaeger_query.ui.assets_path="$JAEGER_UI_ASSETS")
		else
			warn "jaeger: no UI assets in $JAEGER_UI_ASSETS: the UI is Jaeger's placeholder page, the query API works (scripts/jaeger.sh ui DIR)"
		fi
		JAEGER_LISTEN_HOST=$JAEGER_HOST start_bg jaeger "$JAEGER_BIN" "${args[@]}"
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
