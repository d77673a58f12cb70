"""Mixed pairs with the Apache RocketMQ 4.9.8 broker: an rmqtx slave of a Java master and a Java slave
of an rmqtx master replicate under load into byte-equal commit logs; then, under load again, the
SYNC_MASTER is killed with SIGKILL: every message it acked is on the slave byte for byte, a consumer
reads them all from the slave, and reads from the master again once it is back.

Each test starts a JVM (twice for the Java master): slow, so CI runs this module once (trial only).

The Java jars and the Java broker come from ``testkit/java.py`` (it builds 4.9.8 from the source
release on Maven Central, once, into ``~/.cache/rmqtx-bench``), shared with ``benchmarks/vs_java.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import unittest
from pathlib import Path

from rmqtx.broker.jsonfiles import loads_fastjson
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.store.record import decode_record
from testkit.ha import Cluster, Sender, stored_offset, wait_until
from testkit.java import JavaBroker, java_classpaths, java_port
from testkit.standalone import REPO, call

TOPIC = "T_mixed"

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


def _load_until_killed(master, acked_wanted: int) -> tuple[list[tuple[int, bytes]], list[int]]:
    """Four producers send until acked_wanted are acked, then the master gets SIGKILL mid-load;
    (commit log offset, body) of every acked message and every answer's code."""
    acked: list[tuple[int, bytes]] = []
    codes: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def producer(n: int) -> None:
        try:
            sender = Sender(master.addr, group=f"P_kill_{n}")
        except OSError:
            return
        i = 0
        try:
            while not stop.is_set():
                body = f"k{n}-{i}-".encode() + b"z" * 300
                resp = sender.send(TOPIC, body, n % 4)
                with lock:
                    codes.append(resp.code)
                    if resp.code == ResponseCode.SUCCESS:
                        acked.append((stored_offset(resp), body))
                i += 1
        except (OSError, ConnectionError):
            pass  # the master was killed under us
        finally:
            sender.close()

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(acked) >= acked_wanted, 60, f"{acked_wanted} acked sends")
    finally:
        master.kill9()
        stop.set()
        for t in threads:
            t.join(20)
    return acked, codes


