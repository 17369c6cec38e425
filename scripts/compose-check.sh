#!/usr/bin/env bash
# compose-check.sh — validate the docker-compose stack without a Docker engine, with the tools
# that will read it:
#
#   1. docker-compose.yml with the compose tool itself, alone and with each profile
#      (observability, loadtest) and with all of them: `config -q` loads the file as `up` would
#      (variables, the env file, YAML anchors, the schema) and runs nothing. It uses `docker
#      compose` (v2) when that answers, else `docker-compose` (v1), installing Debian's
#      docker-compose 1.29 when neither exists; the file is kept valid for both. A warning fails
#      the check too.
#   2. deploy/prometheus/prometheus.yml with promtool (Debian's prometheus package, installed if
#      missing; its service is not started). `go test ./deploy` then also has promtool parse the
#      Grafana dashboard's PromQL.
#
# The Go side (settings, healthchecks, start order, Dockerfile, dashboard against a running app)
# is `go test ./deploy/...`, part of `make test`.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

# One entry per run: none, each profile, all of them (COMPOSE_PROFILES is comma-separated).
PROFILES=('' observability loadtest 'observability,loadtest')

main() {
	cd "$REPO_ROOT"
	local -a compose
	if docker compose version >/dev/null 2>&1; then
		compose=(docker compose)
	else
		require_cmd docker-compose docker-compose
		compose=(docker-compose)
	fi
	log "compose: $("${compose[@]}" version | sed -n 1p)"

	local profile
	for profile in "${PROFILES[@]}"; do
		compose_config "$profile" "${compose[@]}"
	done

	require_cmd promtool prometheus
	promtool check config deploy/prometheus/prometheus.yml >/dev/null ||
		die "promtool: deploy/prometheus/prometheus.yml is invalid"
	log "promtool: deploy/prometheus/prometheus.yml is valid"
}

# compose_config PROFILES COMPOSE... validates docker-compose.yml with COMPOSE_PROFILES=PROFILES
# (both Compose v1 and v2 read that variable).
compose_config() {
	local profiles=$1 errors
	shift
	if ! errors=$(COMPOSE_PROFILES=$profiles "$@" -f docker-compose.yml config -q 2>&1); then
		printf '%s\n' "$errors" >&2
		die "docker-compose.yml is invalid (profiles: ${profiles:-none})"
	fi
	if grep -qi 'warn' <<<"$errors"; then
		printf '%s\n' "$errors" >&2
		die "docker-compose.yml: warnings (profiles: ${profiles:-none})"
	fi
	log "docker-compose.yml is valid (profiles: ${profiles:-none})"
}

main "$@"
