#!/bin/sh
# Entrypoint of the Redis stand-in for the redis image (deploy/standin/Dockerfile, target redis).
# The official image builds Redis with protected mode off, so that other containers may connect
# to a server without a password; Debian's build has it on. This adds --protected-mode no right
# after redis-server (and its configuration file, if one is given first), so that any later
# argument still wins. Arguments that start with "-" are options of redis-server, as there.
set -eu

if [ "${1#-}" != "$1" ]; then
	set -- redis-server "$@"
fi
if [ "$1" = redis-server ]; then
	shift
	case ${1:-} in
	*.conf)
		conf=$1
		shift
		set -- redis-server "$conf" --protected-mode no "$@"
		;;
	*) set -- redis-server --protected-mode no "$@" ;;
	esac
fi
exec "$@"
