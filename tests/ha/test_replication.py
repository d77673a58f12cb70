"""rmqtx master + slave in separate processes on loopback: the slave's commit log is the master's, byte for byte."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import unittest

from rmqtx.remoting.codes import ResponseCode
from rmqtx.store.record import decode_record
from testkit.standalone import REPO
from testkit.ha import Cluster, Sender, pull, stored_offset, wait_until

TOPIC = "T_ha"
NOT_AVAILABLE = re.compile(
    r"^service not available now\. It may be caused by one of the following reasons: the broker's disk is full "
    r"\[CL: [ \d.-]{5} CQ: [ \d.-]{5} INDEX: [ \d.-]{5}\], messages are put to the slave, message store has been shut down, etc\.$"
)


def send_many(addr: str, count: int, start: int = 0, size: int = 700) -> list[tuple[int, bytes]]:
    """Send count messages over 4 queues; (stored offset, body) of each acked one."""
    sender = Sender(addr)
    acked = []
    try:
        for i in range(start, start + count):
            body = f"msg-{i}-".encode() + b"x" * size
            resp = sender.send(TOPIC, body, i % 4, KEYS=f"k{i}")
            if resp.code != ResponseCode.SUCCESS:
                raise AssertionError(f"send {i}: {resp.code} {resp.remark}")
            acked.append((stored_offset(resp), body))
    finally:
        sender.close()
    return acked


def commit_log_end(acked: list[tuple[int, bytes]], broker) -> int:
    """The end of the last acked record in broker's commit log."""
    offset, _ = max(acked)
    data = broker.commit_log_bytes()
    return offset + decode_record(data, offset).total_size


class MasterSlaveTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = Cluster()

    def tearDown(self) -> None:
        bad = self.cluster.close()
        self.assertEqual(bad, [], "processes that did not shut down cleanly")

    def test_async_master_and_slave_replicate_byte_for_byte(self) -> None:
        master = self.cluster.broker("master", brokerRole="ASYNC_MASTER").start()
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1).start()  # learns the master from the NameServer
        acked = send_many(master.addr, 3000)  # ~2.2 MB: three 1 MB commit log files, end-of-file blanks included
        end = commit_log_end(acked, master)
        wait_until(lambda: slave.commit_log_bytes(end) == master.commit_log_bytes(end), 30, "the slave's copy")
        self.assertGreater(end, 2 * 1024 * 1024)
        self.assertEqual(self.cluster.namesrv.broker_addrs(), {0: master.addr, 1: slave.addr})
        listing = subprocess.run([sys.executable, "-m", "rmqtx.tools.admin", "clusterList", "-n", self.cluster.namesrv.addr],
                                 cwd=REPO, capture_output=True, text=True, timeout=30)
        rows = {tuple(line.split()[1:4]) for line in listing.stdout.splitlines() if line.startswith("HaCluster")}
        self.assertEqual(rows, {("broker-a", "0", master.addr), ("broker-a", "1", slave.addr)}, listing.stdout + listing.stderr)
        # the slave dispatched its consume queues: it serves the same reads as the master
        for qid in range(4):
            m_resp, m_recs = pull(master.addr, TOPIC, qid, 700)
            s_resp, s_recs = wait_until(lambda: (r := pull(slave.addr, TOPIC, qid, 700))[1] and r, 10, "slave reads")
            self.assertEqual(s_resp.code, ResponseCode.SUCCESS)
            self.assertEqual([r.body for r in s_recs], [r.body for r in m_recs])
            self.assertEqual(s_resp.ext_fields["maxOffset"], m_resp.ext_fields["maxOffset"])
            self.assertEqual(s_resp.ext_fields["suggestWhichBrokerId"], "0")  # slaveReadEnable is off
        # a slave refuses writes as Java does
        refused = Sender(slave.addr).send(TOPIC, b"to the slave")
        self.assertEqual(refused.code, ResponseCode.SERVICE_NOT_AVAILABLE)
        self.assertRegex(refused.remark, NOT_AVAILABLE)

    def test_slave_that_was_down_catches_up(self) -> None:
        master = self.cluster.broker("master", brokerRole="ASYNC_MASTER").start()
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress="", flushDiskType="SYNC_FLUSH").start()
        first = send_many(master.addr, 200)
        end = commit_log_end(first, master)
        wait_until(lambda: slave.commit_log_bytes(end) == master.commit_log_bytes(end), 20, "the first copy")
        slave.kill9()
        later = send_many(master.addr, 2000, start=200)
        end = commit_log_end(later, master)
        slave.start()
        wait_until(lambda: slave.commit_log_bytes(end) == master.commit_log_bytes(end), 30, "the catch-up")
        resp, recs = wait_until(lambda: (r := pull(slave.addr, TOPIC, 3, 540))[1] and r, 10, "slave reads")
        self.assertTrue(recs[0].body.startswith(b"msg-2163-"), recs[0].body[:20])  # queue 3, offset 540 = message 2163

    def test_sync_master_acks_only_what_the_slave_has_even_after_kill_9(self) -> None:
        master = self.cluster.broker("master", brokerRole="SYNC_MASTER").start()
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1).start()
        wait_until(lambda: "requests offset" in master.log(), 20, "the slave's first report")
        acked: list[tuple[int, bytes]] = []
        codes: list[int] = []
        lock = threading.Lock()
        stop = threading.Event()

        def producer(n: int) -> None:
            try:
                sender = Sender(master.addr, group=f"P_ha_{n}")
            except OSError:
                return
            i = 0
            try:
                while not stop.is_set():
                    body = f"p{n}-{i}-".encode() + b"y" * 300
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
        wait_until(lambda: len(acked) >= 1500, 40, "1500 acked sends")
        master.kill9()
        stop.set()
        for t in threads:
            t.join(20)
        self.assertEqual(set(codes), {ResponseCode.SUCCESS}, "a slave was connected all along")
        data = slave.commit_log_bytes()
        for offset, body in acked:  # every acked message is on the slave, byte for byte as the master stored it
            rec = decode_record(data, offset)
            self.assertEqual(rec.body, body)
            self.assertEqual(data[offset:offset + rec.total_size], master.commit_log_bytes(offset + rec.total_size)[offset:])

    def test_sync_master_without_slave_answers_slave_not_available(self) -> None:
        master = self.cluster.broker("master", brokerRole="SYNC_MASTER").start()
        sender = Sender(master.addr)
        resp = sender.send(TOPIC, b"nobody copies me")
        self.assertEqual(resp.code, ResponseCode.SLAVE_NOT_AVAILABLE)
        self.assertIsNone(resp.remark)
        self.assertIn("msgId", resp.ext_fields)  # stored all the same, as Java's sendOK
        resp = sender.send(TOPIC, b"no wait", WAIT="false")  # isWaitStoreMsgOK false: answered at once
        self.assertEqual(resp.code, ResponseCode.SUCCESS)
        sender.close()


if __name__ == "__main__":
    unittest.main()
