"""The Apache 4.9.8 Java client for the cluster tests: tests/cluster/java's ClusterClient compiled against
the client jars of ``testkit/java.py``'s 4.9.8 build (the same build gives Apache's benchmark
Producer and the Java broker), cached under that build's directory by a hash of source and JDK.

Without a JDK or the build the Java tests skip locally; under CI (``CI`` set) that is a failure.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from testkit import java as java498
from testkit.buildlock import one_build_at_a_time
from tests.admin.mqadmin_java import unavailable


SOURCES = Path(__file__).with_name("java") / "src"
MAIN = "org.rmqtx.cluster.ClusterClient"
#: JVM start-up dominates a client's CPU: one compiler tier, serial GC, a small heap.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xms64m", "-Xmx256m",
             "-XX:-OmitStackTraceInFastThrow", "-Dfile.encoding=UTF-8",
             "-Drocketmq.client.rebalance.waitInterval=1000"]

_lock = threading.Lock()
_built: dict[str, str] = {}


def require() -> None:
    """Skip (fail in CI) unless a JDK and the 4.9.8 build can be had."""
    if not shutil.which("javac") or not shutil.which(java498.java_bin()):
        raise unavailable("no JDK (javac) on PATH; scripts/ensure-interop.sh installs one")
    if not shutil.which("mvn") and not (java498.cache_dir() / "classpaths.json").exists():
        raise unavailable("no mvn on PATH to build the 4.9.8 jars")


def classpaths() -> dict[str, str]:
    """testkit.java's classpaths (broker, namesrv, example) plus ``cluster``: ClusterClient's classes and jars."""
    require()
    with _lock:
        if not _built:
            cps = java498.java_classpaths()  # builds once (minutes) on a fresh machine
            _built.update(cps)
            _built["cluster"] = os.pathsep.join([str(_compile(cps["example"])), cps["example"]])
        return dict(_built)


@one_build_at_a_time
def _compile(classpath: str) -> Path:
    sources = sorted(SOURCES.rglob("*.java"))
    digest = hashlib.sha256(subprocess.run(["javac", "-version"], capture_output=True, text=True).stdout.encode())
    for path in sources:
        digest.update(path.name.encode() + path.read_bytes())
    classes = java498.cache_dir() / f"cluster-client-{digest.hexdigest()[:16]}"
    if (classes / (MAIN.replace(".", "/") + ".class")).exists():
        return classes
    staging = Path(tempfile.mkdtemp(dir=java498.cache_dir(), prefix="cluster-client-"))
    done = subprocess.run(["javac", "--release", "8", "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(staging),
                           *map(str, sources)], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, True)
        raise AssertionError(f"javac failed:\n{done.stderr[-3000:]}")
    shutil.rmtree(classes, True)
    staging.rename(classes)
    return classes


def java_argv(home: Path, classpath: str, main: str, *args: str, flags: list[str] | None = None) -> list[str]:
    """A client JVM with its user.home and logs in ``home`` (never ~/logs)."""
    home.mkdir(parents=True, exist_ok=True)
    return [java498.java_bin(), *(JVM_FLAGS if flags is None else flags), f"-Duser.home={home}",
            f"-Drocketmq.client.logRoot={home / 'logs'}", "-cp", classpath, main, *args]


class JavaClients:
    """Mixed into a FailoverScenario TestCase: producer and consumers are ClusterClient JVMs."""

    cluster: "object"
    cps: dict[str, str]
    _homes = itertools.count()

    def java(self, main: str, *args: str, classpath: str | None = None) -> list[str]:
        home = self.cluster.root / f"java-home-{next(self._homes)}"
        return java_argv(home, classpath or self.cps["cluster"], main, *args)

    def producer_argv(self, cluster, prefix: str) -> list[str]:
        from tests.cluster.harness import TOPIC

        return self.java(MAIN, "produce", cluster.namesrv, TOPIC, "2", prefix, "10")

    def consumer_argv(self, cluster, group: str) -> list[str]:
        return self.java(MAIN, "consume", cluster.namesrv, ",".join(self.topics), group)
