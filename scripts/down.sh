#!/usr/bin/env bash
# down.sh [all] — stop what up.sh started, by pid file.
#
#   down.sh       nginx, the seckill replicas and Jaeger (make up TRACING=jaeger), if they run
#   down.sh all   also the services that services.sh started: the dev Kafka
#                 broker and ZooKeeper, the Redis Cluster, Sentinel and ZooKeeper
#                 ensemble nodes of any mode, and MariaDB/Redis only if these
#                 scripts started them (what `make down` runs). A MariaDB or
#                 Redis that was already running is left alone.
#
# Replicas get SIGTERM and up to 15 s to drain, then SIGKILL. Data survives:
# MariaDB, .run/zk and .run/kafka keep theirs (make clean removes .run).
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

REPLICA_STOP_TIMEOUT=15

main() {
	case "${1:-}" in
	"" | app) stop_app ;;
	all)
		stop_app
		"$SCRIPT_DIR/services.sh" down
		;;
	*)
		echo "usage: $0 [all]" >&2
		exit 2
		;;
	esac
}

# Jaeger last: the replicas export their last spans as they stop.
stop_app() {
	"$SCRIPT_DIR/nginx.sh" down
	stop_replicas
	"$SCRIPT_DIR/jaeger.sh" down
}

# stop_replicas stops every replica with a pid file, all at once, so three
# draining replicas take 15 s at most, not 45.
stop_replicas() {
	local file name pids=()
	for file in "$PID_DIR"/replica-*.pid; do
		[[ -e $file ]] || continue
		name=$(basename "$file" .pid)
		stop_process "$name" "$REPLICA_STOP_TIMEOUT" &
		pids+=($!)
	done
	((${#pids[@]} == 0)) || wait "${pids[@]}"
}

main "$@"
