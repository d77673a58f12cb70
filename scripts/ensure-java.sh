#!/bin/sh
# Make sure a Java runtime (17+) is available for PySpark; installs a headless JRE with apt-get
# when `java` is missing (for CI images). Prints the java version either way.
set -eu

if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    # Debian bookworm / Ubuntu 22.04+ ship 17; newer releases may only carry 21.
    $SUDO apt-get install -y -q --no-install-recommends openjdk-17-jre-headless \
        || $SUDO apt-get install -y -q --no-install-recommends openjdk-21-jre-headless \
        || $SUDO apt-get install -y -q --no-install-recommends default-jre-headless
fi

if [ -n "${JAVA_HOME:-}" ]; then
    "$JAVA_HOME/bin/java" -version
else
    java -version
fi
