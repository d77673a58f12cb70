#!/bin/sh
# A Java runtime, 17 or newer, for PySpark (4.x needs 17) and the Java-driven tests. Installs a
# headless JRE with apt-get when none is found (JDK 17, else 21, else the distribution's default).
set -eu
. "$(dirname "$0")/lib.sh"

need_java java "a Java runtime 17+" openjdk-17-jre-headless openjdk-21-jre-headless default-jre-headless
"$JAVA_CMD" -version 2>&1 | sed -n 1p
