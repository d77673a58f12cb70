"""Mixed pairs with the Apache RocketMQ 4.9.8 broker: an rmqtx slave of a Java master and a Java slave
of an rmqtx master replicate under load into byte-equal commit logs.

The Java jars come from the bench-vs-java helper's ``benchmarks/vs_java.py`` (it builds 4.9.8 from the
source release on Maven Central, once, into ``~/.cache/rmqtx-bench``); this module reuses its build
function, JVM flags and logback configuration instead of copying them.
"""

from __future__ import annotations

import os
import shutil
import threading
import unittest
from pathlib import Path

from rmqtx.remoting.codes import ResponseCode
from tests.ha.harness import Cluster, Proc, Sender, wait_until

try:
    from benchmarks import vs_java
except ImportError:  # the bench-vs-java branch is not merged yet
    vs_java = None

JAVA_HEAP = ["-Xms256m", "-Xmx256m", "-XX:MaxDirectMemorySize=512m"]
TOPIC = "T_mixed"


def java_opens() -> list[str]:
    """On Java 9+, what 4.9.8's store needs to unmap files by reflection: without it a broker restarted
    after kill -9 dies in IndexService.load (it destroys the unfinished last index file). Apache's
    runbroker.sh adds nothing, so a 4.9.8 broker on Java 17 has the same trouble there."""
    import re
    import subprocess

    text = subprocess.run([vs_java.java_bin(), "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)', text)
    if m is None or m.group(1) == "1":  # 1.8 and older
        return []
    return ["--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED"]


_TAKEN: set[int] = set()  # ports handed out in this process, so two Java brokers never share one


def _java_port() -> int:
    """A broker port whose port-2 (Java's fast port) and port+1 (Java's HA port, always listenPort+1) are free."""
    for _ in range(50):
        port = vs_java.free_port(_TAKEN, gap_below=2)
        if vs_java.port_free(port + 1):
            _TAKEN.add(port + 1)
            return port
    raise RuntimeError("no free port triple for a Java broker")


class JavaBroker(Proc):
    """The 4.9.8 broker in its own JVM, with a minimal ROCKETMQ_HOME."""

    def __init__(self, root: Path, name: str, namesrv: str, conf: dict[str, str]) -> None:
        super().__init__(root, name)
        self.port = _java_port()
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
        (home / "conf" / "logback_broker.xml").write_text(vs_java.LOGBACK.format(log=self.log_path))
        conf = self.root / f"{self.name}.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.conf.items()))
        cps = vs_java.java_classpaths()
        cmd = [vs_java.java_bin(), *JAVA_HEAP, *vs_java.BROKER_OPTS, *java_opens(), f"-Duser.home={home}", f"-Drocketmq.home.dir={home}",
               "-cp", cps["broker"], "org.apache.rocketmq.broker.BrokerStartup", "-c", str(conf)]
        import subprocess

        with open(self.root / f"{self.name}.out", "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, "ROCKETMQ_HOME": str(home)}, start_new_session=True)
        wait_until(lambda: self._up(), timeout, f"Java broker {self.name}", step=0.2)
        return self

    def _up(self) -> bool:
        if not self.alive():
            raise AssertionError(f"Java broker {self.name} exited:\n{(self.root / f'{self.name}.out').read_text()[-3000:]}")
        return vs_java.accepts(self.addr)

    def stop(self) -> bool:
        if self.proc is not None and self.proc.poll() is None:
            vs_java.stop(self.proc, grace=20)
        return True

    def commit_log_bytes(self, upto: int | None = None) -> bytes:
        d = self.store / "commitlog"
        out = b"".join((d / n).read_bytes() for n in sorted(os.listdir(d)) if n.isdigit())
        return out if upto is None else out[:upto]


def _load(addr: str, count: int, producers: int = 3) -> list[int]:
    """Several producers sending count messages in all; the response codes."""
    codes: list[int] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        sender = Sender(addr, group=f"P_mixed_{n}")
        try:
            for i in range(count // producers):
                resp = sender.send(TOPIC, f"p{n}-{i}-".encode() + b"m" * 500, i % 4)
                with lock:
                    codes.append(resp.code)
        finally:
            sender.close()
    threads = [threading.Thread(target=run, args=(n,)) for n in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return codes


def _first_ack(addr: str) -> None:
    """A SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its slave's first report: wait for a plain SUCCESS."""
    sender = Sender(addr)
    try:
        wait_until(lambda: sender.send(TOPIC, b"hello", 0).code == ResponseCode.SUCCESS, 40, "a send the slave acked", step=0.5)
    finally:
        sender.close()


@unittest.skipIf(vs_java is None, "needs benchmarks/vs_java.py from the bench-vs-java branch (builds the 4.9.8 jars)")
@unittest.skipIf(shutil.which(os.environ.get("JAVA_HOME", "") + "/bin/java" if os.environ.get("JAVA_HOME") else "java") is None,
                 "needs a JDK")
class MixedPairTest(unittest.TestCase):
    def setUp(self) -> None:
        vs_java.java_classpaths()  # builds once (minutes) on a fresh machine, cached after
        self.cluster = Cluster()

    def tearDown(self) -> None:
        self.cluster.close()

    def _equal(self, master, slave, what: str) -> int:
        def same() -> int:
            m = master.commit_log_bytes().rstrip(b"\0")
            return len(m) if len(m) > 0 and slave.commit_log_bytes(len(m)) == m else 0
        return wait_until(same, 40, what, step=0.5)

    def test_rmqtx_slave_of_java_master(self) -> None:
        java = JavaBroker(self.cluster.root, "java-master", self.cluster.namesrv.addr, {"brokerRole": "SYNC_MASTER"})
        self.cluster.procs.append(java)
        java.start()
        slave = self.cluster.broker("rmqtx-slave", brokerRole="SLAVE", brokerId=1).start()  # master from the NameServer
        _first_ack(java.addr)
        codes = _load(java.addr, 1800)  # ~1 MB: crosses into the second 1 MB file
        self.assertEqual(set(codes), {ResponseCode.SUCCESS})
        end = self._equal(java, slave, "the rmqtx slave's copy of the Java commit log")
        self.assertGreater(end, 1024 * 1024)

    def test_java_slave_of_rmqtx_master(self) -> None:
        master = self.cluster.broker("rmqtx-master", brokerRole="SYNC_MASTER").start()
        java = JavaBroker(self.cluster.root, "java-slave", self.cluster.namesrv.addr, {"brokerRole": "SLAVE", "brokerId": "1"})
        self.cluster.procs.append(java)
        java.start()
        _first_ack(master.addr)
        codes = _load(master.addr, 1800)
        self.assertEqual(set(codes), {ResponseCode.SUCCESS})
        end = self._equal(master, java, "the Java slave's copy of the rmqtx commit log")
        self.assertGreater(end, 1024 * 1024)


if __name__ == "__main__":
    unittest.main()
