#!/bin/sh
# CI entry for the pi extension: install the locked Node dependencies, build, run the
# tests (unit tests, and the end-to-end tests against the real pi and a real bindery,
# which this script builds from the repository unless BINDERY_BIN names one).
# Node's test summary is the last lines printed. Exit status is the tests'.
set -eu
cd "$(dirname "$0")"
command -v node >/dev/null || { echo "integrations/pi: node is not installed" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error
if [ -z "${BINDERY_BIN:-}" ] && command -v go >/dev/null; then
	BINDERY_BIN="$(mktemp -d)/bindery"
	(cd ../.. && go build -o "$BINDERY_BIN" ./cmd/bindery)
	export BINDERY_BIN
fi
npm test
