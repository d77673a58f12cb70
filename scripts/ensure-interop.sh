#!/bin/sh
# What the interop matrix's Java columns need on a fresh CI machine: a JDK (javac, jlink), Maven
# (the client jars come from Maven Central), podman and runc (the Java cells and rmqtx's own image
# run in OCI images built locally), and systemd-analyze for the example unit. Installs whatever is missing with apt-get; prints the versions either way.
set -eu

missing=""
command -v javac >/dev/null 2>&1 || missing="$missing openjdk-17-jdk-headless"
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
command -v podman >/dev/null 2>&1 || missing="$missing podman"
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing="$missing runc"
# systemd-analyze checks conf/rmqtx-standalone.service (tests/ops/test_deploy_files.py)
command -v systemd-analyze >/dev/null 2>&1 || missing="$missing systemd"

if [ -n "$missing" ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q --no-install-recommends $missing
fi

javac -version
mvn -B -v
podman --version
runc --version 2>/dev/null || /usr/sbin/runc --version
