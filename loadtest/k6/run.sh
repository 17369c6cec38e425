#!/usr/bin/env bash
# run.sh — `make k6`: the k6 stampede against the local stack, then the database audit.
#
#   1. installs k6 into bin/ if it is missing (go install, ~2 min the first time)
#   2. puts a fresh product on sale through the admin API (nginx, :8080)
#   3. runs loadtest/k6/purchase.js against the replicas
#   4. runs `go run ./loadtest -audit-only`: waits for the order queue to drain and checks every
#      invariant straight from MySQL, with k6's accepted count
#
# Settings (environment; the Makefile passes K6_STOCK and K6_STRATEGY):
#   K6_STOCK (200), K6_STRATEGY (mysql), K6_VERSION (v1.8.1), ADMIN_URL (http://127.0.0.1:8079, nginx's operations address: the public one refuses the admin API),
#   SECKILL_ADMIN_TOKEN (dev-admin-token), RUN_ID (k6-<UTC time>), SUMMARY_FILE
#   (loadtest/results/<RUN_ID>.k6.json); and purchase.js's own: BASE_URLS, BUYERS, START_RATE,
#   PEAK_RATE, RAMP_UP, HOLD, RAMP_DOWN, PRE_VUS, MAX_VUS, ACCEPTED_P99_MS, ...
# Exit status: non-zero if a k6 threshold failed or the audit found a violation (both run).
set -euo pipefail

REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
K6=$REPO_ROOT/bin/k6
K6_VERSION=${K6_VERSION:-v1.8.1}
K6_STOCK=${K6_STOCK:-200}
K6_STRATEGY=${K6_STRATEGY:-mysql}
ADMIN_URL=${ADMIN_URL:-http://127.0.0.1:8079}
ADMIN_TOKEN=${SECKILL_ADMIN_TOKEN:-dev-admin-token}
RUN_ID=${RUN_ID:-k6-$(date -u +%Y%m%dT%H%M%SZ)}
SUMMARY_FILE=${SUMMARY_FILE:-loadtest/results/$RUN_ID.k6.json}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 2
}

main() {
	cd "$REPO_ROOT"
	[[ $K6_STOCK =~ ^[1-9][0-9]*$ ]] || die "K6_STOCK must be a positive integer, got '$K6_STOCK'"
	ensure_k6
	curl -fsS -o /dev/null --max-time 5 "$ADMIN_URL/readyz" ||
		die "the stack does not answer at $ADMIN_URL/readyz: run \`make up\` first"

	local id k6_status=0 audit_status=0
	id=$(create_product)
	log "product $id: $K6_STOCK units, strategy $K6_STRATEGY; run $RUN_ID"
	mkdir -p "$(dirname -- "$SUMMARY_FILE")"
	PRODUCT_ID=$id RUN_ID=$RUN_ID SUMMARY_FILE=$SUMMARY_FILE \
		"$K6" run --no-usage-report loadtest/k6/purchase.js || k6_status=$?
	if [[ ! -s $SUMMARY_FILE ]]; then
		die "k6 wrote no summary to $SUMMARY_FILE (exit status $k6_status)"
	fi

	log "auditing product $id from the database (waits for the order queue to drain)"
	go run ./loadtest -audit-only -product-id "$id" -k6-summary "$SUMMARY_FILE" || audit_status=$?

	# k6 exits 99 when a threshold failed; the audit 1 on a violation, 2 on a setup error.
	if ((k6_status != 0 || audit_status != 0)); then
		log "FAILED: k6 exit status $k6_status, audit exit status $audit_status"
		exit 1
	fi
	log "k6 thresholds held and the audit found every invariant intact; summary: $SUMMARY_FILE"
}

ensure_k6() {
	[[ -x $K6 ]] && return 0
	log "installing k6 $K6_VERSION into bin/ (go install; takes ~2 min, once)"
	GOBIN=$REPO_ROOT/bin go install "go.k6.io/k6@$K6_VERSION"
}

# create_product puts a fresh product on sale now and prints its id.
create_product() {
	local body status
	body=$(mktemp)
	trap 'rm -f "$body"' RETURN
	status=$(curl -sS --max-time 10 -o "$body" -w '%{http_code}' \
		-X POST "$ADMIN_URL/api/v1/admin/products" \
		-H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
		-d "{\"name\":\"k6 $RUN_ID\",\"price_cents\":100,\"stock\":$K6_STOCK,\"strategy\":\"$K6_STRATEGY\",\"per_user_limit\":1}") ||
		die "POST $ADMIN_URL/api/v1/admin/products failed"
	[[ $status == 201 ]] || die "creating the product: HTTP $status: $(head -c 300 "$body")"
	json_id <"$body" || die "no product id in the answer: $(head -c 300 "$body")"
}

# json_id prints the top-level "id" of a Product answer. No jq here: the Product object is flat
# and "id" is its only key of that name, so the first "id": <digits> is it.
json_id() {
	local id
	id=$(grep -oE '"id"[[:space:]]*:[[:space:]]*[0-9]+' | sed -n 1p | grep -oE '[0-9]+$') || return 1
	[[ -n $id ]] || return 1
	printf '%s' "$id"
}

main "$@"
