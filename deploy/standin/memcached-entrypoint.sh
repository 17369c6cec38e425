#!/bin/sh
# Entrypoint of the Memcached stand-in for the memcached image (deploy/standin/Dockerfile, target
# memcached), as the official image's: arguments that start with "-" are options of memcached.
set -eu

case ${1:-} in
-*) set -- memcached "$@" ;;
esac
exec "$@"
