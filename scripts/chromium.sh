#!/usr/bin/env bash
# chromium.sh — make sure Debian's chromium is installed, for the storefront's browser test
# (web/storefront_test.go drives it headless through chromedp). A no-op when /usr/bin/chromium
# exists; otherwise `apt-get install -y --no-install-recommends chromium` (~20 s), with an
# apt-get update first only if the package lists are missing or stale (lib.sh's apt_install).
# Idempotent; CI and `make test` run it before the tests.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

CHROMIUM=/usr/bin/chromium

main() {
	if [[ -x $CHROMIUM ]]; then
		log "chromium: $("$CHROMIUM" --version 2>/dev/null | sed -n 1p || echo installed)"
		return 0
	fi
	apt_install chromium
	[[ -x $CHROMIUM ]] || die "chromium: installed, but $CHROMIUM is still missing"
	log "chromium: $("$CHROMIUM" --version 2>/dev/null | sed -n 1p || echo installed)"
}

main "$@"
