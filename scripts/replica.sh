#!/usr/bin/env bash
# replica.sh start|kill|term|alive N — one replica of the local stack (see up.sh), for chaos runs:
#   start N   start replica N (127.0.0.1:808N) unless it runs, and wait until it is healthy;
#             it takes the caller's environment (SECKILL_TEST_FAILPOINT, say) over env.sh's
#   kill N    SIGKILL replica N, as a crash would (no shutdown, no cleanup), and wait
#             until it has exited; only the process make up started: fails if its
#             pid file is stale
#   term N    SIGTERM replica N, as a deployment would, and wait until it has drained and
#             exited (SIGKILL after REPLICA_STOP_TIMEOUT, 20 s)
#   alive N   exit 0 if replica N runs (the process the scripts started), 1 if not
# The load test's chaos modes (-chaos kill, -faults) use them.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"
# shellcheck source=scripts/env.sh
. "$SCRIPT_DIR/env.sh"

main() {
	local cmd=${1:-} n=${2:-}
	[[ $n =~ ^[1-9]$ ]] || die "usage: replica.sh start|kill|term|alive N (N = 1..9)"
	case $cmd in
	start)
		is_running "replica-$n" || start_replica_process "$n"
		wait_replica "$n"
		;;
	kill)
		local pid
		pid=$(read_pid "replica-$n") || die "replica-$n: no pid file (was it started by make up?)"
		signal_process "replica-$n" KILL || die "replica-$n: not running: pid $pid is gone or no longer the replica make up started"
		# A SIGKILLed process takes a moment to exit; until it has, "start" would take it for
		# running and wait for a health check it can never pass.
		wait_until "replica-$n (pid $pid) to exit" 5 pid_gone "$pid"
		log "replica-$n: SIGKILLed (pid $pid)"
		;;
	term)
		is_running "replica-$n" || die "replica-$n: not running"
		stop_process "replica-$n" "${REPLICA_STOP_TIMEOUT:-20}"
		;;
	alive) is_running "replica-$n" ;;
	*) die "usage: replica.sh start|kill|term|alive N" ;;
	esac
}

main "$@"
