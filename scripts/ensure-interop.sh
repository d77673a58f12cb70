#!/bin/sh
# What the interop matrix's Java columns need: a JDK 17+ (javac, jlink), Maven (the client jars come
# from Maven Central), podman and runc (the Java cells and rmqtx's own image run in OCI images built
# locally), and systemd-analyze for the example unit. Installs what is missing with apt-get.
set -eu
. "$(dirname "$0")/lib.sh"

need_java javac "a JDK 17+ (javac)" openjdk-17-jdk-headless openjdk-21-jdk-headless default-jdk-headless

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

"$JAVA_CMD" -version
mvn -B -v | sed -n 1p
podman --version
runc --version 2>/dev/null | sed -n 1p || /usr/sbin/runc --version | sed -n 1p
