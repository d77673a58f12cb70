"""Issue 7 with the Apache C++ client: delay levels, retry through a failing listener, orderly consumers."""

from __future__ import annotations

import subprocess
import sys
import unittest
from collections import defaultdict
from pathlib import Path

from testkit.standalone import EventReader, ServerPerTest, real_events, run_client, settle_with_probes, stop_when_all_seen

SCRIPT = str(Path(__file__).with_name("cpp_client.py"))
#: Level 1 = 1 s, level 2 = 2 s, level 3 (first retry) = 1 s: real semantics, short waits.
LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


class CppDeliveryTest(ServerPerTest, unittest.TestCase):
    server_conf = {"messageDelayLevel": LEVELS}

    def run_script(self, *args: str, timeout: float = 90) -> list[dict]:
        return run_client([sys.executable, SCRIPT, args[0], self.server.namesrv, *args[1:]], timeout, env={"HOME": self.home.name})

    def spawn(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, SCRIPT, args[0], self.server.namesrv, *args[1:]], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={"HOME": self.home.name, "PATH": "/usr/bin:/bin"})

    def test_delay_levels_wait_at_least_their_time(self) -> None:
        events = self.run_script("delayed", "T_cpp_delay", "C_cpp_delay")
        self.assertEqual([e for e in events if e["kind"] == "error"], [])
        sent = {e["body"]: e["at"] for e in events if e["kind"] == "sent"}
        got = {e["body"]: e["at"] for e in events if e["kind"] == "recv"}
        self.assertEqual(set(got), {"level-1", "level-2"})
        self.assertGreaterEqual(got["level-1"] - sent["level-1"], 0.95)
        self.assertGreaterEqual(got["level-2"] - sent["level-2"], 1.95)
        self.assertLess(got["level-2"] - sent["level-2"], 10)

    def test_failing_listener_sees_message_again(self) -> None:
        self.run_script("produce", "T_cpp_retry", "P_cpp_retry", "2", "r-")
        # a deadline, not a wait: the script stops as soon as all nine came back; the C++ client learns
        # the retry topic's route only at its periodic refresh (10 s, then every 30 s), late on a loaded machine
        events = self.run_script("failing_once", "T_cpp_retry", "C_cpp_retry", "9", "120", timeout=180)
        by_body: dict[str, list[int]] = defaultdict(list)
        for event in events:
            if event["kind"] == "recv":
                by_body[event["body"]].append(event["reconsume"])
                self.assertEqual(event["topic"], "T_cpp_retry")  # the client shows the original topic
        timeline = "\n".join(str(e) for e in events) + "\n" + self.server.log()[-3000:]
        self.assertEqual(len(by_body), 9, sorted(by_body))  # 2 sync, 2 oneway, 3 batch, 2 orderly
        for body, reconsumes in by_body.items():
            self.assertIn(1, reconsumes, f"{body}\n{timeline}")
            self.assertEqual(reconsumes, sorted(reconsumes), body)

    def test_orderly_consumers_keep_order_and_never_share_a_queue(self) -> None:
        topic = "T_cpp_order"
        self.server.create_topic(topic, 4)
        # the members run until together they got all 40 (then 1 s more for duplicates and reorderings), 30 s at most
        readers = [EventReader(self.spawn("orderly_consume", topic, "C_cpp_order", "30", f"o{i}", "stdin")) for i in range(2)]
        self.wait_for_members("C_cpp_order", 2)
        # both members rebalanced and holding their locks: each gets the probes of its two queues only
        settle_with_probes(self.server, topic, readers, 4, shared=False)
        self.run_script("orderly_produce", topic, "4", "10")
        stop_when_all_seen(readers, {f"k{k}-{s}" for k in range(4) for s in range(10)}, 30)
        received = []
        for reader in readers:
            code, events, err = reader.finish()
            self.assertEqual(code, 0, err[-2000:])
            received.append([e for e in real_events(events) if e.get("kind") == "recv"])
        bodies = [e["body"] for events in received for e in events]
        self.assertEqual(sorted(set(bodies)), sorted(f"k{k}-{s}" for k in range(4) for s in range(10)))
        queues = [{e["queue_id"] for e in events} for events in received]
        self.assertFalse(queues[0] & queues[1], f"queues consumed by both members: {queues[0] & queues[1]}")
        for events in received:
            per_key: dict[str, list[int]] = defaultdict(list)
            for e in events:
                key, seq = e["body"].split("-")
                per_key[key].append(int(seq))
            for key, seqs in per_key.items():
                self.assertEqual(seqs, sorted(seqs), f"{key} out of order")


if __name__ == "__main__":
    unittest.main()
