#!/bin/sh
# Make sure Maven is available (tests/admin/test_mqadmin_java.py resolves Apache's rocketmq-tools
# 4.9.8 with it); installs Debian's maven with apt-get when `mvn` is missing. Prints the version.
set -eu

if ! command -v mvn >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends maven
fi

mvn -B -v
