"""The Apache RocketMQ 4.9.8 Java side for tests and benchmarks: its jars built once from the source
release, the JVM options of Apache's start scripts (scaled to a 2-core machine), and a Java broker
process for the mixed clusters.

The source release (``rocketmq-all-4.9.8-source-release.zip``, on Maven Central, declared in
``testkit/java/pom.xml``) is built with Maven into ``$RMQTX_BENCH_CACHE`` (default
``~/.cache/rmqtx-bench``; ~2 min the first time): the 4.9.8 broker, NameServer and example jars are
not published on Maven Central. Needs Java 8+ and Maven (``scripts/ensure-java.sh`` installs a JRE).
The Java broker binds all interfaces: 4.9.8 has no bind-address setting.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from testkit import procs
from testkit.buildlock import one_build_at_a_time
from testkit.ha import Proc, wait_until
from testkit.ports import free_port, port_free
from testkit.standalone import REPO

VERSION = "4.9.8"
POM = REPO / "testkit" / "java" / "pom.xml"

G1 = ["-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25",
      "-XX:InitiatingHeapOccupancyPercent=30", "-XX:SoftRefLRUPolicyMSPerMB=0"]
NAMESRV_OPTS = ["-server", "-Xms512m", "-Xmx512m", "-XX:MetaspaceSize=128m", "-XX:MaxMetaspaceSize=320m", *G1,
                "-XX:-OmitStackTraceInFastThrow", "-XX:-UseLargePages"]
BROKER_OPTS = ["-server", *G1, "-XX:-OmitStackTraceInFastThrow",
               "-XX:MaxDirectMemorySize=4g", "-XX:-UseLargePages"]
CLIENT_OPTS = ["-server", "-Xms1g", "-Xmx1g", "-Xmn256m", "-XX:-OmitStackTraceInFastThrow",
               "-XX:-UseLargePages", "-XX:+PerfDisableSharedMem"]
MVN_BUILD_FLAGS = ["-q", "-B", "-Dmaven.compiler.source=1.8", "-Dmaven.compiler.target=1.8", "-DskipTests",
                   "-Dmaven.test.skip=true", "-Dcheckstyle.skip", "-Drat.skip", "-Djacoco.skip", "-Dspotbugs.skip",
                   "-Denforcer.skip", "-Dmaven.javadoc.skip", "-Dmaven.source.skip"]
DEP_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"

LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <appender name="file" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d %p %t - %m%n</pattern></encoder>
  </appender>
  <appender name="async" class="ch.qos.logback.classic.AsyncAppender">
    <appender-ref ref="file"/>
    <discardingThreshold>0</discardingThreshold>
  </appender>
  <root level="INFO"><appender-ref ref="async"/></root>
</configuration>
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    return Path(os.environ.get("RMQTX_BENCH_CACHE", Path.home() / ".cache" / "rmqtx-bench")) / f"rocketmq-{VERSION}"


@one_build_at_a_time
def java_classpaths() -> dict[str, str]:
    """Classpaths of the 4.9.8 broker, NameServer and example module, built from the source release."""
    cache = cache_dir()
    index = cache / "classpaths.json"
    if index.exists():
        cps = json.loads(index.read_text())
        if all(Path(p).exists() for cp in cps.values() for p in cp.split(os.pathsep)):
            return cps
    cache.mkdir(parents=True, exist_ok=True)
    src = cache / f"rocketmq-all-{VERSION}"
    if not (src / "pom.xml").exists():
        # the plugin skips a zip its marker says is unpacked: the markers live in the cache beside what they
        # describe, and are dropped whenever the unpacked tree is not there (a half-made or cleaned cache)
        markers = cache / "markers"
        shutil.rmtree(markers, ignore_errors=True)
        log(f"fetching rocketmq-all-{VERSION}-source-release.zip with Maven")
        subprocess.run(["mvn", "-q", "-B", "-f", str(POM), f"{DEP_PLUGIN}:unpack-dependencies", "-DincludeTypes=zip",
                        f"-DoutputDirectory={cache}", f"-DmarkersDirectory={markers}"], check=True)
        if not (src / "pom.xml").exists():
            raise RuntimeError(f"unpacking the {VERSION} source release left no {src / 'pom.xml'}")
    log(f"building the {VERSION} broker, NameServer and example jars (once, ~2 min)")
    subprocess.run(["mvn", *MVN_BUILD_FLAGS, "-f", str(src / "pom.xml"), "-pl", "broker,namesrv,example", "-am",
                    "package", f"{DEP_PLUGIN}:build-classpath", "-Dmdep.outputFile=runtime-classpath.txt",
                    "-Dmdep.includeScope=runtime"], check=True)
    cps = {}
    for module in ("namesrv", "broker", "example"):
        deps = (src / module / "runtime-classpath.txt").read_text().strip()
        cps[module] = os.pathsep.join([str(src / module / "target" / f"rocketmq-{module}-{VERSION}.jar"), deps])
    index.write_text(json.dumps(cps, indent=1))
    return cps


def java_bin() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


# ---------------------------------------------------------------- a Java broker beside rmqtx ones

JAVA_HEAP = ["-Xms256m", "-Xmx256m", "-XX:MaxDirectMemorySize=512m"]
#: 4.9.8 unmaps files through java.nio internals when it recovers a store after a crash; JDK 9+ must open
#: them (only JDK 9+ launchers read this variable, so a JDK 8 is not affected).
JDK9_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED "
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED")


def java_opens() -> list[str]:
    """On Java 9+, what 4.9.8's store needs to unmap files by reflection: without it a broker restarted
    after kill -9 dies in IndexService.load (it destroys the unfinished last index file). Apache's
    runbroker.sh adds nothing, so a 4.9.8 broker on Java 17 has the same trouble there."""
    text = subprocess.run([java_bin(), "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)', text)
    if m is None or m.group(1) == "1":  # 1.8 and older
        return []
    return ["--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED"]


def java_port() -> int:
    """A broker port whose port-2 (Java's fast port) and port+1 (Java's HA port, always listenPort+1) are free."""
    for _ in range(50):
        port = free_port(gap_below=2, host="0.0.0.0")
        if port_free(port + 1):
            return port
    raise RuntimeError("no free port triple for a Java broker")


class JavaBroker(Proc):
    """The 4.9.8 broker in its own JVM, with a minimal ROCKETMQ_HOME."""

    def __init__(self, root: Path, name: str, namesrv: str, conf: dict[str, str]) -> None:
        super().__init__(root, name)
        self.port = java_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.ha_addr = f"127.0.0.1:{self.port + 1}"
        self.store = root / name / "store"
        self.conf = {"brokerClusterName": "HaCluster", "brokerName": "broker-a", "brokerIP1": "127.0.0.1",
                     "namesrvAddr": namesrv, "listenPort": str(self.port), "storePathRootDir": str(self.store),
                     "storePathCommitLog": str(self.store / "commitlog"), "mappedFileSizeCommitLog": str(1024 * 1024),
                     "flushDiskType": "ASYNC_FLUSH", **conf}

    def start(self, timeout: float = 60) -> "JavaBroker":
        home = self.root / f"{self.name}-home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        (home / "conf" / "logback_broker.xml").write_text(LOGBACK.format(log=self.log_path))
        conf = self.root / f"{self.name}.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.conf.items()))
        cps = java_classpaths()
        cmd = [java_bin(), *JAVA_HEAP, *BROKER_OPTS, *java_opens(), f"-Duser.home={home}", f"-Drocketmq.home.dir={home}",
               "-cp", cps["broker"], "org.apache.rocketmq.broker.BrokerStartup", "-c", str(conf)]
        with open(self.root / f"{self.name}.out", "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, "ROCKETMQ_HOME": str(home), "JDK_JAVA_OPTIONS": JDK9_OPENS}, start_new_session=True)
        wait_until(lambda: self._up(), timeout, f"Java broker {self.name}", step=0.2)
        return self

    def _up(self) -> bool:
        if not self.alive():
            raise AssertionError(f"Java broker {self.name} exited:\n{(self.root / f'{self.name}.out').read_text()[-3000:]}")
        return procs.accepts(self.addr)

    def stop(self) -> bool:
        if self.proc is not None and self.proc.poll() is None:
            procs.stop(self.proc, grace=20)
        return True

    def commit_log_bytes(self, upto: int | None = None) -> bytes:
        d = self.store / "commitlog"
        out = b"".join((d / n).read_bytes() for n in sorted(os.listdir(d)) if n.isdigit())
        return out if upto is None else out[:upto]
