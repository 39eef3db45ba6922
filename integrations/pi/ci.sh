#!/bin/sh
# CI entry for the pi extension: install the locked Node dependencies, build, and run the
# suite (unit tests, and the end-to-end tests against the real pi and a real bindery, which
# this script builds from the repository unless BINDERY_BIN names one) once per pi line
# named in pi-lines.json: pi 0.73 on the system Node, pi 1.6 on the Node installed from
# the npm registry into lines/pi-1.6 (never the system's). Everything is installed from
# the committed lockfiles with `npm ci`, so a clean machine needs only node, npm and go.
# PI_LINES="pi-1.6" runs only the lines named. Exit status is the first failing line's.
set -eu
cd "$(dirname "$0")"
here=$(pwd)
command -v node >/dev/null || { echo "integrations/pi: node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "integrations/pi: npm is not installed" >&2; exit 1; }

npm ci --no-audit --no-fund --loglevel=error
npx tsc -p .
if [ -z "${BINDERY_BIN:-}" ]; then
	command -v go >/dev/null || { echo "integrations/pi: go is not installed and BINDERY_BIN is not set" >&2; exit 1; }
	bindir=$(mktemp -d)
	trap 'rm -rf "$bindir"' EXIT
	BINDERY_BIN="$bindir/bindery"
	(cd ../.. && go build -o "$BINDERY_BIN" ./cmd/bindery)
fi
export BINDERY_BIN

# One line per pi line: name, folder, package, version, cli, node package (or "system"),
# node version. A folder whose package.json does not name exactly the line's package and
# version (and Node) is an error: pi-lines.json is the one place they are set.
lines=$(node -e '
const fs = require("fs");
const { lines } = JSON.parse(fs.readFileSync("pi-lines.json", "utf8"));
const want = (process.env.PI_LINES || "").split(/[ ,]+/).filter(Boolean);
for (const l of lines) {
  if (want.length && !want.includes(l.name)) continue;
  const pkg = JSON.parse(fs.readFileSync(l.dir + "/package.json", "utf8"));
  const deps = { ...pkg.dependencies, ...pkg.devDependencies };
  const check = (name, version) => {
    if (deps[name] !== version) {
      console.error(`pi-lines.json: line ${l.name} wants ${name}@${version}; ${l.dir}/package.json has ${deps[name] ?? "nothing"}`);
      process.exit(1);
    }
  };
  check(l.package, l.version);
  const node = l.node === "system" ? { package: "system", version: "-" } : l.node;
  if (node.package !== "system") check(node.package, node.version);
  console.log([l.name, l.dir, l.package, l.version, l.cli, node.package, node.version].join(" "));
}')
[ -n "$lines" ] || { echo "integrations/pi: no pi line selected (PI_LINES=${PI_LINES:-})" >&2; exit 1; }

status=0
echo "$lines" | while read -r name dir package version cli nodepkg nodever; do
	if [ "$dir" != "." ]; then (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error); fi
	if [ "$nodepkg" = "system" ]; then
		nodebin=$(command -v node)
	else
		nodebin="$here/$dir/node_modules/$nodepkg/bin/node"
		[ -x "$nodebin" ] || { echo "integrations/pi: $name: $nodepkg did not install $nodebin" >&2; exit 1; }
	fi
	cli_path="$here/$dir/node_modules/$package/$cli"
	[ -f "$cli_path" ] || { echo "integrations/pi: $name: no pi CLI at $cli_path" >&2; exit 1; }
	echo "== pi line $name: $package@$version ($cli) on node $("$nodebin" --version) =="
	# The tests run pi with the Node that runs them (process.execPath).
	PI_LINE="$name" PI_CLI="$cli_path" PI_VERSION="$version" \
		"$nodebin" --test --test-concurrency="${TEST_CONCURRENCY:-2}" dist/test/*.test.js || exit 1
done || status=1
exit $status
