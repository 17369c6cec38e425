#!/usr/bin/env bash
# services.sh up|down|status|stop NAME|kill NAME|start NAME|name-of ADDR|zk-leader|
#   sentinel-master|cluster-master KEY — the backing services
# of the local stack, without Docker: MariaDB, Redis, ZooKeeper and the dev Kafka broker;
# and for the lock zoo's Redlock and Memcached locks, five more Redis servers
# (redlock1..redlock5 on 127.0.0.1:6390..6394, no persistence at all: a restart
# forgets every lock, the failure Redlock's critics point at) and Memcached
# (127.0.0.1:11211).
#
#   up          start whatever does not answer yet (installing it with apt-get if
#               missing) and wait until each one answers; a service that already
#               answers is used as it is, so running "up" twice is harmless.
#   down        stop what "up" started (it has a pid file in .run/pids); a MariaDB
#               or Redis that was running before is left alone.
#   status      print each service and whether it answers.
#   stop NAME   stop one service (mariadb, redis, zookeeper, kafka), for the chaos
#               run (make chaos). One that these scripts started stops by its pid
#               file. A MariaDB or Redis that was already running is stopped too:
#               how it runs (binary, arguments or settings, user, directory, log)
#               is written to .run/foreign/NAME first, then MariaDB shuts down
#               cleanly and Redis with SHUTDOWN NOSAVE (no RDB snapshot: what it
#               keeps is what its append-only file has, see below).
#   kill NAME   SIGKILL one service, as a crash would (no shutdown, no flush): one
#               these scripts started by its pid file; a MariaDB or Redis that was
#               already running after recording how it runs, as "stop" does.
#   start NAME  start one service again and wait until it answers: one stopped by
#               "stop" the way it ran before (and still not one of ours, so "down"
#               leaves it alone), any other as "up" would. "up" restarts every
#               service that "stop" left recorded, so whatever ends a chaos run,
#               the next "up" puts the machine back as it was.
#
#
# The topologies (issue #17): besides those base services, which always run (the
# tests use them), "up" starts the nodes of the Redis and ZooKeeper topology that
# SECKILL_REDIS_MODE and SECKILL_ZK_MODE choose (scripts/env.sh; make up REDIS_MODE=...
# ZK_MODE=...):
#   SECKILL_REDIS_MODE=single    (default) nothing more: the Redis on 6379
#   SECKILL_REDIS_MODE=cluster   Redis Cluster rc1..rc6 on 127.0.0.1:7001..7006 (bus
#                                17001..17006), three masters with a replica each
#   SECKILL_REDIS_MODE=sentinel  rs1 (master) and rs2 (its replica) on 6401 and 6402,
#                                watched as "seckill" by sentinel1..3 on 26401..26403
#   SECKILL_ZK_MODE=single       (default) nothing more: the ZooKeeper on 2181
#   SECKILL_ZK_MODE=ensemble     zk1..zk3 on 2191..2193 (quorum 2891..2893, election
#                                3891..3893)
# "down" stops every node these scripts started, whatever the mode; stop, kill and
# start take the nodes' names too, and "start" waits until the node has its place
# back: an rcN cluster_state:ok and synced, an rsN the role the sentinels give it
# (a failed-over master is made a replica ~15 s after it is back), a sentinel
# until all three see each other, a zkN until it follows or leads. Their state lives in .run/redis-cluster,
# .run/redis-sentinel and .run/zk-ensemble and outlives a restart: who is master
# after a failover stays so (remove the directory, nodes stopped, to start afresh).
#
#   name-of HOST:PORT   the name of the node on that address (127.0.0.1:7003: rc3)
#   zk-leader           the name of the ensemble's leader (zk1..zk3)
#   sentinel-master     the name of the master the sentinels name (rs1 or rs2)
#   cluster-master KEY  the name of the cluster master that serves KEY's slot
#
# Addresses are fixed (127.0.0.1, default ports) and match scripts/env.sh.
# ZooKeeper keeps its data in .run/zk, the broker in .run/kafka, Redis in .run/redis.
#
# Redis runs with its append-only file on (appendonly yes), fsynced as
# SECKILL_REDIS_APPENDFSYNC says (default always: Redis answers a write only once
# it is on disk): the redis-lua strategy keeps accepted purchases in Redis until its
# persister has written them to MySQL, and they must survive a crash of Redis
# (docs/strategies.md, "What an accepted purchase survives"). "up" turns it on in a
# Redis that was already running too, with CONFIG SET (see redis_ensure_aof).
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"
# shellcheck source=scripts/env.sh
. "$SCRIPT_DIR/env.sh"

HOST=127.0.0.1
MYSQL_PORT=3306
REDIS_PORT=6379
ZK_PORT=2181
KAFKA_PORT=9092
KAFKA_PARTITIONS=6
ZK_DIR=$RUN_DIR/zk
KAFKA_DIR=$RUN_DIR/kafka
REDIS_DIR=$RUN_DIR/redis
REDIS_APPENDFSYNC=${SECKILL_REDIS_APPENDFSYNC:-always}
FOREIGN_DIR=$RUN_DIR/foreign
JAVA_LIB=/usr/share/java

REDLOCK_BASE_PORT=6390
REDLOCK_SERVERS=5
MEMCACHED_PORT=11211

# The topologies' nodes (see the header); their ports are BASE + N.
REDIS_MODE=${SECKILL_REDIS_MODE:-single}
ZK_MODE=${SECKILL_ZK_MODE:-single}
CLUSTER_SIZE=6
CLUSTER_BASE_PORT=7000 # rcN on 7000+N, its cluster bus on 17000+N
CLUSTER_DIR=$RUN_DIR/redis-cluster
SENTINEL_REDIS_BASE_PORT=6400 # rsN on 6400+N
SENTINEL_BASE_PORT=26400      # sentinelN on 26400+N
SENTINEL_DIR=$RUN_DIR/redis-sentinel
SENTINEL_MASTER=seckill
ZK_ENSEMBLE_SIZE=3
ZK_ENSEMBLE_BASE_PORT=2190 # zkN's clients on 2190+N, quorum on 2890+N, election on 3890+N
ZK_ENSEMBLE_DIR=$RUN_DIR/zk-ensemble

# Services in start order; "down" goes in reverse.
SERVICES=(mariadb redis zookeeper kafka)
for ((n = 1; n <= REDLOCK_SERVERS; n++)); do
	SERVICES+=("redlock$n")
done
SERVICES+=(memcached)

CLUSTER_SERVICES=()
for ((n = 1; n <= CLUSTER_SIZE; n++)); do
	CLUSTER_SERVICES+=("rc$n")
