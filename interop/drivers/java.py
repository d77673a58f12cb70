"""The official Java client (rocketmq-client/-tools 4.9.8) as a column, from ``interop/java``.

The jars come from ``ROCKETMQ_CLIENT_CLASSPATH`` (offline use), else from Maven (the local
repository first, then online); the sources are compiled once per run into a temp dir.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from interop.drivers import REPO, Driver

JAVA_DIR = REPO / "interop" / "java"
MAIN = "org.rmqtx.interop.Interop"


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:120] if lines else ""


class JavaDriver(Driver):
    name = "java"

    def __init__(self) -> None:
        self.classpath = ""

    def prepare(self) -> str | None:
        if not shutil.which("javac"):
            return "no JDK (javac) on PATH"
        jars = os.environ.get("ROCKETMQ_CLIENT_CLASSPATH") or self._maven_classpath()
        if not jars:
            docker = "no Docker engine" if not self._docker_running() else "a Docker engine: use interop/java/docker-compose.yml"
            return f"no rocketmq-client jars: ROCKETMQ_CLIENT_CLASSPATH unset, no Maven repository reachable (offline or online), {docker}"
        out = tempfile.mkdtemp(prefix="rmqtx-interop-java-")
        atexit.register(shutil.rmtree, out, True)
        sources = [str(p) for p in (JAVA_DIR / "src" / "main" / "java").rglob("*.java")]
        javac = subprocess.run(["javac", "--release", "8", "-nowarn", "-cp", jars, "-d", out, *sources], capture_output=True, text=True)
        if javac.returncode != 0:
            return f"javac failed: {_tail(javac.stderr)}"
        self.classpath = os.pathsep.join([out, jars])
        return None

    def _maven_classpath(self) -> str | None:
        """``dependency:build-classpath``: offline first (a populated ~/.m2), then online."""
        if not shutil.which("mvn"):
            return None
        with tempfile.NamedTemporaryFile(suffix=".classpath") as target:
            for offline in (["-o"], []):
                cmd = ["mvn", "-q", "-B", *offline, "-f", str(JAVA_DIR / "pom.xml"), "dependency:build-classpath", f"-Dmdep.outputFile={target.name}"]
                try:
                    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
                except subprocess.TimeoutExpired:
                    continue
                classpath = Path(target.name).read_text().strip()
                if done.returncode == 0 and classpath:
                    return classpath
        return None

    @staticmethod
    def _docker_running() -> bool:
        if not shutil.which("docker"):
            return False
        try:
            return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def command(self, op: str, params: dict) -> list[str]:
        return ["java", "-cp", self.classpath, MAIN, op, json.dumps(params)]
