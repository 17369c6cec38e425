#!/bin/sh
# Entrypoint of the ZooKeeper stand-in for the zookeeper image (deploy/standin/Dockerfile, target
# zookeeper): a standalone server configured from the official image's variables (those
# docker-compose.yml sets, with that image's defaults), with data in /data and its transaction
# log in /datalog, the image's volumes. JVMFLAGS reaches the JVM through Debian's zkServer.sh;
# the server's log goes to the console (`docker compose logs zookeeper`), as the official image's.
set -eu

export JVMFLAGS="-Dzookeeper.root.logger=INFO,CONSOLE ${JVMFLAGS:-}"

cat >/etc/zookeeper/conf/zoo.cfg <<CFG
dataDir=/data
dataLogDir=/datalog
tickTime=${ZOO_TICK_TIME:-2000}
initLimit=${ZOO_INIT_LIMIT:-5}
syncLimit=${ZOO_SYNC_LIMIT:-2}
maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}
autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}
autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-0}
clientPort=2181
admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}
4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}
CFG
exec "$@"