done
SENTINEL_REDIS_SERVICES=(rs1 rs2)
SENTINEL_SERVICES=(sentinel1 sentinel2 sentinel3)
ZK_ENSEMBLE_SERVICES=()
for ((n = 1; n <= ZK_ENSEMBLE_SIZE; n++)); do
	ZK_ENSEMBLE_SERVICES+=("zk$n")
done
# Every service these scripts know, the topologies' nodes last: what "down" stops
# (in reverse) and what stop, kill and start accept.
ALL_SERVICES=("${SERVICES[@]}" "${CLUSTER_SERVICES[@]}" "${SENTINEL_REDIS_SERVICES[@]}"
	"${SENTINEL_SERVICES[@]}" "${ZK_ENSEMBLE_SERVICES[@]}")

main() {
	case $REDIS_MODE in single | cluster | sentinel) ;; *) die "SECKILL_REDIS_MODE=$REDIS_MODE: want single, cluster or sentinel" ;; esac
	case $ZK_MODE in single | ensemble) ;; *) die "SECKILL_ZK_MODE=$ZK_MODE: want single or ensemble" ;; esac
	case "${1:-}" in
	up) services_up ;;
	down) services_down ;;
	status) services_status ;;
	stop | kill | start)
		is_service "${2:-}" || die "usage: $0 $1 ${ALL_SERVICES[*]// /|}"
		"service_$1" "$2"
		# A node back in its topology: wait until it has taken its place there.
		if [[ $1 == start ]] && declare -F "${2}_settle" >/dev/null; then "${2}_settle"; fi
		;;
	name-of) name_of "${2:-}" ;;
	zk-leader) zk_leader ;;
	sentinel-master) sentinel_master ;;
	cluster-master) cluster_master "${2:-}" ;;
	*)
		echo "usage: $0 up|down|status|stop NAME|kill NAME|start NAME|name-of HOST:PORT|zk-leader|sentinel-master|cluster-master KEY" >&2
		exit 2
		;;
	esac
}

is_service() {
	local svc
	for svc in "${ALL_SERVICES[@]}"; do
		[[ $1 == "$svc" ]] && return 0
	done
	return 1
}

# mode_services prints, one a line, the topology nodes that the modes choose.
mode_services() {
	case $REDIS_MODE in
	cluster) printf '%s\n' "${CLUSTER_SERVICES[@]}" ;;
	sentinel) printf '%s\n' "${SENTINEL_REDIS_SERVICES[@]}" "${SENTINEL_SERVICES[@]}" ;;
	esac
	if [[ $ZK_MODE == ensemble ]]; then printf '%s\n' "${ZK_ENSEMBLE_SERVICES[@]}"; fi
}

services_up() {
	ensure_run_dirs
	local svc
	for svc in "${SERVICES[@]}"; do
		service_start "$svc"
	done
	redis_ensure_aof
	require_cmd mysql mariadb-client
	mariadb_ensure_root_over_tcp
	mariadb_ensure_database
	topology_up
}

# topology_up starts the nodes of the chosen modes, a topology's nodes at once
# (an ensemble serves only once a quorum of it runs; a cluster forms only once
# all of its nodes answer), then makes sure each topology works.
topology_up() {
	case $REDIS_MODE in
	cluster)
		start_together "${CLUSTER_SERVICES[@]}"
		redis_cluster_ensure
		;;
	sentinel)
		# The data servers first: sentinels that found no master would count it down.
		start_together "${SENTINEL_REDIS_SERVICES[@]}"
		start_together "${SENTINEL_SERVICES[@]}"
		sentinel_ensure
		;;
	esac
	if [[ $ZK_MODE == ensemble ]]; then start_together "${ZK_ENSEMBLE_SERVICES[@]}"; fi
}

# start_together NAME... is ensure_service for a group of nodes: every one that
# does not answer is started first, then each is waited for.
start_together() {
	local name start pending=()
	for name; do
		if "${name}_answers"; then
			log "$name: already answers on $(service_addr "$name")"
			continue
		fi
		if is_running "$name"; then
			log "$name: started earlier (pid $(read_pid "$name")), waiting for it"
		else
			"${name}_install"
			log "$name: starting"
			"${name}_start"
		fi
		pending+=("$name")
	done
	start=$(now_ns)
	for name in "${pending[@]}"; do
		wait_ready "$name" "$(start_timeout "$name")" "${name}_answers" ||
			die "$name did not become ready (log: $(log_file "$name"))"
		log "$name: ready on $(service_addr "$name") after $(elapsed_since "$start")"
	done
}

