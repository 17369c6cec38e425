#!/usr/bin/env bash
# replica.sh start|kill N — one replica of the local stack (see up.sh), for chaos runs:
#   start N   start replica N (127.0.0.1:808N) unless it runs, and wait until it is healthy
#   kill N    SIGKILL replica N, as a crash would (no shutdown, no cleanup); only
#             the process make up started: fails if its pid file is stale
# The load test's `-chaos kill` uses both.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"
# shellcheck source=scripts/env.sh
. "$SCRIPT_DIR/env.sh"

main() {
	local cmd=${1:-} n=${2:-}
	[[ $n =~ ^[1-9]$ ]] || die "usage: replica.sh start|kill N (N = 1..9)"
	case $cmd in
	start)
		is_running "replica-$n" || start_replica_process "$n"
		wait_replica "$n"
		;;
	kill)
		local pid
		pid=$(read_pid "replica-$n") || die "replica-$n: no pid file (was it started by make up?)"
		signal_process "replica-$n" KILL || die "replica-$n: not running: pid $pid is gone or no longer the replica make up started"
		log "replica-$n: SIGKILLed (pid $pid)"
		;;
	*) die "usage: replica.sh start|kill N" ;;
	esac
}

main "$@"
