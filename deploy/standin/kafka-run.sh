#!/bin/sh
# kafka-run starts the Kafka stand-in (deploy/standin/Dockerfile, target kafka): the project's
# Kafka-protocol dev broker (cmd/devbroker), configured from the apache/kafka image's variables
# that docker-compose.yml sets, as far as the dev broker has a counterpart:
#   KAFKA_ADVERTISED_LISTENERS  the PLAINTEXT listener's host and port: the broker listens on that
#                               port on every interface and gives clients that host
#   KAFKA_LOG_DIRS              the data directory (the apache/kafka image's default, too:
#                               /tmp/kraft-combined-logs, inside the container)
#   KAFKA_NUM_PARTITIONS        partitions of an auto-created topic
#   KAFKA_AUTO_CREATE_TOPICS_ENABLE
# The KRaft settings (node id, roles, controller quorum, cluster id), replication factors and
# KAFKA_HEAP_OPTS have none: one in-process broker, no JVM.
set -eu

die() {
	echo "kafka-run: $*" >&2
	exit 1
}

listener=$(printf '%s\n' "${KAFKA_ADVERTISED_LISTENERS:-PLAINTEXT://localhost:9092}" | tr ',' '\n' | sed -n 's|^PLAINTEXT://||p' | head -n 1)
[ -n "$listener" ] || die "KAFKA_ADVERTISED_LISTENERS=${KAFKA_ADVERTISED_LISTENERS:-}: no PLAINTEXT:// listener"
host=${listener%:*}
port=${listener##*:}
case $port in
'' | *[!0-9]*) die "KAFKA_ADVERTISED_LISTENERS: bad port in $listener" ;;
esac
data=${KAFKA_LOG_DIRS:-/tmp/kraft-combined-logs}
case $data in
*,*) die "KAFKA_LOG_DIRS=$data: the dev broker has one data directory" ;;
esac

exec devbroker -host 0.0.0.0 -port "$port" -advertise "$host" -data-dir "$data" \
	-partitions "${KAFKA_NUM_PARTITIONS:-1}" -topics '' \
	-auto-create-topics="${KAFKA_AUTO_CREATE_TOPICS_ENABLE:-true}" -log-level info
