"""The gRPC endpoint's consumer side with the official 5.x Python SDK's SimpleConsumer: receive and
ack over POP, a message not acked comes back after its invisible duration, and a changed invisible
duration is the one that counts."""

from __future__ import annotations

import json
import time
import unittest
from collections import defaultdict

from rmqtx.common import fastjson
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand

from testkit.standalone import call, wait_for
from testkit.py5 import GrpcServerTest, pull_queue, run_driver

QUEUES = 4


class Py5ConsumerTest(GrpcServerTest):
    """A standalone with its gRPC endpoint per test (trial runs no setUpClass); it must stop cleanly."""
    #: invisible durations of 1-2 s keep the tests short: under Apache's 10 s minimum, so lowered here
    conf = {"messageDelayLevel": "1s 1s 1s 1s 1s", "minInvisibleTimeMillsForRecv": "1000"}
    topic_prefix = "GRPCC"

    def _send(self, topic: str, specs: list[dict]) -> dict[str, dict]:
        events = run_driver({"op": "send", "endpoint": self.server.grpc, "topic": topic, "messages": specs})
        return {e["body"]: e for e in events if e["event"] == "sent"}

    def _consume(self, topic: str, group: str, expect: int, **params: object) -> list[dict]:
        return run_driver({"op": "consume", "endpoint": self.server.grpc, "topic": topic, "group": group,
                           "expect": expect, "wait": 40, **params}, timeout=90)

    def test_receive_and_ack(self) -> None:
        topic = self._topic("ack")
        specs = [{"body": f"m{i}", "tag": "TagA", "keys": [f"k{i}"], "props": {"color": "red"}} for i in range(6)]
        sent = self._send(topic, specs)
        events = self._consume(topic, "GID_grpc_ack", 6, invisible=20)
        recv = [e for e in events if e["event"] == "recv"]
        self.assertEqual(sorted(e["body"] for e in recv), sorted(sent), "each message received once")
        for e in recv:
            self.assertEqual(e["msg_id"], sent[e["body"]]["msg_id"])
            self.assertEqual(e["attempt"], 1)
            self.assertEqual(e["tag"], "TagA")
            self.assertEqual(e["props"].get("color"), "red")
            self.assertNotIn("POP_CK", e["props"])
            parts = e["handle"].split(" ")
            self.assertEqual(len(parts), 9, f"POP_CK fields and the commit log offset: {e['handle']}")
            self.assertEqual(parts[5], "broker-a")
        self.assertEqual({e["body"] for e in events if e["event"] == "acked"}, set(sent))
        # acked: a second consumer of the group gets nothing back, even after the invisible time
        again = self._consume(topic, "GID_grpc_ack", 1, invisible=1, wait=4)
        self.assertEqual([e for e in again if e["event"] == "recv"], [])

    def test_unacked_comes_back(self) -> None:
        topic = self._topic("back")
        self._send(topic, [{"body": "lost"}, {"body": "fine"}])
        started = time.time()
        events = self._consume(topic, "GID_grpc_back", 2, invisible=2, actions={"lost": "skip_once"})
        lost = [e for e in events if e["event"] == "recv" and e["body"] == "lost"]
        self.assertEqual([e["attempt"] for e in lost], [1, 2], "delivered again, as its second attempt")
        self.assertGreaterEqual(lost[1]["at"] - lost[0]["at"], 1.9, "not before its invisible duration")
        self.assertEqual([e["body"] for e in events if e["event"] == "recv" and e["body"] == "fine"], ["fine"])
        self.assertEqual({e["body"] for e in events if e["event"] == "acked"}, {"lost", "fine"})
        self.assertLess(time.time() - started, 60)

    def test_change_invisible_duration(self) -> None:
        topic = self._topic("change")
        self._send(topic, [{"body": "sooner"}, {"body": "keep"}])
        events = self._consume(topic, "GID_grpc_change", 2, invisible=30, change_s=1,
                               actions={"sooner": "change_once", "keep": "change_ack"})
        sooner = [e for e in events if e["event"] == "recv" and e["body"] == "sooner"]
        self.assertEqual([e["attempt"] for e in sooner], [1, 2])
        self.assertLess(sooner[1]["at"] - sooner[0]["at"], 25, "back after the changed duration, not the first")
        changed = {e["body"]: e for e in events if e["event"] == "changed"}
        first = {e["body"]: e for e in events if e["event"] == "recv"}
        self.assertNotEqual(changed["keep"]["handle"], first["keep"]["handle"], "a new receipt handle")
        self.assertEqual({e["body"] for e in events if e["event"] == "acked"}, {"sooner", "keep"})
        acked_keep = [e for e in events if e["event"] == "acked" and e["body"] == "keep"][0]
        self.assertEqual(acked_keep["handle"], changed["keep"]["handle"], "acked with the new handle")

    def test_push_consumer(self) -> None:
        """The SDK's PushConsumer: QueryAssignment, ReceiveMessage, ack; a failed message comes back after
        the backoff the settings gave it (delay level 3 here: 1 s), as its second attempt."""
        topic = self._topic("push")
        self._send(topic, [{"body": "p0"}, {"body": "p1"}, {"body": "p2"}])
        events = run_driver({"op": "push", "endpoint": self.server.grpc, "topic": topic, "group": "GID_grpc_push",
                             "expect": 3, "fail_once": ["p1"], "wait": 40}, timeout=90)
        recv = [e for e in events if e["event"] == "recv"]
        self.assertEqual(sorted({e["body"] for e in recv}), ["p0", "p1", "p2"])
        self.assertEqual([e["attempt"] for e in recv if e["body"] == "p1"], [1, 2])
        self.assertEqual({e["topic"] for e in recv}, {topic})

    def test_fifo_group(self) -> None:
        """A group made orderly as 5.x mqadmin ``updateSubGroup -o true`` does: the config keeps the 5.x fields
        (answered and persisted), its SimpleConsumer gets each message group in order, an un-acked message
        holds back the rest of its group until it comes back, and one that used up its attempts (retryMaxTimes
        1: two) goes to the DLQ and frees its group."""
        group = "GID_grpc_fifo"
        policy = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 2000]}}
        config = {"attributes": {}, "brokerId": 0, "consumeBroadcastEnable": False, "consumeEnable": True,
                  "consumeFromMinEnable": False, "consumeMessageOrderly": True, "consumeTimeoutMinute": 15,
                  "groupName": group, "groupRetryPolicy": policy, "groupSysFlag": 0,
                  "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 1, "retryQueueNums": 1,
                  "whichBrokerWhenConsumeSlowly": 1}
        broker = self.server.broker
        resp = call(broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                                                    body=fastjson.dumps(config)))
        self.assertEqual(resp.code, ResponseCode.SUCCESS)
        resp = call(broker, RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group}))
        self.assertEqual(json.loads(resp.body), config, "the 5.x fields are kept, in the bean's order")
        stored = self.server.root / "store" / "config" / "subscriptionGroup.json"
        wait_for(lambda: stored.exists() and group in json.loads(stored.read_text())["subscriptionGroupTable"], 10,
                 "the group persisted")
        self.assertTrue(json.loads(stored.read_text())["subscriptionGroupTable"][group]["consumeMessageOrderly"])

        topic = self._topic("fifo", "FIFO")
        specs = [{"body": f"g{g}-{i}", "group": f"mg{g}"} for i in range(4) for g in range(3)]
        self._send(topic, specs)
        # one message a receive: a message popped with an un-acked one before it counts a delivery too (Apache
        # counts every offset of a re-popped batch), so a batch would send the whole group to the DLQ
        events = self._consume(topic, group, 11, invisible=1, fifo=True, batch=1,
                               actions={"g1-1": "skip_once", "g2-0": "skip_always"})
        recv = [e for e in events if e["event"] == "recv"]
        for e in recv:
            self.assertEqual(e["message_group"], "mg" + e["body"][1], e["body"])
        acked: dict[str, list[str]] = defaultdict(list)
        for e in events:
            if e["event"] == "acked":
                acked[e["body"][:2]].append(e["body"])
        want = {f"g{g}": [f"g{g}-{i}" for i in range(4)] for g in range(3)}
        want["g2"].remove("g2-0")
        self.assertEqual(dict(acked), want, "each message group acked once each, in order")
        g1_1 = [e for e in recv if e["body"] == "g1-1"]
        self.assertEqual([e["attempt"] for e in g1_1], [1, 2])
        self.assertGreaterEqual(g1_1[1]["at"] - g1_1[0]["at"], 0.9, "back after its invisible duration")
        first_g1_2 = next(e for e in events if e["event"] in ("recv", "held") and e["body"] == "g1-2")
        self.assertGreater(first_g1_2["at"], g1_1[0]["at"] - 0.001)
        self.assertEqual([e["attempt"] for e in recv if e["body"] == "g2-0"], [1, 2], "two attempts, then the DLQ")
        acked_g2_1 = next(e for e in events if e["event"] == "acked" and e["body"] == "g2-1")
        self.assertGreater(acked_g2_1["at"], [e for e in recv if e["body"] == "g2-0"][-1]["at"], "g2-1 waited for g2-0")
        dead = pull_queue(broker, "%DLQ%" + group, 0)
        self.assertEqual([m.body for m in dead], [b"g2-0"])


if __name__ == "__main__":
    unittest.main()
