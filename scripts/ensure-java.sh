#!/bin/sh
# A Java runtime, 17 or newer, for PySpark (4.x needs 17) and the Java-driven tests. Installs a
# headless JRE with apt-get when none is found (JDK 17, else 21, else the distribution's default).
set -eu
. "$(dirname "$0")/lib.sh"

java="java"
[ -n "${JAVA_HOME:-}" ] && java="$JAVA_HOME/bin/java"
if ! command -v "$java" >/dev/null 2>&1; then
    apt_install_first openjdk-17-jre-headless openjdk-21-jre-headless default-jre-headless \
        || fail "a Java runtime 17+" "apt-get could not install openjdk-17/21 or default-jre-headless"
fi
major=$(java_major "$java")
[ -n "$major" ] && [ "$major" -ge 17 ] \
    || fail "a Java runtime 17+" "$java is version ${major:-unknown} (set JAVA_HOME to a JDK 17 or newer)"
"$java" -version 2>&1 | sed -n 1p
