#!/bin/sh
# CI entry for the VS Code extension: install the locked dependencies, build,
# and run its tests (the pure text, and core.ts against a real bindery, which
# this script builds from the repository unless BINDERY_BIN names one).
set -eu
cd "$(dirname "$0")"
command -v node >/dev/null || { echo "integrations/vscode: node is not installed" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error
if [ -z "${BINDERY_BIN:-}" ] && command -v go >/dev/null; then
	BINDERY_BIN="$(mktemp -d)/bindery"
	(cd ../.. && go build -o "$BINDERY_BIN" ./cmd/bindery)
	export BINDERY_BIN
fi
npm test
