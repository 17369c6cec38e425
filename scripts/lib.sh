# shellcheck shell=bash
# Shared helpers for the scripts in this directory: logging, the .run/ layout,
# pid files, background processes, readiness probes and apt installs.
# Source it; it defines functions and paths and starts nothing.
#
# Layout (all under the repository root, git-ignored):
#   .run/pids/<name>.pid   pid of a process that these scripts started
#   .run/logs/<name>.log   its stdout+stderr (the previous run's log is kept as .log.1)
#   .run/waitroom.key      this machine's key of the waiting rooms' passes (waitroom_key)
#   bin/                   binaries built by the scripts and by make build
#
# A pid file exists only for a process the scripts started, so "stop" never
# touches a MariaDB or Redis that was already running on the machine.

REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
RUN_DIR=$REPO_ROOT/.run
PID_DIR=$RUN_DIR/pids
LOG_DIR=$RUN_DIR/logs
BIN_DIR=$REPO_ROOT/bin

# Replica N of `seckill serve` listens on 127.0.0.1:(8080+N); nginx takes 8080.
REPLICA_HOST=127.0.0.1
REPLICA_BASE_PORT=8080

# waitroom_key prints the key that signs the waiting rooms' admission passes on this machine
# (SECKILL_WAITROOM_KEY: a 32-byte Ed25519 seed in base64), made once and kept in
# .run/waitroom.key, readable by its owner only: every replica of the local stack starts with the
# same key, so any of them takes a pass another signed, and the key never enters the repository.
waitroom_key() {
	local f=$RUN_DIR/waitroom.key
	if [[ ! -s $f ]]; then
		mkdir -p "$RUN_DIR"
		(umask 077 && head -c 32 /dev/urandom | base64 >"$f.tmp") && mv "$f.tmp" "$f"
	fi
	cat "$f"
}

# ---------------------------------------------------------------- logging

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
warn() { log "WARN: $*"; }
die() {
	log "ERROR: $*"
	exit 1
}

# elapsed_since START_EPOCH_NS prints the seconds since then, e.g. "2.41s".
now_ns() { date +%s%N; }
elapsed_since() {
	local start=$1 ms
	ms=$((($(now_ns) - start) / 1000000))
	printf '%d.%02ds' $((ms / 1000)) $((ms % 1000 / 10))
}

replica_addr() { printf '%s:%d' "$REPLICA_HOST" $((REPLICA_BASE_PORT + $1)); }

# replica_urls N prints the base URLs of replicas 1 to N, comma-separated
# (http://127.0.0.1:8081,...): SECKILL_PEERS of a stack of N replicas.
replica_urls() {
	local n urls=''
	for ((n = 1; n <= $1; n++)); do
		urls+=${urls:+,}http://$(replica_addr "$n")
	done
	printf '%s' "$urls"
}

# replica_procs prints the GOMAXPROCS of a replica that shares this machine with the others:
# its cores ÷ SECKILL_REPLICAS, at least 1, as a container's CPU limit would give it (Go sizes
# itself to the cgroup's limit, or else to every core). Three replicas on two cores, each with two
# Ps, spin and switch more than they serve: `make bench` measured ~10–30 % more accepted purchases
# at 256 workers with one each.
replica_procs() {
	local cores
	cores=$(nproc 2>/dev/null || echo 1)
	printf '%s' $((cores / ${SECKILL_REPLICAS:-1} > 1 ? cores / ${SECKILL_REPLICAS:-1} : 1))
}

# start_replica_process N starts replica N of `bin/seckill serve` in the background, with the
# SECKILL_* environment of scripts/env.sh (the caller sources it), and GOMAXPROCS of replica_procs
# unless the caller set one. Only replica 1 runs the running audit (SECKILL_RECONCILE_EVERY).
start_replica_process() {
	local n=$1 reconcile=0
	((n != 1)) || reconcile=${SECKILL_RECONCILE_EVERY:-30s}
	log "replica-$n: starting on $(replica_addr "$n")"
	SECKILL_HTTP_ADDR=$(replica_addr "$n") SECKILL_INSTANCE_ID=replica-$n GOMAXPROCS=${GOMAXPROCS:-$(replica_procs)} \
		SECKILL_RECONCILE_EVERY=$reconcile start_bg "replica-$n" "$BIN_DIR/seckill" serve
}

