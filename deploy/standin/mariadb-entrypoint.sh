#!/bin/sh
# Entrypoint of the MariaDB stand-in for the mysql image (deploy/standin/Dockerfile, target
# mariadb). It does what docker-compose.yml relies on the mysql image's entrypoint for:
#   - arguments that start with "-" are options of the server (docker-compose.yml passes the
#     character set, collation and max connections that way);
#   - the server listens on every interface (Debian's configuration binds 127.0.0.1);
#   - on an empty data directory, a first-start setup on a temporary server WITHOUT networking,
#     so that nothing reaches the server over TCP before the database and its user exist (the
#     compose healthcheck counts on that): MYSQL_DATABASE, MYSQL_USER and MYSQL_PASSWORD make
#     the database and a user that may connect from any host ('%': the app runs in other
#     containers; a user of localhost only is refused with error 1130), and the root password is
#     MYSQL_ROOT_PASSWORD, or random with MYSQL_RANDOM_ROOT_PASSWORD (printed once, as the mysql
#     image does), or left to the local socket with MYSQL_ALLOW_EMPTY_PASSWORD.
# Nothing else of the mysql image is offered (no /docker-entrypoint-initdb.d, no _FILE secrets).
set -eu

log() { echo "mariadb-entrypoint: $*" >&2; }

# sql_string quotes a value as an SQL string literal (backslashes and quotes escaped).
sql_string() {
	printf "'%s'" "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g")"
}

# sql_ident quotes a value as an SQL identifier.
# shellcheck disable=SC2016 # the backquotes are SQL's, not the shell's
sql_ident() {
	printf '`%s`' "$(printf '%s' "$1" | sed -e 's/`/``/g')"
}

first_start() {
	if [ -z "${MYSQL_ROOT_PASSWORD:-}" ] && [ -z "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ] && [ -z "${MYSQL_ALLOW_EMPTY_PASSWORD:-}" ]; then
		log "the data directory is empty: set one of MYSQL_ROOT_PASSWORD, MYSQL_RANDOM_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD"
		exit 1
	fi
	log "initialising the data directory"
	mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
	sock=/run/mysqld/init.sock
	"$@" --skip-networking --socket="$sock" &
	pid=$!
	i=0
	until mariadb-admin --socket="$sock" -uroot ping >/dev/null 2>&1; do
		i=$((i + 1))
		if [ "$i" -ge 300 ] || ! kill -0 "$pid" 2>/dev/null; then
			log "the temporary server did not start"
			exit 1
		fi
		sleep 0.1
	done

	sql="DELETE FROM mysql.global_priv WHERE User = ''; FLUSH PRIVILEGES;"
	if [ -n "${MYSQL_DATABASE:-}" ]; then
		sql="$sql CREATE DATABASE IF NOT EXISTS $(sql_ident "$MYSQL_DATABASE");"
	fi
	if [ -n "${MYSQL_USER:-}" ] && [ -n "${MYSQL_PASSWORD:-}" ]; then
		sql="$sql CREATE USER $(sql_string "$MYSQL_USER")@'%' IDENTIFIED BY $(sql_string "$MYSQL_PASSWORD");"
		if [ -n "${MYSQL_DATABASE:-}" ]; then
			sql="$sql GRANT ALL ON $(sql_ident "$MYSQL_DATABASE").* TO $(sql_string "$MYSQL_USER")@'%';"
		fi
	fi
	root_password=${MYSQL_ROOT_PASSWORD:-}
	if [ -z "$root_password" ] && [ -n "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ]; then
		root_password=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32)
		log "GENERATED ROOT PASSWORD: $root_password"
	fi
	if [ -n "$root_password" ]; then
		sql="$sql ALTER USER 'root'@'localhost' IDENTIFIED BY $(sql_string "$root_password");"
	fi
	mariadb --socket="$sock" -uroot -e "$sql"

	kill "$pid"
	wait "$pid" || true
	log "first-start setup done"
}

if [ "${1#-}" != "$1" ]; then
	set -- mariadbd "$@"
fi
if [ "$1" = mariadbd ] || [ "$1" = mysqld ]; then
	shift
	set -- mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=0.0.0.0 "$@"
	install -d -o mysql -g mysql /run/mysqld
	if [ ! -d /var/lib/mysql/mysql ]; then
		first_start "$@"
	fi
fi
exec "$@"
