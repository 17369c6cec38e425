#!/usr/bin/env bash
# compose-check.sh — validate the docker-compose stack without a Docker engine, with the tools
# that will read it:
#
#   1. docker-compose.yml with the compose tool itself, alone and with each profile
#      (observability, loadtest, cluster, tracing) and with all of them, the cluster form
#      (docker-compose.yml + docker-compose.cluster.yml with profile cluster, alone and with the
#      others) and the tracing form (docker-compose.tracing.yml with profile tracing, alike): `config -q` loads the files as `up` would (variables, the env file, YAML anchors,
#      the schema, the override merged) and runs nothing. It uses `docker
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
PROFILES=('' observability loadtest cluster tracing 'observability,loadtest,cluster,tracing')
# The cluster form's override, with the profiles it is run with (cluster, always).
CLUSTER_OVERRIDE=docker-compose.cluster.yml
CLUSTER_PROFILES=(cluster 'observability,loadtest,cluster,tracing')
# The tracing form's override, with the profiles it is run with (tracing, always).
TRACING_OVERRIDE=docker-compose.tracing.yml
TRACING_PROFILES=(tracing 'observability,loadtest,cluster,tracing')

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
		compose_config "$profile" '' "${compose[@]}"
	done
	for profile in "${CLUSTER_PROFILES[@]}"; do
		compose_config "$profile" "$CLUSTER_OVERRIDE" "${compose[@]}"
	done
	for profile in "${TRACING_PROFILES[@]}"; do
		compose_config "$profile" "$TRACING_OVERRIDE" "${compose[@]}"
	done

	require_cmd promtool prometheus
	promtool check config deploy/prometheus/prometheus.yml >/dev/null ||
		die "promtool: deploy/prometheus/prometheus.yml is invalid"
	log "promtool: deploy/prometheus/prometheus.yml is valid"
}

# compose_config PROFILES OVERRIDE COMPOSE... validates docker-compose.yml, with the override
# file OVERRIDE if not empty, with COMPOSE_PROFILES=PROFILES (both Compose v1 and v2 read that
# variable).
compose_config() {
	local profiles=$1 override=$2 errors what=docker-compose.yml
	shift 2
	local -a files=(-f docker-compose.yml)
	if [[ -n $override ]]; then
		files+=(-f "$override")
		what+=" + $override"
	fi
	if ! errors=$(COMPOSE_PROFILES=$profiles "$@" "${files[@]}" config -q 2>&1); then
		printf '%s\n' "$errors" >&2
		die "$what is invalid (profiles: ${profiles:-none})"
	fi
	if grep -qi 'warn' <<<"$errors"; then
		printf '%s\n' "$errors" >&2
		die "$what: warnings (profiles: ${profiles:-none})"
	fi
	log "$what is valid (profiles: ${profiles:-none})"
}

main "$@"
