"""End to end: the Apache C++ client (PyPI ``rocketmq``) against a real rmqtx standalone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tempfile
import unittest
from pathlib import Path

from tests.e2e.harness import Standalone, run_client

SCRIPT = str(Path(__file__).with_name("cpp_client.py"))
SEND_OK = 0
N = 8


def expected_bodies() -> dict[str, tuple[str, str]]:
    """Every body the produce scenario sends, with its tag and key."""
    tags = ("TagA", "TagB", "TagC")
    out = {f"sync-{i}": (tags[i % 3], f"key-sync-{i}") for i in range(N)}
    out.update({f"oneway-{i}": ("TagA", f"key-oneway-{i}") for i in range(N)})
    out.update({f"batch-{i}": ("TagB", f"key-batch-{i}") for i in range(3)})
    out.update({f"orderly-{i}": ("TagC", f"key-orderly-{i}") for i in range(N)})
    return out


class CppClientTest(unittest.TestCase):
    server: Standalone

    @classmethod
    def setUpClass(cls) -> None:
        cls.home = tempfile.TemporaryDirectory(prefix="rmqtx-cpp-home-")
        cls.server = Standalone().start()
        cls.topic = "T_cpp"
        cls.sent = cls.client("produce", cls.topic, "P_cpp", str(N), timeout=90)

    @classmethod
    def tearDownClass(cls) -> None:
        clean = cls.server.stop()
        log = cls.server.log()
        cls.server.close()
        cls.home.cleanup()
        assert clean, f"standalone did not shut down cleanly\n{log}"

    @classmethod
    def client(cls, *args: str, timeout: float = 90) -> list[dict]:
        argv = [sys.executable, SCRIPT, args[0], cls.server.namesrv, *args[1:]]
        return run_client(argv, timeout, env={"HOME": cls.home.name})

    def spawn(self, *args: str) -> subprocess.Popen:
        argv = [sys.executable, SCRIPT, args[0], self.server.namesrv, *args[1:]]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={"HOME": self.home.name, "PATH": "/usr/bin:/bin"})

    def test_sends_acknowledged(self) -> None:
        kinds = [e["kind"] for e in self.sent]
        self.assertEqual(kinds.count("sync"), N)
        self.assertEqual(kinds.count("orderly"), N)
        self.assertEqual(kinds.count("oneway"), N)
        for event in self.sent:
            if event["kind"] in ("sync", "orderly", "batch"):
                self.assertEqual(event["status"], SEND_OK, event)
            if event["kind"] in ("sync", "orderly"):  # the C++ client reports no id for a batch
                self.assertEqual(len(event["msg_id"]), 32, event)
        orderly = [e for e in self.sent if e["kind"] == "orderly"]
        # orderly by key i % 2: each key's messages got consecutive queue offsets in one queue
        for key in (0, 1):
            offsets = [e["offset"] for e in orderly if e["i"] % 2 == key]
            self.assertEqual(offsets, sorted(offsets))
            self.assertEqual(len(set(offsets)), len(offsets))

    def test_cluster_push_with_tag_expression(self) -> None:
        wanted = {b: tk for b, tk in expected_bodies().items() if tk[0] in ("TagA", "TagB")}
        events = self.client("push", self.topic, "C_cpp_tags", "TagA || TagB", "CLUSTERING", str(len(wanted)), "40")
        got = {e["body"]: (e["tags"], e["keys"]) for e in events if e["kind"] == "recv"}
        self.assertEqual(got, wanted)
        self.assertTrue(all(e["topic"] == self.topic for e in events if e["kind"] == "recv"))

    def test_broadcast_each_member_gets_everything(self) -> None:
        """Broadcast consumers start at the queue ends (CONSUME_FROM_LAST_OFFSET): start them, then send."""
        topic = "T_cpp_bc"
        self.client("produce", topic, "P_cpp_bc", "1", "warm-")  # creates the topic
        everything = {f"bc-{b}" for b in expected_bodies()}
        procs = [self.spawn("push", topic, "C_cpp_bc", "*", "BROADCASTING", str(len(everything)), "40", f"bc{i}") for i in range(2)]
        time.sleep(6)  # both members subscribed and positioned at the end
        self.client("produce", topic, "P_cpp_bc", str(N), "bc-")
        for proc in procs:
            out, err = proc.communicate(timeout=90)
            self.assertEqual(proc.returncode, 0, err[-2000:])
            bodies = {json.loads(l)["body"] for l in out.splitlines() if l.startswith("{") and '"recv"' in l}
            self.assertEqual(bodies, everything)

    def test_two_cluster_consumers_split_queues(self) -> None:
        everything = expected_bodies()
        procs = [self.spawn("push", self.topic, "C_cpp_split", "*", "CLUSTERING", str(len(everything)), "25", f"sp{i}") for i in range(2)]
        per_consumer = []
        for proc in procs:
            out, err = proc.communicate(timeout=90)
            self.assertEqual(proc.returncode, 0, err[-2000:])
            per_consumer.append([json.loads(l) for l in out.splitlines() if l.startswith("{") and '"recv"' in l])
        union = {e["body"] for events in per_consumer for e in events}
        self.assertEqual(union, set(everything))
        queues = [{e["queue_id"] for e in events} for events in per_consumer]
        self.assertTrue(all(queues), f"a consumer got nothing: {queues}")
        self.assertFalse(queues[0] & queues[1], f"both consumers read queues {queues[0] & queues[1]}")

    def test_pull_consumer_reads_all(self) -> None:
        events = self.client("pull", self.topic, "C_cpp_pull", "*")
        bodies = [e["body"] for e in events if e["kind"] == "recv"]
        self.assertEqual(sorted(bodies), sorted(expected_bodies()))


if __name__ == "__main__":
    unittest.main()
