"""End to end: the Apache C++ client (PyPI ``rocketmq``) against a real rmqtx standalone."""

from __future__ import annotations

import subprocess
import sys
import unittest
from pathlib import Path

from testkit.standalone import EventReader, ServerPerTest, real_events, run_client, settle_with_probes, stop_when_all_seen

SCRIPT = str(Path(__file__).with_name("cpp_client.py"))
SEND_OK = 0
N = 8


def expected_bodies(prefix: str = "") -> dict[str, tuple[str, str]]:
    """Every body the produce scenario sends, with its tag and key."""
    tags = ("TagA", "TagB", "TagC")
    out = {f"sync-{i}": (tags[i % 3], f"key-sync-{i}") for i in range(N)}
    out.update({f"oneway-{i}": ("TagA", f"key-oneway-{i}") for i in range(N)})
    out.update({f"batch-{i}": ("TagB", f"key-batch-{i}") for i in range(3)})
    out.update({f"orderly-{i}": ("TagC", f"key-orderly-{i}") for i in range(N)})
    return {prefix + body: (tag, prefix + key) for body, (tag, key) in out.items()}


class CppClientTest(ServerPerTest, unittest.TestCase):
    topic = "T_cpp"

    def client(self, *args: str, timeout: float = 90) -> list[dict]:
        return run_client([sys.executable, SCRIPT, args[0], self.server.namesrv, *args[1:]], timeout, env={"HOME": self.home.name})

    def spawn(self, *args: str) -> subprocess.Popen:
        argv = [sys.executable, SCRIPT, args[0], self.server.namesrv, *args[1:]]
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={"HOME": self.home.name, "PATH": "/usr/bin:/bin"})

    def produce(self, topic: str | None = None, prefix: str = "") -> list[dict]:
        return self.client("produce", topic or self.topic, "P_cpp", str(N), prefix)

    def test_sends_acknowledged(self) -> None:
        sent = self.produce()
        kinds = [e["kind"] for e in sent]
        self.assertEqual([kinds.count(k) for k in ("sync", "oneway", "batch", "orderly")], [N, N, 1, N])
        for event in sent:
            if event["kind"] in ("sync", "orderly", "batch"):
                self.assertEqual(event["status"], SEND_OK, event)
            if event["kind"] in ("sync", "orderly"):  # the C++ client reports no id for a batch
                self.assertEqual(len(event["msg_id"]), 32, event)
        orderly = [e for e in sent if e["kind"] == "orderly"]
        for key in (0, 1):  # the same selector argument: one queue, consecutive offsets
            offsets = [e["offset"] for e in orderly if e["i"] % 2 == key]
            self.assertEqual(offsets, sorted(offsets))
            self.assertEqual(len(set(offsets)), len(offsets))

    def test_cluster_push_with_tag_expression(self) -> None:
        self.produce()
        wanted = {b: tk for b, tk in expected_bodies().items() if tk[0] in ("TagA", "TagB")}
        events = self.client("push", self.topic, "C_cpp_tags", "TagA || TagB", "CLUSTERING", str(len(wanted)), "40")
        got = {e["body"]: (e["tags"], e["keys"]) for e in events if e["kind"] == "recv"}
        self.assertEqual(got, wanted)
        self.assertTrue(all(e["topic"] == self.topic for e in events if e["kind"] == "recv"))

    def received_all(self, reader: EventReader) -> list[dict]:
        code, events, err = reader.finish()
        self.assertEqual(code, 0, err[-2000:])
        return [e for e in real_events(events) if e.get("kind") == "recv"]

    def test_broadcast_each_member_gets_everything(self) -> None:
        """Broadcast consumers start at the queue ends (CONSUME_FROM_LAST_OFFSET): start them, then send."""
        self.server.create_topic(self.topic, 4)
        everything = expected_bodies("bc-")
        readers = [EventReader(self.spawn("push", self.topic, "C_cpp_bc", "*", "BROADCASTING", str(len(everything)), "60", f"bc{i}"))
                   for i in range(2)]
        self.wait_for_members("C_cpp_bc", 2)
        settle_with_probes(self.server, self.topic, readers, 4, shared=True)  # each member positioned at the queue ends
        self.produce(prefix="bc-")
        for reader in readers:
            self.assertEqual({e["body"] for e in self.received_all(reader)}, set(everything))

    def test_two_cluster_consumers_split_queues(self) -> None:
        self.server.create_topic(self.topic, 4)
        everything = expected_bodies()
        # each member gets only its queues' share: they stop when together they have everything (or after 60 s)
        readers = [EventReader(self.spawn("push", self.topic, "C_cpp_split", "*", "CLUSTERING", str(len(everything)), "60", f"sp{i}",
                                          "stdin"))
                   for i in range(2)]
        self.wait_for_members("C_cpp_split", 2)
        settle_with_probes(self.server, self.topic, readers, 4, shared=False)  # both members on two queues each
        self.produce()
        stop_when_all_seen(readers, set(everything), 60)
        per_consumer = [self.received_all(reader) for reader in readers]
        union = {e["body"] for events in per_consumer for e in events}
        self.assertEqual(union, set(everything))
        queues = [{e["queue_id"] for e in events} for events in per_consumer]
        self.assertTrue(all(queues), f"a consumer got nothing: {queues}")
        self.assertFalse(queues[0] & queues[1], f"both consumers read queues {queues[0] & queues[1]}")

    def test_pull_consumer_reads_all(self) -> None:
        self.produce()
        events = self.client("pull", self.topic, "C_cpp_pull", "*")
        bodies = [e["body"] for e in events if e["kind"] == "recv"]
        self.assertEqual(sorted(bodies), sorted(expected_bodies()))


if __name__ == "__main__":
    unittest.main()
