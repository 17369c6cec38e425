#!/usr/bin/env bash
# bench-compare.sh A B [PAIRS] [BENCH FLAGS…] — make bench on two commits, alternated, and the
# verdict: is the difference beyond the spread of the runs?
#   A, B     commits (anything git rev-parse takes; "." is the work tree as it is, uncommitted
#            changes included)
#   PAIRS    pairs of runs [3], in the order A B, B A, A B…: each side runs as often, and neither
#            always first, so the machine's drift over the session falls on both
#   the rest flags for every run of loadtest/bench (each run is one round: -rounds 1)
#   A_ENV, B_ENV  (environment) NAME=value words for that side's runs, which its replicas inherit:
#            make bench-compare A=HEAD B=HEAD B_ENV=SECKILL_PLANTED_SLOWDOWN=0.1 plants a known
#            slowdown on one side, the check that the verdict can see one
# The measuring harness (loadtest/bench, scripts/env.sh) is this work tree's for both sides: only
# the app binary differs. The runs' reports go to .run/bench-compare/<time>/{A,B}/, the
# comparison to loadtest/results/bench-compare-<time>.md.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)

# build REV OUT builds bin/seckill of commit REV (or of the work tree for ".") into OUT.
build() {
	local rev=$1 out=$2
	if [[ $rev == . ]]; then
		(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$out" ./cmd/seckill)
		return
	fi
	local src
	src=$(mktemp -d)
	git -C "$ROOT" worktree add --detach --quiet "$src" "$rev"
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$out" ./cmd/seckill)
	git -C "$ROOT" worktree remove --force "$src"
}

# label REV ENV names a side: its commit, and its environment if it has one.
label() { if [[ -n $2 ]]; then echo "$1 ($2)"; else echo "$1"; fi; }

main() {
	local a=${1:-} b=${2:-} pairs=${3:-3}
	[[ -n $a && -n $b ]] || die "usage: bench-compare.sh A B [PAIRS] [bench flags…] (make bench-compare A=<commit> B=<commit>)"
	[[ $pairs =~ ^[1-9][0-9]?$ ]] || die "PAIRS: 1 to 99, not $pairs"
	shift $(($# < 3 ? $# : 3))
	local run dir
	run=$(date -u +%Y%m%d-%H%M%S)
	dir=$ROOT/.run/bench-compare/$run
	mkdir -p "$dir/A" "$dir/B"
	local side rev
	for side in A B; do
		rev=$a
		[[ $side == B ]] && rev=$b
		log "building $side = $rev"
		build "$rev" "$dir/seckill-$side"
	done
	"$SCRIPT_DIR/services.sh" up
	local -a a_env b_env side_env
	read -ra a_env <<<"${A_ENV:-}"
	read -ra b_env <<<"${B_ENV:-}"
	local i order
	for ((i = 1; i <= pairs; i++)); do
		order=(A B)
		((i % 2 == 0)) && order=(B A)
		for side in "${order[@]}"; do
			side_env=("${a_env[@]}")
			[[ $side == B ]] && side_env=("${b_env[@]}")
			log "pair $i of $pairs: $side ${side_env[*]}"
			(cd "$ROOT" && env "${side_env[@]}" go run ./loadtest/bench -rounds 1 -seckill "$dir/seckill-$side" -out "$dir/$side" "$@" >/dev/null)
		done
	done
	(cd "$ROOT" && go run ./loadtest/bench compare -a "$dir/A" -b "$dir/B" -a-label "$(label "$a" "${A_ENV:-}")" -b-label "$(label "$b" "${B_ENV:-}")" -out loadtest/results)
}

main "$@"
