#!/bin/sh
# cluster-init.sh — the docker-compose stack's rc-init (profile cluster): makes the six nodes rc1..rc6
# one Redis Cluster, three masters with a replica each, as `make up REDIS_MODE=cluster` does
# (scripts/services.sh, redis_cluster_ensure), then waits until every node says cluster_state:ok
# and every replica's link to its master is up.
# Mounted read-only into the redis image at /etc/seckill/redis/ and run as the service's command;
# compose starts it once rc1..rc6 answer PING, and the app processes of the cluster form
# (docker-compose.cluster.yml) wait for it to exit 0.
#
# Idempotent: it runs at every `up`.
#   - No node has a slot (the first `up`, or after `down`): a node that met others in a create that
#     did not finish is reset (CLUSTER RESET HARD: without slots it holds no key), then
#     `redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`.
#   - Slots are assigned: the cluster exists and is left as it is (which node is master stays what
#     failovers made it). Each node is only introduced to the others again at their current
#     addresses (CLUSTER MEET; a node already known at that address makes it a no-op): after
#     `down` and `up` (a new network), or containers re-created together, the nodes come back with
#     their nodes.conf (their volumes) on other addresses, and a cluster whose every member moved
#     does not find itself.
#
# Settings (the compose service sets the first):
#   SECKILL_RC_NODES  the nodes, HOST:PORT separated by spaces
#   SECKILL_RC_WAIT   seconds to wait for every node to answer, then for cluster_state:ok (default 60)
#
# Plain POSIX sh: the image is Alpine (busybox; getent from musl-utils). CLUSTER MEET and
# `--cluster create` take IP addresses, not names: the names are resolved here (getent).
set -eu

nodes=${SECKILL_RC_NODES:?SECKILL_RC_NODES: the cluster nodes, HOST:PORT separated by spaces}
wait_s=${SECKILL_RC_WAIT:-60}

say() { echo "rc-init: $*"; }
die() {
	echo "rc-init: $*" >&2
	exit 1
}

# cli HOST:PORT ARGS... runs redis-cli against one node.
cli() {
	_a=$1
	shift
	redis-cli -h "${_a%:*}" -p "${_a##*:}" "$@"
}

# info HOST:PORT FIELD prints one field of the node's CLUSTER INFO (empty if it does not answer).
info() { cli "$1" CLUSTER INFO 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"; }

# ip_of HOST:PORT prints the node's IP address:port.
ip_of() {
	_ip=$(getent hosts "${1%:*}" | awk '{ print $1; exit }')
	[ -n "$_ip" ] || return 1
	echo "$_ip:${1##*:}"
}

# until_ok WHAT CMD... retries CMD every second for up to SECKILL_RC_WAIT seconds.
until_ok() {
	_what=$1
	shift
	_i=0
	until "$@"; do
		_i=$((_i + 1))
		[ "$_i" -lt "$wait_s" ] || die "$_what: not after ${wait_s}s"
		sleep 1
	done
}

all_answer() {
	for _n in $nodes; do
		[ "$(cli "$_n" PING 2>/dev/null)" = PONG ] || return 1
	done
}

# all_ok: every node says cluster_state:ok and is a master or a replica whose link to its master
# is up (its first copy made), as `make up`'s rc_in_place: a replica promoted before it had a copy
# would bring its master's shard back empty.
all_ok() {
	for _n in $nodes; do
		[ "$(info "$_n" cluster_state)" = ok ] || return 1
		_r=$(cli "$_n" INFO replication 2>/dev/null | tr -d '\r')
		case $_r in
		*role:master* | *master_link_status:up*) ;;
		*) return 1 ;;
		esac
	done
}

until_ok "every node to answer PING" all_answer

addrs='' assigned=0
for n in $nodes; do
	a=$(ip_of "$n") || die "$n: the name does not resolve"
	addrs="$addrs $a"
	s=$(info "$n" cluster_slots_assigned)
	assigned=$((assigned + ${s:-0}))
done

if [ "$assigned" -eq 0 ]; then
	for n in $nodes; do
		if [ "$(info "$n" cluster_known_nodes)" -gt 1 ]; then
			say "$n knows other nodes but has no slot: CLUSTER RESET HARD"
			cli "$n" CLUSTER RESET HARD >/dev/null
		fi
	done
	say "creating the cluster over$addrs (one replica per master)"
	# shellcheck disable=SC2086 # one address a word
	redis-cli --cluster create $addrs --cluster-replicas 1 --cluster-yes
else
	say "slots already assigned: the cluster exists; introducing each node to the others at their current addresses"
	for n in $nodes; do
		self=$(ip_of "$n")
		for a in $addrs; do
			[ "$a" = "$self" ] || cli "$n" CLUSTER MEET "${a%:*}" "${a##*:}" >/dev/null
		done
	done
fi

until_ok "every node to say cluster_state:ok, every replica linked to its master" all_ok
say "cluster_state:ok on every node, every replica linked ($nodes); the masters, as ${nodes%% *} sees them:"
cli "${nodes%% *}" CLUSTER NODES | tr -d '\r' | awk '$9 != "" { s = $9; for (i = 10; i <= NF; i++) s = s " " $i; print "rc-init:  ", $2, $3, s }'
