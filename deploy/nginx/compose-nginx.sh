#!/bin/sh
# compose-nginx.sh [render] — nginx of the docker-compose stack, from the template that
# scripts/nginx.sh renders for `make up` (deploy/nginx/nginx.conf.tmpl, mounted read-only into the
# official nginx image at /etc/nginx/seckill/ and run as the service's command).
#
#   compose-nginx.sh          render into $SECKILL_NGINX_PREFIX, check it, exec nginx in the foreground
#   compose-nginx.sh render   print the rendered config and exit (deploy/nginx_test.go reads it)
#
# Settings (the compose service sets the first four):
#   SECKILL_LB_UPSTREAMS   the replicas, HOST:PORT separated by spaces, e.g. "app1:8080 app2:8080"
#   SECKILL_LB_LISTEN      what the public server listens on (default 8080): the storefront and the
#                          buyers' API; /metrics, /readyz and the admin API answer 404 there
#   SECKILL_LB_OPS_LISTEN  what the operations server listens on (default 8079): everything,
#                          admin included; publish it on loopback only
#   SECKILL_LB_RESOLVER    a DNS server (Docker's is 127.0.0.11): the replicas' names are then
#                          re-resolved while nginx runs ("server ... resolve", nginx >= 1.27.3),
#                          so a replica that comes back with a new address is found again, and
#                          nginx starts even if a name does not resolve yet. Empty: resolved once
#                          at start, as `make up` does with its fixed 127.0.0.1 addresses.
#   SECKILL_NGINX_TEMPLATE the template (default: next to this script)
#   SECKILL_NGINX_PREFIX   nginx's prefix: nginx.conf, nginx.pid, logs/, temp/ (request bodies, proxy
#                          buffers, the public reads' micro-cache) (default /var/cache/nginx/seckill)
#
# Plain POSIX sh and sed: the image is Alpine (busybox). The access and error logs are symlinks to
# the container's stdout and stderr, so `docker compose logs nginx` shows them.
set -eu

here=$(cd -- "$(dirname -- "$0")" && pwd)
template=${SECKILL_NGINX_TEMPLATE:-$here/nginx.conf.tmpl}
prefix=${SECKILL_NGINX_PREFIX:-/var/cache/nginx/seckill}
listen=${SECKILL_LB_LISTEN:-8080}
ops_listen=${SECKILL_LB_OPS_LISTEN:-8079}
upstreams=${SECKILL_LB_UPSTREAMS:-}
resolver=${SECKILL_LB_RESOLVER:-}

die() {
	echo "compose-nginx.sh: $*" >&2
	exit 1
}

# render prints the template with its placeholders filled in. The values go into a sed
# replacement, so they are held to the characters a host:port needs.
render() {
	[ -r "$template" ] || die "cannot read the template $template"
	[ -n "$upstreams" ] || die 'SECKILL_LB_UPSTREAMS is empty: give the replicas, e.g. "app1:8080 app2:8080"'
	case $listen in
	'' | *[!A-Za-z0-9.:\[\]_-]*) die "SECKILL_LB_LISTEN=$listen: want PORT or HOST:PORT" ;;
	esac
	case $ops_listen in
	'' | *[!A-Za-z0-9.:\[\]_-]*) die "SECKILL_LB_OPS_LISTEN=$ops_listen: want PORT or HOST:PORT" ;;
	esac
	[ "$ops_listen" != "$listen" ] || die "SECKILL_LB_OPS_LISTEN is SECKILL_LB_LISTEN ($listen): the operations server needs its own"
	servers='' resolve=''
	if [ -n "$resolver" ]; then
		case $resolver in
		*[!A-Za-z0-9.:\[\]_-]*) die "SECKILL_LB_RESOLVER=$resolver: want an address" ;;
		esac
		# "resolve" needs the upstream's state in shared memory (zone) and a resolver.
		servers="zone seckill_upstreams 64k; resolver $resolver valid=5s ipv6=off;"
		resolve=' resolve'
	fi
	for addr in $upstreams; do
		case $addr in
		*[!A-Za-z0-9.:\[\]_-]* | *:) die "SECKILL_LB_UPSTREAMS: bad address $addr (want HOST:PORT)" ;;
		*:*) ;;
		*) die "SECKILL_LB_UPSTREAMS: $addr has no port (want HOST:PORT)" ;;
		esac
		servers="${servers:+$servers }server $addr$resolve;"
	done
	echo '# Rendered from deploy/nginx/nginx.conf.tmpl by deploy/nginx/compose-nginx.sh: do not edit.'
	sed -e "s|__LISTEN__|$listen|g" -e "s|__OPS_LISTEN__|$ops_listen|g" -e "s|__UPSTREAM_SERVERS__|$servers|g" "$template"
}

run() {
	mkdir -p "$prefix/logs" "$prefix/temp"
	render >"$prefix/nginx.conf"
	ln -sf /dev/stdout "$prefix/logs/access.log"
	ln -sf /dev/stderr "$prefix/logs/error.log"
	nginx -p "$prefix/" -c "$prefix/nginx.conf" -e stderr -t -q
	echo "compose-nginx.sh: listening on $listen (public) and $ops_listen (operations) -> $upstreams" >&2
	exec nginx -p "$prefix/" -c "$prefix/nginx.conf" -e stderr -g 'daemon off;'
}

case ${1:-run} in
render) render ;;
run) run ;;
*) die "usage: $0 [render]" ;;
esac
