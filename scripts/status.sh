#!/usr/bin/env bash
# status.sh — one line per piece of the local stack: the services, the
# replicas, nginx and Jaeger, whether each answers and whether these scripts started it.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

main() {
	"$SCRIPT_DIR/services.sh" status
	replicas_status
	"$SCRIPT_DIR/nginx.sh" status
	"$SCRIPT_DIR/jaeger.sh" status
}

# Replicas are listed from their pid files: up.sh may have started any number.
replicas_status() {
	local file name addr state
	for file in "$PID_DIR"/replica-*.pid; do
		[[ -e $file ]] || continue
		name=$(basename "$file" .pid)
		is_running "$name" || {
			printf '%-10s %-16s %s\n' "$name" - "DOWN (stale pid file removed)"
			continue
		}
		addr=$(replica_addr "${name#replica-}")
		state=DOWN
		http_ok "http://$addr/healthz" && state=healthy
		printf '%-10s %-16s %s\n' "$name" "$addr" "$state (pid $(read_pid "$name"))"
	done
}

main "$@"
