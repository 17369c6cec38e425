# shellcheck shell=bash
# The environment shared by the local stack, `make up` and `make test`.
# Every value can be overridden by the caller's environment, e.g.
#   SECKILL_DEFAULT_STRATEGY=redis make up
# These are development values: the admin token below is public.

export SECKILL_MYSQL_DSN=${SECKILL_MYSQL_DSN:-root:@tcp(127.0.0.1:3306)/seckill}
export SECKILL_REDIS_ADDR=${SECKILL_REDIS_ADDR:-127.0.0.1:6379}
# The Redis and ZooKeeper topologies (scripts/services.sh starts the nodes of the chosen ones;
# make up REDIS_MODE=cluster ZK_MODE=ensemble sets these two):
#   SECKILL_REDIS_MODE  single: the Redis above; cluster: seeds rc1..rc6; sentinel: the master
#                       "seckill" of sentinel1..3
#   SECKILL_ZK_MODE     single: the server on 2181; ensemble: zk1..zk3
export SECKILL_REDIS_MODE=${SECKILL_REDIS_MODE:-single}
export SECKILL_ZK_MODE=${SECKILL_ZK_MODE:-single}
case $SECKILL_REDIS_MODE in
cluster) SECKILL_REDIS_ADDRS=${SECKILL_REDIS_ADDRS:-127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005,127.0.0.1:7006} ;;
sentinel)
	SECKILL_REDIS_ADDRS=${SECKILL_REDIS_ADDRS:-127.0.0.1:26401,127.0.0.1:26402,127.0.0.1:26403}
	export SECKILL_REDIS_MASTER=${SECKILL_REDIS_MASTER:-seckill}
	;;
*) SECKILL_REDIS_ADDRS=${SECKILL_REDIS_ADDRS:-} ;; # empty: the app uses SECKILL_REDIS_ADDR
esac
export SECKILL_REDIS_ADDRS
if [[ $SECKILL_ZK_MODE == ensemble ]]; then
	export SECKILL_ZK_SERVERS=${SECKILL_ZK_SERVERS:-127.0.0.1:2191,127.0.0.1:2192,127.0.0.1:2193}
else
	export SECKILL_ZK_SERVERS=${SECKILL_ZK_SERVERS:-127.0.0.1:2181}
fi
# Tracing in the local stack (issue #33; make up TRACING=jaeger sets SECKILL_STACK_TRACING), not
# the app's setting, so not exported:
#   off     (default) the app's own default: no tracing, no Jaeger
#   jaeger  up.sh starts Jaeger (scripts/jaeger.sh: UI http://127.0.0.1:16686/) and the replicas
#           export their traces to it: SECKILL_TRACING=otlp, OTEL_EXPORTER_OTLP_ENDPOINT its
#           OTLP/HTTP base URL; SECKILL_TRACING_SAMPLE as the caller gives it (make up
#           TRACING_SAMPLE=1 traces every request), else the app's default (0.01)
SECKILL_STACK_TRACING=${SECKILL_STACK_TRACING:-off}
case $SECKILL_STACK_TRACING in
jaeger)
	export SECKILL_TRACING=otlp
	export OTEL_EXPORTER_OTLP_ENDPOINT=${OTEL_EXPORTER_OTLP_ENDPOINT:-http://127.0.0.1:4318}
	;;
esac
export SECKILL_KAFKA_BROKERS=${SECKILL_KAFKA_BROKERS:-127.0.0.1:9092}
export SECKILL_KAFKA_TOPIC=${SECKILL_KAFKA_TOPIC:-seckill.orders}
export SECKILL_ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-dev-admin-token}
export SECKILL_DEFAULT_STRATEGY=${SECKILL_DEFAULT_STRATEGY:-mysql}
# The demo's payment window: long enough to pay by hand, short enough to watch an order expire
# and its unit come back on sale (the app's default is 10 minutes).
export SECKILL_PAYMENT_WINDOW=${SECKILL_PAYMENT_WINDOW:-2m}
# The running audit checks the live sales every 10 s here (30 s by default), on replica 1 only
# (lib.sh's start_replica_process; one is enough, and it costs MySQL): make chaos reads its
# verdict on the run's sales there at its end.
export SECKILL_RECONCILE_EVERY=${SECKILL_RECONCILE_EVERY:-10s}
# The dev stack serves the unsafe `none` strategy (the app's own default is false): the seeded
# demo, the storefront's stampede and `make loadtest` use it to show an oversell being caught.
export SECKILL_ALLOW_UNSAFE_STRATEGIES=${SECKILL_ALLOW_UNSAFE_STRATEGIES:-true}
# How many replicas `make up` runs; not the app's setting, so not exported.
SECKILL_REPLICAS=${SECKILL_REPLICAS:-3}
# The storefront's stampede spreads its simulated buyers over every replica of `make up`: by
# default SECKILL_REPLICAS of them, where lib.sh's replica_addr puts them (127.0.0.1:808N).
# shellcheck source=scripts/lib.sh
declare -F replica_urls >/dev/null || . "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
SECKILL_PEERS=${SECKILL_PEERS:-$(replica_urls "$SECKILL_REPLICAS")}
export SECKILL_PEERS
# The waiting rooms' pass key: one per machine, made on first use and kept under .run/ (lib.sh's
# waitroom_key), so that every replica of the stack checks the passes the others sign.
SECKILL_WAITROOM_KEY=${SECKILL_WAITROOM_KEY:-$(waitroom_key)}
export SECKILL_WAITROOM_KEY