services_down() {
	local i svc
	for ((i = ${#ALL_SERVICES[@]} - 1; i >= 0; i--)); do
		svc=${ALL_SERVICES[i]}
		if is_running "$svc"; then
			stop_process "$svc" "$(stop_timeout "$svc")"
		elif "${svc}_answers"; then
			log "$svc: not started by these scripts, left running"
		fi
	done
}

# services_status lists the base services, the nodes of the chosen modes, and any
# other node that runs.
services_status() {
	local svc state chosen
	chosen=" $(mode_services | tr '\n' ' ') "
	for svc in "${ALL_SERVICES[@]}"; do
		if ! is_service_base "$svc" && [[ $chosen != *" $svc "* ]] && ! is_running "$svc"; then
			continue
		fi
		if "${svc}_answers"; then
			state=up
			if declare -F "${svc}_role" >/dev/null; then state+=" [$("${svc}_role")]"; fi
		else
			state=DOWN
		fi
		if is_running "$svc"; then
			state+=" (started by these scripts, pid $(read_pid "$svc"))"
		elif [[ $state == up ]]; then
			state+=" (not started by these scripts)"
		elif [[ -f $(foreign_record "$svc") ]]; then
			state+=" (stopped by services.sh stop: services.sh start $svc or up restarts it as it ran)"
		fi
		printf '%-10s %-16s %s\n' "$svc" "$(service_addr "$svc")" "$state"
	done
}

is_service_base() {
	local svc
	for svc in "${SERVICES[@]}"; do
		[[ $1 == "$svc" ]] && return 0
	done
	return 1
}

# service_stop NAME stops one service and waits until it is gone (see the header).
service_stop() {
	local name=$1 start
	start=$(now_ns)
	if is_running "$name"; then
		stop_process "$name" "$(stop_timeout "$name")"
	elif ! "${name}_answers"; then
		log "$name: not running"
		return 0
	elif declare -F "${name}_stop_foreign" >/dev/null; then
		"${name}_stop_foreign"
	else
		die "$name: not started by these scripts, and they restart only a MariaDB or Redis they did not start"
	fi
	log "$name: stopped after $(elapsed_since "$start")"
}

# service_kill NAME SIGKILLs one service and waits until it is gone (see the header).
service_kill() {
	local name=$1 pid
	if is_running "$name"; then
		pid=$(read_pid "$name")
		signal_process "$name" KILL
		wait_until "$name (pid $pid) to die" 5 pid_gone "$pid" || die "$name (pid $pid) survived SIGKILL"
		rm -f "$(pid_file "$name")"
	elif ! "${name}_answers"; then
		log "$name: not running"
		return 0
	elif declare -F "${name}_kill_foreign" >/dev/null; then
		"${name}_kill_foreign"
	else
		die "$name: not started by these scripts, and they crash only a MariaDB or Redis they did not start"
	fi
	log "$name: SIGKILLed"
}

# service_start NAME starts one service (the way it ran, if "stop" recorded it)
# and waits until it answers.
service_start() {
	local name=$1
	if [[ -f $(foreign_record "$name") ]]; then
		if "${name}_answers"; then
			warn "$name: answers again by itself; forgetting how it ran before the stop"
		else
			foreign_restart "$name"
		fi
		rm -f "$(foreign_record "$name")" "$FOREIGN_DIR/$name.conf"
	fi
	ensure_service "$name"
}

# ---------------------------------------------------------------- services we did not start

# A service these scripts did not start is restarted from a record of how it ran,
# .run/foreign/NAME: NUL-separated fields user, working directory, log file, and
# the command line. It is started in a session of its own, as that user, with no pid
# file in .run/pids: it stays "not started by these scripts".

foreign_record() { printf '%s/%s' "$FOREIGN_DIR" "$1"; }

# record_foreign NAME PID LOG ARGV... writes NAME's record: PID's user and working
# directory, where its output goes, and how to start it.
record_foreign() {
	local name=$1 pid=$2 logf=$3 uid user cwd
	shift 3
	mkdir -p "$FOREIGN_DIR"
	uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status") || die "$name: pid $pid is gone"
	user=$(getent passwd "$uid" | cut -d: -f1)
	[[ -n $user ]] || user=$uid
	cwd=$(readlink "/proc/$pid/cwd") || cwd=/
	printf '%s\0' "$user" "$cwd" "$logf" "$@" >"$(foreign_record "$name")"
	log "$name: not started by these scripts; recorded how it runs (pid $pid, user $user) in $(foreign_record "$name")"
}

foreign_restart() {
	local name=$1 fields user cwd logf
	mapfile -d '' -t fields <"$(foreign_record "$name")"
	((${#fields[@]} >= 4)) || die "$name: unreadable record $(foreign_record "$name")"
	user=${fields[0]} cwd=${fields[1]} logf=${fields[2]}
	fields=("${fields[@]:3}")
	"${name}_prepare_foreign" "$user"
	if [[ $user != root && $(id -u) == 0 ]]; then
		fields=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups "${fields[@]}")
	fi
	log "$name: starting again as it ran before the stop: ${fields[*]}"
	# Every file descriptor away from ours: whoever reads this script's output (the
	# load test) must see it end when the script does, not when the service does.
	(cd "$cwd" && exec setsid "${fields[@]}") </dev/null >>"$logf" 2>&1 &
	local start
	start=$(now_ns)
	wait_until "$name to answer again" "$(start_timeout "$name")" "${name}_answers" ||
		die "$name did not answer after its restart (output: $logf)"
	log "$name: answers again after $(elapsed_since "$start")"
}

# ensure_service NAME: NAME answers when this returns. It uses a running
# instance, waits for one we started earlier, or installs and starts one.
ensure_service() {
	local name=$1 start
	if "${name}_answers"; then
		log "$name: already answers on $(service_addr "$name")"
		return 0
	fi
	if is_running "$name"; then
		log "$name: started earlier (pid $(read_pid "$name")), waiting for it"
	else
		"${name}_install"
		log "$name: starting"
		start=$(now_ns)
		"${name}_start"
	fi
	wait_ready "$name" "$(start_timeout "$name")" "${name}_answers" ||
		die "$name did not become ready (log: $(log_file "$name"))"
	log "$name: ready on $(service_addr "$name")${start:+ after $(elapsed_since "$start")}"
}

service_addr() {
	case $1 in
	mariadb) echo "$HOST:$MYSQL_PORT" ;;
	redis) echo "$HOST:$REDIS_PORT" ;;
	redlock*) echo "$HOST:$(redlock_port "$1")" ;;
	memcached) echo "$HOST:$MEMCACHED_PORT" ;;
	zookeeper) echo "$HOST:$ZK_PORT" ;;
	kafka) echo "$HOST:$KAFKA_PORT" ;;
	rc[0-9]* | rs[0-9]* | sentinel[0-9]* | zk[0-9]*) echo "$HOST:$(node_port "$1")" ;;
	esac
}

