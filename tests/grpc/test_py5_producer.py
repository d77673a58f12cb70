"""The gRPC endpoint with the official 5.x Python SDK (rocketmq-python-client) as producer: what it
sends is read back over remoting, with the properties, queue and offsets a 4.x consumer sees."""

from __future__ import annotations

import time

from rmqtx.common.javacompat import java_string_hash
from testkit.py5 import GrpcServerTest, pull_topic, run_driver, wait_for_bodies

QUEUES = 4


class Py5ProducerTest(GrpcServerTest):
    """A standalone with its gRPC endpoint per test (trial runs no setUpClass); it must stop cleanly."""
    conf = {"transactionCheckInterval": "1000", "transactionTimeOut": "1000", "messageDelayLevel": "1s 2s 3s 5s"}
    topic_prefix = "GRPC"

    def test_normal(self) -> None:
        topic = self._topic("normal")
        specs = [{"body": f"n{i}", "tag": "TagA", "keys": [f"k{i}"], "props": {"color": "red"}} for i in range(8)]
        events = run_driver({"op": "send", "endpoint": self.server.grpc, "topic": topic, "messages": specs})
        sent = {e["body"]: e for e in events if e["event"] == "sent"}
        self.assertEqual(set(sent), {s["body"] for s in specs})
        stored = wait_for_bodies(self.server.broker, topic, QUEUES, set(sent), 10)
        self.assertEqual(set(stored), set(sent))
        for body, msg in stored.items():
            self.assertEqual(msg.properties.get("UNIQ_KEY"), sent[body]["msg_id"])
            self.assertEqual(msg.msg_id, sent[body]["msg_id"])
            self.assertEqual(msg.tags, "TagA")
            self.assertEqual(msg.keys, [f"k{body[1:]}"])
            self.assertEqual(msg.properties.get("color"), "red")
            self.assertEqual(msg.queue_offset, sent[body]["offset"])
        queues_used = {msg.queue_id for msg in stored.values()}
        self.assertGreater(len(queues_used), 1, "normal sends are spread over the queues")

    def test_fifo(self) -> None:
        topic = self._topic("fifo", "FIFO")
        specs = [{"body": f"{g}-{i}", "group": g} for i in range(5) for g in ("orderA", "orderB")]
        run_driver({"op": "send", "endpoint": self.server.grpc, "topic": topic, "messages": specs})
        by_queue = pull_topic(self.server.broker, topic, QUEUES)
        for group in ("orderA", "orderB"):
            queue = abs(java_string_hash(group)) % QUEUES
            bodies = [m.body.decode() for m in by_queue[queue] if m.properties.get("__SHARDINGKEY") == group]
            self.assertEqual(bodies, [f"{group}-{i}" for i in range(5)], f"group {group} in order on queue {queue}")
            others = [m for q, msgs in by_queue.items() if q != queue for m in msgs if m.body.decode().startswith(group)]
            self.assertEqual(others, [])

    def test_delay(self) -> None:
        """delivery_timestamp 2 s ahead -> a timer message (TIMER_DELIVER_MS): stored in the topic only when due."""
        topic = self._topic("delay", "DELAY")
        started = time.time()
        events = run_driver({"op": "send", "endpoint": self.server.grpc, "topic": topic,
                             "messages": [{"body": "later", "delay_s": 2}]})
        sent_at = [e for e in events if e["event"] == "sent"][0]["at"]
        stored = wait_for_bodies(self.server.broker, topic, QUEUES, {"later"}, 20)
        self.assertIn("later", stored)
        msg = stored["later"]
        self.assertNotIn("DELAY", msg.properties)
        self.assertIn("TIMER_DELIVER_MS", msg.properties)
        self.assertIn("TIMER_DEQUEUE_MS", msg.properties)
        self.assertGreaterEqual(msg.store_timestamp / 1000, sent_at + 0.9)
        self.assertGreater(time.time() - started, 1.0)

    def test_transactional(self) -> None:
        """Commit shows up, rollback never does, an open one is committed through the check-back."""
        topic = self._topic("tx", "TRANSACTION")
        specs = [{"body": "tx-commit", "action": "commit"}, {"body": "tx-rollback", "action": "rollback"},
                 {"body": "tx-check", "action": "check"}]
        events = run_driver({"op": "tx", "endpoint": self.server.grpc, "topic": topic, "messages": specs, "wait": 40},
                            timeout=60)
        self.assertEqual([e["body"] for e in events if e["event"] == "checked"][:1], ["tx-check"])
        sent = {e["body"]: e for e in events if e["event"] == "sent"}
        stored = wait_for_bodies(self.server.broker, topic, QUEUES, {"tx-commit", "tx-check"}, 20)
        self.assertEqual(set(stored) & {"tx-commit", "tx-check"}, {"tx-commit", "tx-check"})
        for body in ("tx-commit", "tx-check"):
            self.assertEqual(stored[body].properties.get("UNIQ_KEY"), sent[body]["msg_id"])
        time.sleep(0)  # the rollback is final at once: it was never stored in the topic
        self.assertNotIn("tx-rollback", {m.body.decode() for ms in pull_topic(self.server.broker, topic, QUEUES).values() for m in ms})
