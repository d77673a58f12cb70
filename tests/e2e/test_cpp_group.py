"""Push consumers of one group with the Apache C++ client: members started together split the
queues without losing a message, and a restarted member resumes at the offset its group committed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import unittest
from collections import defaultdict
from pathlib import Path

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import ServerPerTest, call, run_client

SCRIPT = str(Path(__file__).with_name("cpp_client.py"))


class Member:
    """One ``cpp_client.py member`` process; its events are collected by a thread as they come."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr_path: Path) -> None:
        self.stderr = stderr_path.open("w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        self.events: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def has(self, kind: str) -> bool:
        return any(e["kind"] == kind for e in list(self.events))

    def received(self) -> list[dict]:
        return [e for e in list(self.events) if e["kind"] == "recv"]

    def stop(self, timeout: float = 30) -> None:
        """Close stdin: the member shuts down (committing its offsets) and exits."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)
        self.stderr.close()


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


class CppGroupTest(ServerPerTest, unittest.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.members: list[Member] = []

    def tearDown(self) -> None:
        for m in self.members:
            m.stop()
        super().tearDown()

    def member(self, topic: str, group: str, instance: str) -> Member:
        argv = [sys.executable, SCRIPT, "member", self.server.namesrv, topic, group, instance]
        m = Member(argv, {"HOME": self.home.name, "PATH": "/usr/bin:/bin"}, Path(self.home.name) / f"{instance}.err")
        self.members.append(m)
        return m

    def send(self, topic: str, count: int, prefix: str) -> list[str]:
        events = run_client([sys.executable, SCRIPT, "send_n", self.server.namesrv, topic, f"P_{topic}", str(count), prefix],
                            60, env={"HOME": self.home.name})
        sent = [e for e in events if e["kind"] == "sent"]
        self.assertEqual([e["status"] for e in sent], [0] * count)  # SEND_OK
        return [e["body"] for e in sent]

    def committed(self, group: str, topic: str) -> dict[int, int]:
        out = {}
        for q in range(4):
            resp = call(self.server.broker, RemotingCommand.request(
                RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": q}))
            if resp.code == ResponseCode.SUCCESS:
                out[q] = int(resp.ext_fields["offset"])
        return out

    def test_three_members_started_together_lose_nothing(self) -> None:
        topic, group = "T_cpp_three", "C_cpp_three"
        self.server.create_topic(topic, 4)
        members = [self.member(topic, group, f"m{i}") for i in range(3)]  # all three at once
        wait_until(lambda: all(m.has("ready") for m in members), 30, "members started")
        self.wait_for_members(group, 3)
        bodies = self.send(topic, 100, "three-")
        union = lambda: {e["body"] for m in members for e in m.received()}  # noqa: E731
        wait_until(lambda: union() >= set(bodies), 40, f"all 100 delivered (missing {sorted(set(bodies) - union())[:5]})")
        for m in members:
            m.stop()
        per_member = [[e["body"] for e in m.received() if e["reconsume"] == 0] for m in members]
        for i, got in enumerate(per_member):
            twice = sorted(b for b in set(got) if got.count(b) > 1)
            self.assertEqual(twice, [], f"member m{i} got these twice")
        self.assertEqual(union(), set(bodies))
        # offsets committed at shutdown cover everything: a fourth member would start after the 100
        self.assertEqual(sum(self.committed(group, topic).values()), 100)

    def test_restarted_member_resumes_at_the_committed_offset(self) -> None:
        topic, group = "T_cpp_resume", "C_cpp_resume"
        self.server.create_topic(topic, 4)
        first = self.member(topic, group, "first")
        wait_until(lambda: first.has("ready"), 30, "first member started")
        self.wait_for_members(group, 1)
        before = self.send(topic, 10, "before-")
        wait_until(lambda: {e["body"] for e in first.received()} >= set(before), 30, "first member got the first 10")
        first.stop()  # shutdown commits what it consumed
        self.assertEqual(sum(self.committed(group, topic).values()), 10)
        after = self.send(topic, 5, "after-")
        second = self.member(topic, group, "second")  # a new client instance of the same group
        wait_until(lambda: {e["body"] for e in second.received()} >= set(after), 30, "second member got the later 5")
        second.stop()
        again = sorted({e["body"] for e in second.received()} & set(before))
        self.assertEqual(again, [], "the restarted member re-read committed messages")
        by_body = defaultdict(int)
        for e in second.received():
            by_body[e["body"]] += 1
        self.assertEqual(sorted(by_body), sorted(after))
