#!/usr/bin/env bash
# promtool.sh — make sure promtool is installed, for deploy/'s tests (deploy/alerts_test.go runs
# `promtool check rules` and `promtool test rules` on deploy/prometheus/alerts.yml and its unit
# tests; deploy/dashboard_test.go has it parse the dashboard's PromQL and prometheus.yml). A
# no-op when promtool is on PATH; otherwise Debian's prometheus package (bookworm: 2.42), whose
# service is not started, with an apt-get update first only if the install fails (lib.sh's
# apt_install). Idempotent; CI and `make test` run it before the tests.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

version() { promtool --version 2>&1 | sed -n 1p; }

main() {
	if command -v promtool >/dev/null 2>&1; then
		log "promtool: $(version)"
		return 0
	fi
	apt_install prometheus
	command -v promtool >/dev/null 2>&1 || die "promtool: the prometheus package is installed, but promtool is not on PATH"
	log "promtool: $(version)"
}

main "$@"
