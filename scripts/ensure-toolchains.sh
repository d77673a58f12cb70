#!/bin/sh
# The toolchains the interop drivers build with, which this project does not install itself: Go 1.22+
# (interop/go, interop/go5: modules from the Go module proxy) and Node.js 18+ with npm (interop/node,
# interop/node5, tests/console_browser: packages from the npm registry). A missing or older one ends
# the run here, in one line, instead of as a failed cell later.
set -eu
. "$(dirname "$0")/lib.sh"

# at_least HAVE WANT: HAVE (a dotted version) is WANT (major.minor) or newer
at_least() {
    printf '%s\n%s\n' "$2" "$1" | sort -t. -k1,1n -k2,2n -C
}

command -v go >/dev/null 2>&1 || fail "Go 1.22+" "no go on PATH (install it from go.dev's tarball or the distribution)"
go_version=$(go env GOVERSION | sed 's/^go//')
at_least "$go_version" 1.22 || fail "Go 1.22+" "go is $go_version"

command -v node >/dev/null 2>&1 || fail "Node.js 18+" "no node on PATH"
command -v npm >/dev/null 2>&1 || fail "npm" "no npm on PATH (it comes with Node.js)"
node_version=$(node --version | sed 's/^v//')
at_least "$node_version" 18.0 || fail "Node.js 18+" "node is $node_version"

echo "go $go_version, node $node_version, npm $(npm --version)"
