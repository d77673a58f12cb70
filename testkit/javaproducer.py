"""Apache's Java client under SYNC sends, for the controller-mode failover benchmark: ``SyncSender.java``
(DefaultMQProducer of rocketmq-client 5.4.0, from Maven Central through ``testkit/javaproducer/pom.xml``),
compiled once with javac into a cache, run as a child process whose stdout says, per send, what was acked
(msgId, queue, queue offset, times) and what failed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from testkit.apache5 import ApacheUnavailable
from testkit.buildlock import one_build_at_a_time
from testkit.standalone import REPO

SRC = REPO / "testkit" / "javaproducer"
POM = SRC / "pom.xml"
JVM = ["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:-OmitStackTraceInFastThrow"]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rmqtx-javaproducer"


@one_build_at_a_time
def classpath() -> str:
    """The client's classpath plus the compiled SyncSender; built again when the pom or the source changed
    or a cached jar is gone."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        raise ApacheUnavailable("no java/javac on PATH")
    digest = hashlib.sha256(POM.read_bytes() + (SRC / "SyncSender.java").read_bytes()).hexdigest()[:16]
    root = cache_dir() / digest
    cp_file, classes = root / "classpath.txt", root / "classes"
    if cp_file.exists() and (classes / "SyncSender.class").exists():
        jars = [j for j in cp_file.read_text().strip().split(os.pathsep) if j]
        if jars and all(os.path.isfile(j) for j in jars):
            return os.pathsep.join([str(classes), *jars])
    if shutil.which("mvn") is None:
        raise ApacheUnavailable(f"no mvn on PATH to resolve {POM}")
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"classpath.{os.getpid()}.tmp"
    proc = subprocess.run(["mvn", "-q", "-B", "-f", str(POM), "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not out.exists():
        raise ApacheUnavailable(f"mvn could not resolve {POM}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    jars_cp = out.read_text().strip()
    tmp_classes = root / f"classes.{os.getpid()}.tmp"
    shutil.rmtree(tmp_classes, ignore_errors=True)
    subprocess.run(["javac", "-d", str(tmp_classes), "-cp", jars_cp, str(SRC / "SyncSender.java")], check=True,
                   timeout=300)
    shutil.rmtree(classes, ignore_errors=True)
    os.replace(tmp_classes, classes)
    os.replace(out, cp_file)
    return os.pathsep.join([str(classes), jars_cp])


@dataclass
class Ack:
    began: float  #: time.time() when the send began
    done: float
    body: bytes
    msg_id: str
    queue_id: int
    queue_offset: int


@dataclass
class JavaSyncSender:
    """One SyncSender JVM; ``acks`` and ``failures`` fill in as its lines arrive."""

    namesrv: str
    topic: str
    log_path: Path
    acks: list[Ack] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    _reader: threading.Thread | None = None
    _started: threading.Event = field(default_factory=threading.Event)

    def start(self, timeout: float = 60.0) -> "JavaSyncSender":
        cp = classpath()
        self.proc = subprocess.Popen(["java", *JVM, "-cp", cp, "SyncSender", self.namesrv, self.topic],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.log_path, "ab"), text=True, bufsize=1,
                                     start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._started.wait(timeout):
            self.stop()
            raise RuntimeError(f"SyncSender did not start; see {self.log_path}")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "started":
                self._started.set()
            elif parts[0] == "ok" and len(parts) >= 8:
                self.acks.append(Ack(int(parts[1]) / 1000, int(parts[2]) / 1000, parts[3].encode(), parts[4],
                                     int(parts[5]), int(parts[6])))
            elif parts[0] == "fail" and len(parts) >= 5:
                self.failures.append(parts[4].split(":")[0])

    def stop(self, timeout: float = 20.0) -> None:
        """Close its stdin: the loop ends after the send under way, then the producer shuts down."""
        if self.proc is None:
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if self._reader is not None:
            self._reader.join(5)


def main() -> int:
    """``python -m testkit.javaproducer``: build (or find) the classpath and print it."""
    began = time.monotonic()
    print(classpath())
    print(f"in {time.monotonic() - began:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
