#!/bin/sh
# What the console and metrics tests (tests/console_browser) need on a fresh CI machine: a headless
# Chromium, playwright-core to drive it (npm, tests/console_browser/package.json), and a Prometheus
# server that scrapes /metrics. Installs whatever is missing (apt-get; no Prometheus service is
# started) and prints the versions.
set -eu

missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v prometheus >/dev/null 2>&1 || missing="$missing prometheus"

if [ -n "$missing" ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    # policy-rc.d keeps the package's own prometheus service from starting on the default port
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod +x /usr/sbin/policy-rc.d
        trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q --no-install-recommends $missing
fi

here="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$here/tests/console_browser/node_modules/playwright-core" ]; then
    npm install --no-audit --no-fund --loglevel=error --prefix "$here/tests/console_browser"
fi

chromium --version 2>/dev/null
prometheus --version 2>&1 | head -1