def _runtime(addr: str) -> dict:
    resp = call(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
    return (loads_fastjson(resp.body) or {}).get("table", {}) if resp.body else {}


def _first_ack(addr: str) -> None:
    """A SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its slave's first report: wait for a plain SUCCESS."""
    sender = Sender(addr)
    try:
        wait_until(lambda: sender.send(TOPIC, b"hello", 0).code == ResponseCode.SUCCESS, 40, "a send the slave acked", step=0.5)
    finally:
        sender.close()


@unittest.skipIf(shutil.which(os.environ.get("JAVA_HOME", "") + "/bin/java" if os.environ.get("JAVA_HOME") else "java") is None,
                 "needs a JDK")
class MixedPairTest(unittest.TestCase):
    def setUp(self) -> None:
        java_classpaths()  # builds once (minutes) on a fresh machine, cached after
        self.cluster = Cluster()
        self.consumer: subprocess.Popen | None = None
        self.lines: list[dict] = []

    def _equal(self, master, slave, what: str) -> int:
        def same() -> int:
            m = master.commit_log_bytes().rstrip(b"\0")
            return len(m) if len(m) > 0 and slave.commit_log_bytes(len(m)) == m else 0
        return wait_until(same, 40, what, step=0.5)

    def tearDown(self) -> None:
        if self.consumer is not None and self.consumer.poll() is None:
            self.consumer.kill()
            self.consumer.wait(10)
        self.cluster.close()

    def _start_consumer(self, seconds: float) -> None:
        """The rmqtx Python pull consumer (tests/ha/consume_script.py), routed by the NameServer."""
        self.consumer = subprocess.Popen([sys.executable, "-m", "tests.ha.consume_script", self.cluster.namesrv.addr, TOPIC,
                                          str(seconds)], cwd=REPO, stdout=subprocess.PIPE, text=True)

        def read() -> None:
            assert self.consumer is not None and self.consumer.stdout is not None
            for line in self.consumer.stdout:
                if line.startswith("{"):
                    self.lines.append(json.loads(line))
        threading.Thread(target=read, daemon=True).start()

    def _bodies(self) -> set[bytes]:
        return {line["body"].encode() for line in list(self.lines) if "body" in line}

    def _kill_and_fail_over(self, master, slave, slave_topics: Path) -> None:
        """SIGKILL the SYNC_MASTER under load; the acked messages on the slave; a consumer on the slave, then back."""
        # a slave learns topics only from its periodic table sync (every 10 s, as Java's): before the kill
        wait_until(lambda: slave_topics.exists() and TOPIC.encode() in slave_topics.read_bytes(), 30,
                   "the topic synced to the slave")
        acked, codes = _load_until_killed(master, 1000)
        self.assertEqual(set(codes), {ResponseCode.SUCCESS}, "the slave was connected all along")
        data, stored = slave.commit_log_bytes(), master.commit_log_bytes()
        for offset, body in acked:  # every acked message is on the slave, byte for byte as the master stored it
            rec = decode_record(data, offset)
            self.assertEqual(rec.body, body)
            self.assertEqual(data[offset:offset + rec.total_size], stored[offset:offset + rec.total_size])
        namesrv = self.cluster.namesrv
        wait_until(lambda: namesrv.broker_addrs() == {1: slave.addr}, 30, "the NameServer to drop the master")
        self._start_consumer(120)
        first = {body for _, body in acked}
        wait_until(lambda: self._bodies() >= first, 60, "every acked message read from the slave", step=0.5)
        master.start()
        wait_until(lambda: namesrv.broker_addrs() == {0: master.addr, 1: slave.addr}, 60, "the master back in the route")
        _first_ack(master.addr)  # the slave copies from the master again
        sender = Sender(master.addr)
        after = set()
        for i in range(100):
            body = b"after-%d" % i
            self.assertEqual(sender.send(TOPIC, body, i % 4).code, ResponseCode.SUCCESS)
            after.add(body)
        sender.close()
        wait_until(lambda: self._bodies() >= first | after, 60, "the messages sent after the restart", step=0.5)
        # the slave suggests the master (slaveReadEnable off), so the consumer goes back to it once its route
        # names the master again (the client refreshes routes every 30 s); until then it may read everything
        # from the slave, so a message keeps coming for the master to serve
        sender = Sender(master.addr)
        self.addCleanup(sender.close)
        sent = iter(range(1_000_000))

        def served_by_master() -> bool:
            if int(_runtime(master.addr).get("msgGetTotalTodayNow", "0")) > 0:
                return True
            self.assertEqual(sender.send(TOPIC, b"back-%d" % next(sent), 0).code, ResponseCode.SUCCESS)
            return False
        wait_until(served_by_master, 90, "reads served by the master", step=0.5)

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
        self._kill_and_fail_over(java, slave, slave.store / "config" / "topics.json")

    def test_java_slave_of_rmqtx_master(self) -> None:
        master = self.cluster.broker("rmqtx-master", brokerRole="SYNC_MASTER")
        master.port = java_port()  # a Java slave fetches topic config on listenPort - 2, which must be free
        master.addr = f"127.0.0.1:{master.port}"
        master.start()
        java = JavaBroker(self.cluster.root, "java-slave", self.cluster.namesrv.addr, {"brokerRole": "SLAVE", "brokerId": "1"})
        self.cluster.procs.append(java)
        java.start()
        _first_ack(master.addr)
        codes = _load(master.addr, 1800)
        self.assertEqual(set(codes), {ResponseCode.SUCCESS})
        end = self._equal(master, java, "the Java slave's copy of the rmqtx commit log")
        self.assertGreater(end, 1024 * 1024)
        self._kill_and_fail_over(master, java, java.store / "config" / "topics.json")


if __name__ == "__main__":
    unittest.main()
