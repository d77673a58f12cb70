"""Apache 5.4.0's own tools on ACL 2.0: tests/security/java5/Acl2Scenario.java (mqadmin's user and ACL
subcommands, DefaultMQProducer sends signed by AclClientRPCHook), compiled once against the jars
testkit/apache5 resolves, one JVM per run."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from testkit.apache5 import classpath

HERE = Path(__file__).resolve().parent
JVM_FLAGS = ("-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")
_compiled: list[str] | None = None


def _command() -> list[str]:
    global _compiled
    if _compiled is None:
        out = tempfile.mkdtemp(prefix="rmqtx-acl2-classes-")
        atexit.register(shutil.rmtree, out, True)
        cp = classpath()
        subprocess.run(["java", "-m", "jdk.compiler/com.sun.tools.javac.Main", "-nowarn", "-d", out, "-cp", cp,
                        str(HERE / "java5" / "Acl2Scenario.java")], check=True, timeout=300, capture_output=True)
        _compiled = ["-cp", f"{out}{os.pathsep}{cp}", "Acl2Scenario"]
    return ["java", *JVM_FLAGS, "-Drocketmq.client.logUseSlf4j=false", *_compiled]


def run_scenario(namesrv: str, broker: str, user: str, password: str, timeout: float = 300) -> list[dict]:
    """Each step's JSON line, with the broker's address in outputs replaced by ``BROKER``."""
    home = tempfile.mkdtemp(prefix="rmqtx-acl2-java-")
    try:
        proc = subprocess.run([*_command(), namesrv, broker, user, password], capture_output=True, text=True,
                              timeout=timeout, cwd=home, env={**os.environ, "ROCKETMQ_HOME": home})
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if proc.returncode != 0:
        raise AssertionError(f"Acl2Scenario exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    steps = [json.loads(line.replace(broker, "BROKER")) for line in proc.stdout.splitlines() if line.startswith("{")]
    return steps