# wait_replica N waits until replica N answers /healthz with 200, or dies.
wait_replica() {
	local name="replica-$1" url
	url="http://$(replica_addr "$1")/healthz"
	wait_ready "$name" 60 http_ok "$url" || die "$name did not answer $url with 200 (log: $(log_file "$name"))"
	log "$name: healthy"
}

ensure_run_dirs() { mkdir -p "$PID_DIR" "$LOG_DIR" "$BIN_DIR"; }

log_file() { printf '%s/%s.log' "$LOG_DIR" "$1"; }
pid_file() { printf '%s/%s.pid' "$PID_DIR" "$1"; }

# log_tail NAME [LINES] prints the end of NAME's log, for failure reports.
log_tail() {
	local name=$1 lines=${2:-40} file
	file=$(log_file "$name")
	[[ -f $file ]] || return 0
	printf -- '----- last %s lines of %s -----\n' "$lines" "$file" >&2
	tail -n "$lines" "$file" >&2
	printf -- '-----\n' >&2
}

# ---------------------------------------------------------------- pid files

# read_pid NAME prints the pid recorded for NAME, or fails if there is none.
read_pid() {
	local file pid
	file=$(pid_file "$1")
	[[ -f $file ]] || return 1
	read -r pid <"$file" || true
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	printf '%s' "$pid"
}

# pid_started_after_file PID FILE succeeds when process PID started more
# than 2 s after FILE was written: the pid was reused by an unrelated process
# (after a reboot, say), so the pid file is stale.
pid_started_after_file() {
	local pid=$1 file=$2 age_s elapsed_s
	elapsed_s=$(ps -o etimes= -p "$pid" 2>/dev/null | tr -d ' ') || return 1
	[[ -n $elapsed_s ]] || return 1
	age_s=$(($(date +%s) - $(stat -c %Y "$file")))
	((elapsed_s + 2 < age_s))
}

# pid_alive PID succeeds if PID is a live process. A zombie counts as dead:
# where pid 1 is slow to reap orphans, kill -0 still succeeds on one.
pid_alive() {
	local stat
	kill -0 "$1" 2>/dev/null || return 1
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) } # the state field follows the parenthesised command name
	[[ ${stat:0:1} != Z ]]
}

pid_gone() { ! pid_alive "$1"; }

# is_running NAME succeeds if NAME's pid file names a live process that we
# started. A stale pid file (process gone or pid reused) is removed quietly.
is_running() {
	local name=$1 file pid
	file=$(pid_file "$name")
	pid=$(read_pid "$name") || {
		rm -f "$file"
		return 1
	}
	if pid_alive "$pid" && ! pid_started_after_file "$pid" "$file"; then
		return 0
	fi
	rm -f "$file"
	return 1
}

# signal_process NAME SIGNAL sends SIGNAL (HUP, KILL, ...) to NAME's process
# only if is_running says it is the one these scripts started; fails, sending
# nothing, if it is not (no pid file, process gone, or its pid reused since).
signal_process() {
	local name=$1 sig=$2 pid
	is_running "$name" || return 1
	pid=$(read_pid "$name") || return 1
	kill -s "$sig" "$pid"
}

# start_bg NAME CMD... runs CMD detached (own session, no stdin, output to
# NAME's log) and records its pid. The wrapper shell writes its own pid and
# then execs CMD, so the pid file names CMD itself even if setsid forks.
start_bg() {
	local name=$1 file log
	shift
	ensure_run_dirs
	file=$(pid_file "$name")
	log=$(log_file "$name")
	[[ -f $log ]] && mv -f "$log" "$log.1"
	rm -f "$file"
	# shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
	setsid bash -c 'echo $$ >"$0"; exec "$@"' "$file" "$@" </dev/null >"$log" 2>&1 &
	wait_until "$name to record its pid" 5 test -s "$file"
}

# stop_process NAME [TIMEOUT_S] sends SIGTERM to NAME, waits up to
# TIMEOUT_S (default 15) for it to exit, then sends SIGKILL. No-op if NAME
# is not running; the pid file is removed either way.
stop_process() {
	local name=$1 timeout_s=${2:-15} pid deadline
	if ! is_running "$name"; then
		return 0
	fi
	pid=$(read_pid "$name")
	log "stopping $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$((SECONDS + timeout_s))
	while pid_alive "$pid" && ((SECONDS < deadline)); do
		sleep 0.2
	done
	if pid_alive "$pid"; then
		warn "$name (pid $pid) still running after ${timeout_s}s: sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		wait_until "$name (pid $pid) to die" 5 pid_gone "$pid" || true
	fi
	rm -f "$(pid_file "$name")"
}

