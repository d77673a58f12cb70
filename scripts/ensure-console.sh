#!/bin/sh
# What the console and metrics tests need on a fresh CI machine: a headless Chromium (driven by
# playwright-core from tests/console/package.json) and a Prometheus server that scrapes /metrics.
# Installs whatever is missing with apt-get (no Prometheus service is started); prints versions.
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

chromium --version
prometheus --version 2>&1 | head -1