# node_port NAME is the port of a topology node (rcN, rsN, sentinelN, zkN's clients).
node_port() {
	case $1 in
	rc[0-9]*) echo $((CLUSTER_BASE_PORT + ${1#rc})) ;;
	rs[0-9]*) echo $((SENTINEL_REDIS_BASE_PORT + ${1#rs})) ;;
	sentinel[0-9]*) echo $((SENTINEL_BASE_PORT + ${1#sentinel})) ;;
	zk[0-9]*) echo $((ZK_ENSEMBLE_BASE_PORT + ${1#zk})) ;;
	*) return 1 ;;
	esac
}

start_timeout() {
	case $1 in
	zookeeper | zk[0-9]*) echo 60 ;;
	*) echo 30 ;;
	esac
}

# MariaDB flushes InnoDB on a clean shutdown: give it longer than the rest.
stop_timeout() {
	case $1 in
	mariadb) echo 60 ;;
	*) echo 15 ;;
	esac
}

# ---------------------------------------------------------------- MariaDB

# mysqladmin ping succeeds whenever the server runs, even if the login is
# refused, but not when the server refuses the host itself (error 1130): a
# fresh Debian install has no root@127.0.0.1 until mariadb_ensure_root_over_tcp.
# Without the client installed, an open port has to do.
mariadb_answers() {
	local out
	if ! command -v mysqladmin >/dev/null; then
		port_open "$HOST" "$MYSQL_PORT"
		return
	fi
	out=$(mysqladmin -h"$HOST" -P"$MYSQL_PORT" -uroot --connect-timeout=2 ping 2>&1) && return 0
	[[ $out == *"is not allowed to connect"* ]]
}

mariadb_install() {
	[[ -x /usr/sbin/mariadbd ]] || apt_install mariadb-server
}

mariadb_start() {
	install -d -o mysql -g mysql /run/mysqld
	start_bg mariadb /usr/sbin/mariadbd --user=mysql --bind-address="$HOST" --port="$MYSQL_PORT"
}

# mariadb_record_foreign records how a MariaDB these scripts did not start runs:
# the same binary and arguments, as the same user (mariadbd drops to it by
# itself with --user, as FACTS.md starts it), output to the same file. It prints
# its pid.
mariadb_record_foreign() {
	local pid pidfile exe out args=()
	pidfile=$(mysql_root -h"$HOST" -P"$MYSQL_PORT" -N -B -e 'SELECT @@pid_file' 2>/dev/null) ||
		die "mariadb: cannot ask it for its pid file (root over TCP refused?)"
	read -r pid <"$pidfile" || true
	[[ $pid =~ ^[0-9]+$ ]] || die "mariadb: no pid in $pidfile"
	exe=$(readlink "/proc/$pid/exe") || die "mariadb: pid $pid is gone"
	mapfile -d '' -t args <"/proc/$pid/cmdline"
	args=("${args[@]:1}")
	out=$(readlink "/proc/$pid/fd/2") || true
	[[ $out == /* && -w $out ]] || out=$(log_file mariadb-restarted)
	record_foreign mariadb "$pid" "$out" "$exe" "${args[@]}"
	echo "$pid"
}

# mariadb_stop_foreign stops a MariaDB these scripts did not start, cleanly
# (mysqladmin shutdown, SIGTERM if that is refused), after recording how it ran.
mariadb_stop_foreign() {
	local pid
	pid=$(mariadb_record_foreign)
	log "mariadb: shutting down pid $pid"
	mysqladmin -h"$HOST" -P"$MYSQL_PORT" -uroot --connect-timeout=5 shutdown 2>/dev/null || kill -TERM "$pid"
	wait_until "mariadb (pid $pid) to exit" "$(stop_timeout mariadb)" pid_gone "$pid" ||
		die "mariadb (pid $pid) still runs $(stop_timeout mariadb)s after its shutdown"
}

# mariadb_kill_foreign SIGKILLs a MariaDB these scripts did not start, after
# recording how it ran: a crash, after which InnoDB recovers from its redo log what
# it had committed (innodb_flush_log_at_trx_commit=1 writes and syncs the log at
# every commit).
mariadb_kill_foreign() {
	local pid
	pid=$(mariadb_record_foreign)
	log "mariadb: SIGKILL (pid $pid)"
	kill -KILL "$pid"
	wait_until "mariadb (pid $pid) to die" 5 pid_gone "$pid" || die "mariadb (pid $pid) survived SIGKILL"
}

# mariadb_prepare_foreign USER: the directory of its socket and pid file, which
# does not survive a reboot (no systemd here to make it).
mariadb_prepare_foreign() {
	if [[ $1 == root ]]; then install -d /run/mysqld; else install -d -o "$1" -g "$(id -g "$1")" /run/mysqld; fi
}

mysql_root() { mysql -uroot "$@"; }

mariadb_root_over_tcp() { mysql_root -h"$HOST" -P"$MYSQL_PORT" -e 'SELECT 1' >/dev/null 2>&1; }

# A fresh Debian install lets root in only through the unix socket; the app
# and the tests connect over TCP as root with an empty password (dev only).
# Only a server these scripts started is changed; any other is left as it is.
mariadb_ensure_root_over_tcp() {
	mariadb_root_over_tcp && return 0
	if ! is_running mariadb; then
		warn "mariadb: root cannot log in over TCP without a password; set SECKILL_MYSQL_DSN for this server"
		return 0
	fi
	log "mariadb: allowing root over TCP with an empty password (dev only)"
	mysql_root --protocol=socket -e "
		ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
		CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
		GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" ||
		die "mariadb: cannot log in as root over TCP, and the socket login failed too"
}

# The app's migrations need the database of SECKILL_MYSQL_DSN to exist.
mariadb_ensure_database() {
	local db=${SECKILL_MYSQL_DSN##*/}
	db=${db%%\?*}
	[[ $db =~ ^[A-Za-z0-9_]+$ ]] || die "cannot read a database name from SECKILL_MYSQL_DSN"
	mariadb_root_over_tcp || return 0
	mysql_root -h"$HOST" -P"$MYSQL_PORT" -e "CREATE DATABASE IF NOT EXISTS \`$db\` CHARACTER SET utf8mb4"
	mariadb_check_durability
}

# mariadb_check_durability warns when the server syncs its redo log less often than
# at every commit: a crash would then lose purchases it acknowledged
# (docs/failure-modes.md, Durability).
mariadb_check_durability() {
	local flush
	flush=$(mysql_root -h"$HOST" -P"$MYSQL_PORT" -N -B -e 'SELECT @@innodb_flush_log_at_trx_commit' 2>/dev/null) || return 0
	[[ $flush == 1 ]] ||
		warn "mariadb: innodb_flush_log_at_trx_commit=$flush: a crash may lose committed purchases (set it to 1: docs/failure-modes.md)"
}

# ---------------------------------------------------------------- Redis

# RESP PING over /dev/tcp: works without redis-cli.
redis_answers() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"; printf "PING\r\n" >&3; read -r reply <&3; [[ $reply == +PONG* ]]' \
		"$HOST" "$REDIS_PORT" 2>/dev/null
}

redis_install() {
	command -v redis-server >/dev/null || apt_install redis-server
}

# Persistence is the append-only file alone, in .run/redis (which survives a
# reboot, unlike /run), replayed at every start; no RDB snapshots.
redis_start() {
	local as_redis=()
	if id redis >/dev/null 2>&1; then
		install -d -o redis -g redis "$REDIS_DIR"
		as_redis=(setpriv --reuid=redis --regid=redis --init-groups)
	else
		install -d "$REDIS_DIR"
	fi
	start_bg redis "${as_redis[@]}" redis-server --daemonize no --bind "$HOST" --port "$REDIS_PORT" \
		--dir "$REDIS_DIR" --save "" --appendonly yes --appendfsync "$REDIS_APPENDFSYNC"
}

# redis_ensure_aof turns the append-only file on, fsynced as REDIS_APPENDFSYNC
# says, in the Redis on 127.0.0.1:6379 if it is not yet: one these scripts
# started earlier without it, or one that was already running (a Debian package's
# redis-server, a developer's own). CONFIG SET rather than a restart, because that
# Redis may be serving others (tests, a CI job) that a restart would interrupt and
# whose data it would lose; Redis writes its data to a new append-only file in its
# own directory in the background and appends from then on. Nothing is written to
# its configuration file (no CONFIG REWRITE): restarted by its owner, it runs as its
# owner set it again, and the next "up" turns the file on again. What it costs
# everyone sharing it is an fsync per batch of writes (docs/strategies.md).
redis_ensure_aof() {
	local on fsync
	redis_answers || return 0
	if ! command -v redis-cli >/dev/null; then
		warn "redis: no redis-cli to check its append-only file (apt-get install redis-tools)"
		return 0
	fi
	on=$(redis_cli --raw CONFIG GET appendonly 2>/dev/null | sed -n 2p)
	fsync=$(redis_cli --raw CONFIG GET appendfsync 2>/dev/null | sed -n 2p)
	[[ $on == yes && $fsync == "$REDIS_APPENDFSYNC" ]] && return 0
	log "redis: appendonly $on, appendfsync $fsync: setting appendonly yes, appendfsync $REDIS_APPENDFSYNC (CONFIG SET, not saved to its config file)"
	if ! redis_cli CONFIG SET appendfsync "$REDIS_APPENDFSYNC" appendonly yes | grep -q '^OK'; then
		warn "redis: CONFIG SET refused: accepted redis-lua purchases do not survive a crash of this Redis"
	fi
}

# redis_stop_foreign stops a Redis these scripts did not start with SHUTDOWN
# NOSAVE, after recording how it runs (redis_record_foreign). It runs again from
# that record with the same data directory and persistence: its data is gone
# unless it keeps an append-only file, which "up" turns on.
redis_stop_foreign() {
	local pid
	pid=$(redis_record_foreign)
	log "redis: SHUTDOWN NOSAVE (pid $pid)"
	redis_cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	wait_until "redis (pid $pid) to exit" "$(stop_timeout redis)" pid_gone "$pid" ||
		die "redis (pid $pid) still runs after SHUTDOWN NOSAVE"
}

# redis_kill_foreign SIGKILLs a Redis these scripts did not start, after
# recording how it runs: a crash, after which it keeps what its append-only file
# had on disk.
redis_kill_foreign() {
	local pid
	pid=$(redis_record_foreign)
	log "redis: SIGKILL (pid $pid)"
	kill -KILL "$pid"
	wait_until "redis (pid $pid) to die" 5 pid_gone "$pid" || die "redis (pid $pid) survived SIGKILL"
}

# redis_record_foreign writes the settings that matter of a Redis these scripts
# did not start to .run/foreign/redis.conf (the command line of a running Redis
# cannot be read back: it rewrites its process title) and records that it runs
# from that file, as the same user: same address, data directory, persistence,
# log and daemonizing. It prints the Redis's pid.
redis_record_foreign() {
	require_cmd redis-cli redis-tools
	local pid exe prog conf=$FOREIGN_DIR/redis.conf param value all i
	local -A config=()
	pid=$(redis_cli INFO server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')
	[[ $pid =~ ^[0-9]+$ ]] || die "redis: cannot ask it for its pid"
	exe=$(readlink "/proc/$pid/exe") || die "redis: pid $pid is gone"
	# Every setting in one call (name and value lines in turn): the chaos run kills Redis
	# right after, and a call per setting took seconds on a busy machine.
	mapfile -t all < <(redis_cli --raw CONFIG GET '*')
	for ((i = 0; i + 1 < ${#all[@]}; i += 2)); do
		config[${all[i]}]=${all[i + 1]}
	done
	mkdir -p "$FOREIGN_DIR"
	(
		umask 077 # requirepass may be among them
		printf '# Written by scripts/services.sh stop/kill redis: the settings of the Redis it stopped.\n' >"$conf"
		for param in bind port unixsocket unixsocketperm protected-mode requirepass dir dbfilename save \
			appendonly appendfilename appenddirname appendfsync daemonize pidfile logfile loglevel databases \
			maxmemory maxmemory-policy maxclients timeout tcp-keepalive; do
			[[ -v config[$param] ]] || continue # unknown to this Redis (appenddirname before 7.0)
			value=${config[$param]}
			case $param in
			bind | save) printf '%s %s\n' "$param" "${value:-\"\"}" ;; # several words, each one argument
			*) printf '%s "%s"\n' "$param" "${value//\"/\\\"}" ;;
			esac
		done >>"$conf"
	)
	# Debian's redis-server is a link to redis-check-rdb, which serves only when
	# called by the name redis-server: start it by that name again.
	prog=$exe
	if [[ ${exe##*/} != redis-server ]]; then
		prog=$(dirname -- "$exe")/redis-server
		[[ -x $prog ]] || prog=$(command -v redis-server) || die "redis: $exe is not redis-server, and no redis-server is on PATH"
	fi
	record_foreign redis "$pid" "$(log_file redis-restarted)" "$prog" "$conf"
	printf '%s' "$pid"
}

redis_prepare_foreign() {
	if [[ $1 == root ]]; then install -d /run/redis; else install -d -o "$1" -g "$(id -g "$1")" /run/redis; fi
}

# redis_cli ARGS... runs redis-cli against the local Redis (with the app's password, if any).
redis_cli() {
	if [[ -n ${SECKILL_REDIS_PASSWORD:-} ]]; then
		REDISCLI_AUTH=$SECKILL_REDIS_PASSWORD redis-cli -h "$HOST" -p "$REDIS_PORT" "$@"
	else
		redis-cli -h "$HOST" -p "$REDIS_PORT" "$@"
	fi
}

# ---------------------------------------------------------------- ZooKeeper

# "ruok" answers imok before the server serves sessions; "srvr" prints a
# Mode: line only once it does.
zookeeper_answers() {
	four_letter "$HOST" "$ZK_PORT" srvr | grep '^Mode:' >/dev/null
}

zookeeper_install() {
	[[ -f $JAVA_LIB/zookeeper.jar ]] || apt_install zookeeper
}

zookeeper_start() {
	local cp
	zookeeper_write_config
	cp=$(zookeeper_classpath)
	start_bg zookeeper java -Xmx512m -XX:+UseSerialGC \
		-Dlog4j.configuration="file:$ZK_DIR/log4j.properties" \
		-cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZK_DIR/zoo.cfg"
}

# zookeeper_classpath prints the server jar plus slf4j's log4j binding and
# log4j 1.2, as Debian names them (with or without version suffixes).
zookeeper_classpath() {
	local jar found cp=''
	for jar in zookeeper slf4j-log4j12 log4j-1.2; do
		found=$(find_jar "$jar") || die "zookeeper: no $jar jar in $JAVA_LIB (is the zookeeper package installed?)"
		cp+=${cp:+:}$found
	done
	printf '%s' "$cp"
}

find_jar() {
	local name=$1 f
	for f in "$JAVA_LIB/$name.jar" "$JAVA_LIB/$name"-[0-9]*.jar; do
		[[ -f $f ]] && {
			printf '%s' "$f"
			return 0
		}
	done
	return 1
}

zookeeper_write_config() {
	mkdir -p "$ZK_DIR/data"
	cat >"$ZK_DIR/zoo.cfg" <<EOF
# Written by scripts/services.sh: a single dev server on 127.0.0.1 only.
tickTime=2000
dataDir=$ZK_DIR/data
clientPort=$ZK_PORT
clientPortAddress=$HOST
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
EOF
	zookeeper_log4j >"$ZK_DIR/log4j.properties"
}

zookeeper_log4j() {
	cat <<'EOF'
# Written by scripts/services.sh: everything to stdout, which goes to .run/logs/<name>.log.
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
EOF
}

# ---------------------------------------------------------------- Kafka (devbroker)

# Our own broker is ready once it has loaded its data dir and printed its
# address; one we did not start is ready when it accepts connections.
kafka_answers() {
	port_open "$HOST" "$KAFKA_PORT" || return 1
	is_running kafka || return 0
	grep -q '^devbroker: listening' "$(log_file kafka)"
}

# kafka_install builds bin/devbroker if it is missing or older than its sources.
kafka_install() {
	local bin=$BIN_DIR/devbroker
	if [[ -x $bin ]] && [[ -z $(find "$REPO_ROOT/cmd/devbroker" "$REPO_ROOT/go.mod" "$REPO_ROOT/go.sum" -newer "$bin" -print -quit) ]]; then
		return 0
	fi
	log "kafka: building $bin"
	(cd "$REPO_ROOT" && go build -o "$bin" ./cmd/devbroker)
}

kafka_start() {
	mkdir -p "$KAFKA_DIR"
	start_bg kafka "$BIN_DIR/devbroker" -port "$KAFKA_PORT" -data-dir "$KAFKA_DIR" \
		-partitions "$KAFKA_PARTITIONS" -topics "$SECKILL_KAFKA_TOPIC,$SECKILL_KAFKA_TOPIC.lifecycle"
}

# ---------------------------------------------------------------- Redlock's servers

# redlock_port NAME is the port of redlockN.
redlock_port() { echo $((REDLOCK_BASE_PORT + ${1#redlock} - 1)); }

# redis_pong_on PORT: the Redis (or sentinel) on PORT answers PING.
redis_pong_on() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"; printf "PING\r\n" >&3; read -r reply <&3; [[ $reply == +PONG* ]]' \
		"$HOST" "$1" 2>/dev/null
}

# Independent masters with nothing on disk: what Redlock assumes, and what makes a
# restart forget the locks it held.
redlock_start_one() {
	start_bg "$1" redis-server --daemonize no --bind "$HOST" --port "$(redlock_port "$1")" \
		--save "" --appendonly no --dir "$RUN_DIR"
}

# The service functions of redlock1..redlockN, which ensure_service and the rest
# call by name.
for ((n = 1; n <= REDLOCK_SERVERS; n++)); do
	eval "redlock${n}_answers() { redis_pong_on \"\$(redlock_port redlock$n)\"; }"
	eval "redlock${n}_install() { redis_install; }"
	eval "redlock${n}_start() { redlock_start_one redlock$n; }"
done

# ---------------------------------------------------------------- Memcached

memcached_answers() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"; printf "version\r\n" >&3; read -r reply <&3; [[ $reply == VERSION* ]]' \
		"$HOST" "$MEMCACHED_PORT" 2>/dev/null
}

memcached_install() {
	command -v memcached >/dev/null || apt_install memcached
}

# memcached refuses to run as root unless told a user to become: nobody.
memcached_start() {
	start_bg memcached memcached -l "$HOST" -p "$MEMCACHED_PORT" -U 0 -m 64 -u nobody
}

# ---------------------------------------------------------------- topologies: shared

# node_cli NAME ARGS... runs redis-cli against a Redis or sentinel node, replies raw.
node_cli() {
	local name=$1
	shift
	redis-cli --raw -h "$HOST" -p "$(node_port "$name")" "$@"
}

# node_role NAME prints master or replica, as the Redis NAME says it is.
node_role() {
	case $(node_cli "$1" ROLE 2>/dev/null | head -n 1) in
	master) echo master ;;
	slave) echo "replica of $(name_of "$(node_cli "$1" ROLE | sed -n 2p):$(node_cli "$1" ROLE | sed -n 3p)")" ;;
	*) echo unknown ;;
	esac
}

topology_redis_install() {
	redis_install
	require_cmd redis-cli redis-tools
}

# name_of HOST:PORT prints the name of the service on that port (every one is on HOST).
name_of() {
	local port=${1##*:} svc
	[[ $port =~ ^[0-9]+$ ]] || die "usage: $0 name-of HOST:PORT"
	for svc in "${ALL_SERVICES[@]}"; do
		if [[ $(service_addr "$svc") == *":$port" ]]; then
			printf '%s\n' "$svc"
			return 0
		fi
	done
	die "no service of these scripts on port $port"
}

# ---------------------------------------------------------------- Redis Cluster

# rc_start NAME starts one cluster node. Its directory keeps nodes.conf (the node's
# id and what it knows of the cluster), so a node that comes back rejoins as what
# the others made of it: a master that was failed over comes back a replica.
# cluster-replica-validity-factor 0: a replica may always be promoted, however long
# it has been cut off from its master; by default one that lost its link for long
# refuses, and the failover tests cut replication on purpose.
# cluster-require-full-coverage no: while a dead master's slots wait for their replica
# (node timeout + election, ~4 s here), the other masters keep serving theirs: one
# product's outage, not the whole shop's (the default stops every slot).
rc_start() {
	local name=$1 dir=$CLUSTER_DIR/${1#rc}
	mkdir -p "$dir"
	start_bg "$name" redis-server --daemonize no --bind "$HOST" --port "$(node_port "$name")" --dir "$dir" \
		--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
		--cluster-replica-validity-factor 0 --cluster-require-full-coverage no \
		--save "" --appendonly yes --appendfsync "$REDIS_APPENDFSYNC"
}

for ((n = 1; n <= CLUSTER_SIZE; n++)); do
	eval "rc${n}_answers() { redis_pong_on \"\$(node_port rc$n)\"; }"
	eval "rc${n}_install() { topology_redis_install; }"
	eval "rc${n}_start() { rc_start rc$n; }"
	eval "rc${n}_role() { node_role rc$n; }"
	eval "rc${n}_settle() { rc_settle rc$n; }"
done

# cluster_info NAME FIELD prints one field of CLUSTER INFO on node NAME.
cluster_info() {
	node_cli "$1" CLUSTER INFO 2>/dev/null | tr -d '\r' | awk -F: -v f="$2" '$1 == f {print $2}'
}

cluster_node_ok() { [[ $(cluster_info "$1" cluster_state) == ok ]]; }

# redis_in_sync NAME: a master, or a replica whose link to its master is up (its
# first sync done).
redis_in_sync() {
	local info
	info=$(node_cli "$1" INFO replication 2>/dev/null | tr -d '\r')
	[[ $info == *role:master* || $info == *master_link_status:up* ]]
}

rc_in_place() { cluster_node_ok "$1" && redis_in_sync "$1"; }

cluster_all_ok() {
	local svc
	for svc in "${CLUSTER_SERVICES[@]}"; do
		cluster_node_ok "$svc" || return 1
	done
}

# redis_cluster_ensure makes the six nodes one cluster, three masters with a
# replica each, if no node has a slot yet (the first "up", or the nodes' state
# removed); otherwise the cluster is left as it is. Either way it returns once
# every node says cluster_state:ok.
redis_cluster_ensure() {
	local svc assigned=0 n addrs=() start created=''
	start=$(now_ns)
	for svc in "${CLUSTER_SERVICES[@]}"; do
		n=$(cluster_info "$svc" cluster_slots_assigned)
		assigned=$((assigned + ${n:-0}))
		addrs+=("$(service_addr "$svc")")
	done
	if ((assigned == 0)); then
		# Without slots a node holds no keys: a node that met others in a create
		# that did not finish can be reset, which --cluster create requires.
		for svc in "${CLUSTER_SERVICES[@]}"; do
			if (($(cluster_info "$svc" cluster_known_nodes) > 1)); then
				log "$svc: knows other nodes but no slots: CLUSTER RESET HARD"
				node_cli "$svc" CLUSTER RESET HARD >/dev/null
			fi
		done
		log "redis cluster: creating it over ${addrs[*]} (one replica per master)"
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
			>>"$(log_file redis-cluster-create)" 2>&1 ||
			die "redis cluster: create failed (output: $(log_file redis-cluster-create))"
		created=1
	fi
	wait_until "every cluster node to say cluster_state:ok" 30 cluster_all_ok ||
		die "redis cluster: not ok on every node (redis-cli -p $((CLUSTER_BASE_PORT + 1)) cluster nodes; to start afresh: stop rc1..rc$CLUSTER_SIZE, rm -r $CLUSTER_DIR)"
	log "redis cluster: ok on all $CLUSTER_SIZE nodes${created:+, created in $(elapsed_since "$start")}"
}

# rc_settle NAME waits, after "start NAME", until the node says cluster_state:ok
# (one back from a crash first learns what the others decided while it was away)
# and, a replica, has synced with its master. A node of a cluster that was never
# created has nothing to wait for.
rc_settle() {
	local name=$1 start
	[[ $(cluster_info "$name" cluster_slots_assigned) == 0 ]] && return 0
	start=$(now_ns)
	wait_until "$name to say cluster_state:ok and be in sync" 30 rc_in_place "$name" ||
		die "$name: not cluster_state:ok and in sync 30s after its start"
	log "$name: cluster_state:ok, $(node_role "$name"), in sync, after $(elapsed_since "$start")"
}

# cluster_master KEY prints the name of the master that serves KEY's slot.
cluster_master() {
	local key=$1 slot svc node
	[[ -n $key ]] || die "usage: $0 cluster-master KEY"
	for svc in "${CLUSTER_SERVICES[@]}"; do
		slot=$(node_cli "$svc" CLUSTER KEYSLOT "$key" 2>/dev/null) || continue
		# CLUSTER NODES: id addr@bus flags master ping pong epoch link slot-ranges...
		node=$(node_cli "$svc" CLUSTER NODES | awk -v s="$slot" '
			$3 ~ /master/ && $3 !~ /fail/ {
				for (i = 9; i <= NF; i++) {
					n = split($i, r, "-"); lo = r[1]; hi = (n == 2 ? r[2] : r[1])
					if (s >= lo && s <= hi) { split($2, a, "@"); print a[1]; exit }
				}
			}')
		[[ -n $node ]] || die "no live master serves slot $slot (of $key), as $svc sees it"
		name_of "$node"
		return 0
	done
	die "no cluster node answers"
}

# ---------------------------------------------------------------- Redis Sentinel

# rs1 and rs2 each run from a config file of their own, written once (rs2's says
# replicaof rs1) and from then on rewritten by Redis itself when the sentinels
# promote or demote it (CONFIG REWRITE): who is master survives a restart, and
# "up" never turns a promoted rs2 back into a replica.
rs_start() {
	local name=$1 conf=$SENTINEL_DIR/$1.conf
	mkdir -p "$SENTINEL_DIR/$name"
	if [[ ! -f $conf ]]; then
		{
			printf '# Written once by scripts/services.sh; Redis rewrites it when the sentinels change its role.\n'
			if [[ $name != rs1 ]]; then printf 'replicaof %s %s\n' "$HOST" "$(node_port rs1)"; fi
		} >"$conf"
	fi
	start_bg "$name" redis-server "$conf" --daemonize no --bind "$HOST" --port "$(node_port "$name")" \
		--dir "$SENTINEL_DIR/$name" --save "" --appendonly yes --appendfsync "$REDIS_APPENDFSYNC"
}

# Each sentinel has a config file of its own, written once: a sentinel rewrites
# it with what it learns (the current master, the replicas, the other sentinels,
# its id and epochs), which it needs to come back into the set after a restart.
sentinel_start() {
	local name=$1 conf=$SENTINEL_DIR/$1.conf
	mkdir -p "$SENTINEL_DIR"
	if [[ ! -f $conf ]]; then
		cat >"$conf" <<-CONF
			# Written once by scripts/services.sh; the sentinel rewrites it with what it learns.
			port $(node_port "$name")
			bind $HOST
			dir $SENTINEL_DIR
			sentinel monitor $SENTINEL_MASTER $HOST $(node_port rs1) 2
			sentinel down-after-milliseconds $SENTINEL_MASTER 2000
			sentinel failover-timeout $SENTINEL_MASTER 10000
			sentinel parallel-syncs $SENTINEL_MASTER 1
		CONF
	fi
	start_bg "$name" redis-server "$conf" --sentinel
}

for name in "${SENTINEL_REDIS_SERVICES[@]}"; do
	eval "${name}_answers() { redis_pong_on \"\$(node_port $name)\"; }"
	eval "${name}_install() { topology_redis_install; }"
	eval "${name}_start() { rs_start $name; }"
	eval "${name}_role() { node_role $name; }"
	eval "${name}_settle() { rs_settle $name; }"
done
for name in "${SENTINEL_SERVICES[@]}"; do
	eval "${name}_answers() { redis_pong_on \"\$(node_port $name)\"; }"
	eval "${name}_install() { topology_redis_install; }"
	eval "${name}_start() { sentinel_start $name; }"
	eval "${name}_role() { echo \"master \$(sentinel_master_of $name 2>/dev/null || echo unknown)\"; }"
	eval "${name}_settle() { sentinel_ensure; }"
done

# sentinel_master_of SENTINEL prints the name of the master that SENTINEL names.
sentinel_master_of() {
	local reply
	mapfile -t reply < <(node_cli "$1" SENTINEL GET-MASTER-ADDR-BY-NAME "$SENTINEL_MASTER" 2>/dev/null)
	((${#reply[@]} == 2)) || return 1
	name_of "${reply[0]}:${reply[1]}"
}

# sentinel_master prints the name of the current master, as the first sentinel
# that answers names it.
sentinel_master() {
	local svc
	for svc in "${SENTINEL_SERVICES[@]}"; do
		sentinel_master_of "$svc" && return 0
	done
	die "no sentinel answers"
}

sentinel_quorum_ok() {
	local svc
	for svc in "${SENTINEL_SERVICES[@]}"; do
		[[ $(node_cli "$svc" SENTINEL CKQUORUM "$SENTINEL_MASTER" 2>/dev/null) == "OK ${#SENTINEL_SERVICES[@]} usable"* ]] || return 1
	done
}

# sentinel_ensure waits until each sentinel sees the others and could fail over
# (SENTINEL CKQUORUM: they find each other through the master within seconds).
sentinel_ensure() {
	local start
	start=$(now_ns)
	wait_until "every sentinel to see all ${#SENTINEL_SERVICES[@]}" 30 sentinel_quorum_ok ||
		die "sentinels: no quorum (redis-cli -p $(node_port sentinel1) sentinel ckquorum $SENTINEL_MASTER)"
	log "sentinels: all ${#SENTINEL_SERVICES[@]} see each other after $(elapsed_since "$start"); master is $(sentinel_master)"
}

rs_in_place() {
	local name=$1 master
	master=$(sentinel_master) || return 1
	if [[ $master == "$name" ]]; then
		[[ $(node_role "$name") == master ]]
	else
		[[ $(node_role "$name") == "replica of $master" ]] && redis_in_sync "$name"
	fi
}

# rs_settle NAME waits, after "start NAME", until the node has the role the
# sentinels give it: a master that was failed over comes back a master and is
# made a replica of the new one by the sentinels, some seconds later.
rs_settle() {
	local name=$1 start
	start=$(now_ns)
	wait_until "$name to take the role the sentinels give it" 60 rs_in_place "$name" ||
		die "$name: still $(node_role "$name") 60s after its start, while the sentinels name $(sentinel_master) master"
	log "$name: $(node_role "$name") after $(elapsed_since "$start")"
}

# ---------------------------------------------------------------- ZooKeeper ensemble

# tickTime 1000: the server clamps a session's timeout to 2..20 ticks, so the
# app's 10 s (SECKILL_ZK_SESSION_TIMEOUT) sits mid-range and up to 20 s still
# holds (with 500 it would be the ceiling). A killed leader is noticed when its
# connections close, and the election itself is not paced by ticks; the tick
# matters for a leader that hangs (syncLimit 5 ticks: 5 s) and for a node's
# catching up after an election (initLimit 10 ticks).
zk_ensemble_write_config() {
	local n=$1 dir=$ZK_ENSEMBLE_DIR/$1 i
	mkdir -p "$dir/data"
	printf '%s\n' "$n" >"$dir/data/myid"
	{
		cat <<-CONF
			# Written by scripts/services.sh: server $n of a ${ZK_ENSEMBLE_SIZE}-server dev ensemble on $HOST only.
			tickTime=1000
			initLimit=10
			syncLimit=5
			dataDir=$dir/data
			clientPort=$((ZK_ENSEMBLE_BASE_PORT + n))
			clientPortAddress=$HOST
			maxClientCnxns=0
			admin.enableServer=false
			4lw.commands.whitelist=ruok,srvr,stat,mntr
		CONF
		for ((i = 1; i <= ZK_ENSEMBLE_SIZE; i++)); do
			printf 'server.%d=%s:%d:%d\n' "$i" "$HOST" $((2890 + i)) $((3890 + i))
		done
	} >"$dir/zoo.cfg"
	zookeeper_log4j >"$dir/log4j.properties"
}

zk_ensemble_start() {
	local name=$1 dir=$ZK_ENSEMBLE_DIR/${1#zk} cp
	zk_ensemble_write_config "${name#zk}"
	cp=$(zookeeper_classpath)
	start_bg "$name" java -Xmx256m -XX:+UseSerialGC \
		-Dlog4j.configuration="file:$dir/log4j.properties" \
		-cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
}

# zk_mode NAME prints leader or follower, what srvr says (nothing while the
# server has no quorum: it does not serve then).
zk_mode() {
	four_letter "$HOST" "$(node_port "$1")" srvr | awk '/^Mode:/ {print $2}'
}

for ((n = 1; n <= ZK_ENSEMBLE_SIZE; n++)); do
	eval "zk${n}_answers() { [[ \$(zk_mode zk$n) == @(leader|follower) ]]; }"
	eval "zk${n}_install() { zookeeper_install; }"
	eval "zk${n}_start() { zk_ensemble_start zk$n; }"
	eval "zk${n}_role() { zk_mode zk$n; }"
done

# zk_leader prints the name of the ensemble's leader.
zk_leader() {
	local svc
	for svc in "${ZK_ENSEMBLE_SERVICES[@]}"; do
		if [[ $(zk_mode "$svc") == leader ]]; then
			printf '%s\n' "$svc"
			return 0
		fi
	done
	die "no ZooKeeper ensemble server says it leads"
}

# Sourcing this file (for tests or other scripts) defines the functions only.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