# ---------------------------------------------------------------- probes

# wait_until DESC TIMEOUT_S CMD... polls CMD every 0.2 s until it succeeds;
# fails after TIMEOUT_S with a message naming DESC.
wait_until() {
	local desc=$1 timeout_s=$2 deadline
	shift 2
	deadline=$((SECONDS + timeout_s))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			log "timed out after ${timeout_s}s waiting for $desc"
			return 1
		fi
		sleep 0.2
	done
}

# wait_ready NAME TIMEOUT_S CMD... is wait_until for a process we started:
# it gives up as soon as the process dies, and prints its log tail on failure.
wait_ready() {
	local name=$1 timeout_s=$2 deadline
	shift 2
	deadline=$((SECONDS + timeout_s))
	until "$@" >/dev/null 2>&1; do
		if ! is_running "$name"; then
			log "$name exited during startup"
			log_tail "$name"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			log "$name not ready after ${timeout_s}s"
			log_tail "$name"
			return 1
		fi
		sleep 0.2
	done
}

# port_open HOST PORT succeeds if a TCP connect succeeds within 1 s
# (bash's /dev/tcp: no nc needed).
port_open() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	timeout 1 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

# four_letter HOST PORT WORD sends a ZooKeeper four-letter command and prints
# the reply (ZooKeeper closes the connection after answering).
four_letter() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"; printf %s "$2" >&3; cat <&3' "$1" "$2" "$3" 2>/dev/null
}

# http_ok URL succeeds if URL answers 200 within 2 s.
http_ok() {
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1") == 200 ]]
}

# ---------------------------------------------------------------- installs

# apt_install PKG... installs Debian packages without starting their services
# (a temporary policy-rc.d denies that where the image has none), running
# apt-get update only if the first attempt fails (missing package lists).
# The policy-rc.d it adds goes away however the install ends, Ctrl-C included:
# left behind, it would keep every later install on the machine from starting
# its service. One that was there before is left alone.
apt_install() {
	local start policy=/usr/sbin/policy-rc.d ok=1 saved_traps
	start=$(now_ns)
	saved_traps=$(trap -p EXIT INT TERM)
	if [[ ! -e $policy ]]; then
		trap remove_added_policy EXIT
		trap 'remove_added_policy; trap - INT; kill -s INT $$' INT
		trap 'remove_added_policy; trap - TERM; kill -s TERM $$' TERM
		# Named before it is written, so that no interruption can leave it behind;
		# noclobber: never take over one that another install has just written.
		APT_ADDED_POLICY=$policy
		if (set -C && printf '#!/bin/sh\nexit 101\n' >"$policy") 2>/dev/null; then
			chmod +x "$policy"
		else
			APT_ADDED_POLICY=''
		fi
	fi
	log "apt-get install $*"
	if ! apt_get install -y --no-install-recommends "$@"; then
		log "install failed: running apt-get update and retrying"
		if ! apt_get update || ! apt_get install -y --no-install-recommends "$@"; then
			ok=''
		fi
	fi
	remove_added_policy
	trap - EXIT INT TERM
	eval "$saved_traps"
	[[ -n $ok ]] || die "could not install $* (see $LOG_DIR/apt.log)"
	log "installed $* in $(elapsed_since "$start")"
}

# APT_ADDED_POLICY is the policy-rc.d that apt_install wrote and has not yet
# removed, if any.
APT_ADDED_POLICY=''

remove_added_policy() {
	if [[ -n $APT_ADDED_POLICY ]]; then
		rm -f "$APT_ADDED_POLICY"
		APT_ADDED_POLICY=''
	fi
}

# apt_get runs apt-get, one at a time across this project's scripts: .ci/run builds the compose
# smoke's images (which installs docker.io and debootstrap) while make test installs ZooKeeper and
# chromium, and two apt-gets at once fail on dpkg's lock instead of waiting for it. The flock
# waits; DPkg::Lock::Timeout waits for an apt-get that is not ours.
apt_get() {
	ensure_run_dirs
	DEBIAN_FRONTEND=noninteractive flock /var/lock/seckill-go-apt.lock \
		apt-get -q -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=300 "$@" >>"$LOG_DIR/apt.log" 2>&1 || {
		tail -n 20 "$LOG_DIR/apt.log" >&2
		return 1
	}
}

# require_cmd CMD PKG installs PKG unless CMD is on PATH (or in /usr/sbin).
require_cmd() {
	local cmd=$1 pkg=$2
	command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || apt_install "$pkg"
}
