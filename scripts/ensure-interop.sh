#!/bin/sh
# What the interop matrix's Java columns need: a JDK 17+ (javac, jlink), Maven (the client jars come
# from Maven Central), podman and runc (the Java cells and rmqtx's own image run in OCI images built
# locally), and systemd-analyze for the example unit. Installs what is missing with apt-get.
set -eu
. "$(dirname "$0")/lib.sh"

javac="javac"
[ -n "${JAVA_HOME:-}" ] && javac="$JAVA_HOME/bin/javac"
if ! command -v "$javac" >/dev/null 2>&1; then
    apt_install_first openjdk-17-jdk-headless openjdk-21-jdk-headless default-jdk-headless \
        || fail "a JDK 17+ (javac)" "apt-get could not install openjdk-17/21 or default-jdk-headless"
fi
major=$("$javac" -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p')
[ -n "$major" ] && [ "$major" -ge 17 ] \
    || fail "a JDK 17+ (javac)" "$javac is version ${major:-unknown} (set JAVA_HOME to a JDK 17 or newer)"

missing=""
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
command -v podman >/dev/null 2>&1 || missing="$missing podman"
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing="$missing runc"
# systemd-analyze checks conf/rmqtx-standalone.service (tests/ops/test_deploy_files.py)
command -v systemd-analyze >/dev/null 2>&1 || missing="$missing systemd"
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    apt_install $missing || fail "$missing" "apt-get could not install them"
fi

"$javac" -version
mvn -B -v | sed -n 1p
podman --version
runc --version 2>/dev/null | sed -n 1p || /usr/sbin/runc --version | sed -n 1p
