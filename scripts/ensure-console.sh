#!/bin/sh
# What the console and metrics tests (tests/console_browser) need on a fresh CI machine: a headless
# Chromium, playwright-core to drive it (npm, tests/console_browser/package.json), and a Prometheus
# server that scrapes /metrics. Installs whatever is missing (apt-get; no Prometheus service is
# started) and prints the versions.
set -eu
. "$(dirname "$0")/lib.sh"

missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v prometheus >/dev/null 2>&1 || missing="$missing prometheus"

if [ -n "$missing" ]; then
    # policy-rc.d keeps the package's own prometheus service from starting on the default port
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | _sudo tee /usr/sbin/policy-rc.d >/dev/null
        _sudo chmod +x /usr/sbin/policy-rc.d
        trap '_sudo rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # shellcheck disable=SC2086
    apt_install $missing || fail "$missing" "apt-get could not install them"
fi

here="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$here/tests/console_browser/node_modules/playwright-core" ]; then
    npm install --no-audit --no-fund --loglevel=error --prefix "$here/tests/console_browser" \
        || fail "playwright-core" "npm install in tests/console_browser failed"
fi

chromium --version 2>/dev/null
prometheus --version 2>&1 | sed -n 1p
