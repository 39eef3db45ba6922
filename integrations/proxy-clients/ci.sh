#!/usr/bin/env bash
# The proxy's tests with the real clients: @anthropic-ai/sdk, Claude Code and
# opencode from npm (their native binaries come in their optional
# dependencies), each run offline against bindery proxy and a loopback test
# upstream. Installs them from the lock file, then runs the Go tests that
# drive them (cmd/bindery/proxy_clients_e2e_test.go), which fail rather than
# skip once BINDERY_PROXY_CLIENTS is set.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
command -v node >/dev/null || { echo "node is not installed" >&2; exit 1; }
# `npm install` from the lock rather than `npm ci`: opencode-ai names
# optional binaries for platforms the registry here does not serve
# (opencode-darwin-*), which npm ci counts as a lock out of sync; the
# versions installed are the lock's either way. npm runs no install script
# it was not told to allow, so the two wrappers' own postinstall steps run
# here by name: each copies its platform's native binary (from its optional
# dependency) over a placeholder bin.
npm install --no-audit --no-fund --ignore-scripts --no-save --loglevel=error
(cd node_modules/@anthropic-ai/claude-code && node install.cjs)
(cd node_modules/opencode-ai && node postinstall.mjs)
node_modules/.bin/claude --version >/dev/null
node_modules/.bin/opencode --version >/dev/null
cd "$here/../.."
BINDERY_PROXY_CLIENTS="$here/node_modules" go test -race -count=1 -run 'TestProxyClient' ./cmd/bindery
