#!/usr/bin/env bash
# nginx.sh up HOST:PORT... | down | status — nginx as the local load balancer.
#
#   up HOST:PORT...  render deploy/nginx/nginx.conf.tmpl with these upstreams into
#                    .run/nginx/nginx.conf and start nginx, installing the nginx
#                    package if missing. If it already runs, a changed config is
#                    reloaded. Two servers:
#                      SECKILL_LB_ADDR (default 127.0.0.1:8080), the public one:
#                        storefront and buyers' API; /metrics, /readyz and the
#                        admin API answer 404;
#                      SECKILL_LB_OPS_ADDR (default 127.0.0.1:8079), operations:
#                        everything, the admin drawer and admin API included.
#   down             stop the nginx that "up" started.
#   status           print whether it runs and answers.
#
# It runs nginx with its own prefix and config only: nothing from /etc/nginx
# (no sites-enabled, no default :80 server) is used.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

LB_ADDR=${SECKILL_LB_ADDR:-127.0.0.1:8080}
LB_HOST=${LB_ADDR%:*}
LB_PORT=${LB_ADDR##*:}
OPS_ADDR=${SECKILL_LB_OPS_ADDR:-127.0.0.1:8079}
NGINX_PREFIX=$RUN_DIR/nginx
NGINX_CONF=$NGINX_PREFIX/nginx.conf
NGINX_TEMPLATE=$REPO_ROOT/deploy/nginx/nginx.conf.tmpl
NGINX_BIN=/usr/sbin/nginx

main() {
	case "${1:-}" in
	up)
		shift
		nginx_up "$@"
		;;
	down) stop_process nginx 15 ;;
	status) nginx_status ;;
	*)
		echo "usage: $0 up HOST:PORT... | down | status" >&2
		exit 2
		;;
	esac
}

nginx_up() {
	(($# > 0)) || die "nginx.sh up: give at least one upstream HOST:PORT"
	[[ $OPS_ADDR != "$LB_ADDR" ]] || die "nginx: SECKILL_LB_OPS_ADDR is SECKILL_LB_ADDR ($LB_ADDR): the operations server needs its own"
	[[ -x $NGINX_BIN ]] || apt_install nginx
	nginx_check_nofile
	mkdir -p "$NGINX_PREFIX/logs" "$NGINX_PREFIX/temp"
	nginx_render "$@" >"$NGINX_CONF.new"

	if is_running nginx; then
		nginx_reload_if_changed
		return
	fi
	mv -f "$NGINX_CONF.new" "$NGINX_CONF"
	local addr
	for addr in "$LB_ADDR" "$OPS_ADDR"; do
		if port_open "${addr%:*}" "${addr##*:}"; then
			die "nginx: $addr is already taken by a process these scripts did not start"
		fi
	done
	nginx_cmd -t -q || die "nginx: $NGINX_CONF is invalid"
	start_bg nginx "$NGINX_BIN" "${NGINX_ARGS[@]}"
	wait_ready nginx 15 port_open "$LB_HOST" "$LB_PORT" || die "nginx did not start"
	log "nginx: listening on $LB_ADDR (public) and $OPS_ADDR (operations) -> $*"
}

# nginx_render UPSTREAM... prints the template with the placeholders filled in.
nginx_render() {
	local tmpl servers='' addr
	tmpl=$(<"$NGINX_TEMPLATE")
	for addr in "$@"; do
		servers+=${servers:+$'\n        '}"server $addr;"
	done
	shopt -u patsub_replacement 2>/dev/null || true # keep "&" literal in replacements (bash 5.2)
	tmpl=${tmpl//__LISTEN__/$LB_ADDR}
	tmpl=${tmpl//__OPS_LISTEN__/$OPS_ADDR}
	tmpl=${tmpl//__UPSTREAM_SERVERS__/$servers}
	printf '# Rendered from deploy/nginx/nginx.conf.tmpl by scripts/nginx.sh: do not edit.\n%s\n' "$tmpl"
}

# nginx_check_nofile warns when nginx's workers cannot have the open files the template asks for
# (worker_rlimit_nofile, sized for 5,000 event streams): a worker raises its own limit, but above
# the hard limit it inherits only with CAP_SYS_RESOURCE (bit 24 of CapEff). nginx then logs an
# alert and runs on with fewer connections than worker_connections promises.
nginx_check_nofile() {
	local want hard caps
	want=$(sed -n 's/^worker_rlimit_nofile \([0-9][0-9]*\);$/\1/p' "$NGINX_TEMPLATE")
	hard=$(ulimit -Hn)
	[[ -n $want && $hard != unlimited ]] || return 0
	((hard < want)) || return 0
	caps=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status 2>/dev/null || true)
	if [[ -n $caps ]] && (((16#$caps >> 24) & 1)); then
		return 0
	fi
	warn "nginx: open-file hard limit $hard is below the template's worker_rlimit_nofile $want: fewer event streams fit (raise the hard limit, e.g. ulimit -Hn $want as root, before make up)"
}

nginx_reload_if_changed() {
	if cmp -s "$NGINX_CONF.new" "$NGINX_CONF"; then
		rm -f "$NGINX_CONF.new"
		log "nginx: already running (pid $(read_pid nginx)) on $LB_ADDR"
		return
	fi
	mv -f "$NGINX_CONF.new" "$NGINX_CONF"
	nginx_cmd -t -q || die "nginx: $NGINX_CONF is invalid"
	signal_process nginx HUP || die "nginx: stopped while its config was checked: run up again to start it"
	log "nginx: config changed, reloaded (pid $(read_pid nginx))"
}

# The arguments every nginx invocation shares: our prefix, config and error
# log (so nothing is written to /var/log/nginx), in the foreground.
NGINX_ARGS=(-p "$NGINX_PREFIX/" -c "$NGINX_CONF" -e "$NGINX_PREFIX/logs/error.log" -g 'daemon off;')

nginx_cmd() { "$NGINX_BIN" "${NGINX_ARGS[@]}" "$@"; }

nginx_status() {
	local state=DOWN
	port_open "$LB_HOST" "$LB_PORT" && state=up
	if is_running nginx; then
		state+=" (started by these scripts, pid $(read_pid nginx))"
	elif [[ $state == up ]]; then
		state+=" (not started by these scripts)"
	fi
	printf '%-10s %-16s %s\n' nginx "$LB_ADDR" "$state"
	state=DOWN
	port_open "${OPS_ADDR%:*}" "${OPS_ADDR##*:}" && state=up
	printf '%-10s %-16s %s\n' nginx-ops "$OPS_ADDR" "$state (the operations server)"
}

main "$@"
