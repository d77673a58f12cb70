"""The blocking facade used from a plain thread while the reactor runs the broker."""

from __future__ import annotations

from twisted.internet import defer, threads

from rmqtx.client.blocking import BlockingProducer, BlockingPullConsumer
from rmqtx.client.message import PullStatus
from tests.client.support import ClusterTestCase


class BlockingTest(ClusterTestCase):
    def script(self) -> list[bytes]:
        """What a user script would do, run in a worker thread."""
        with BlockingProducer(self.cluster.namesrv_addr, "P_blocking", config=self.config()) as producer:
            results = [producer.send("T_blocking", f"line {i}", tags="TagA", keys=f"k{i}") for i in range(5)]
        assert all(r.msg_id for r in results)
        bodies = []
        with BlockingPullConsumer(self.cluster.namesrv_addr, "C_blocking", config=self.config()) as consumer:
            for mq in consumer.queues("T_blocking"):
                result = consumer.pull(mq, 0, 32)
                if result.status is PullStatus.FOUND:
                    bodies += [m.body for m in result.messages]
                    consumer.update_offset(mq, result.next_begin_offset)
        return bodies

    @defer.inlineCallbacks
    def test_blocking_facade_from_a_thread(self):
        bodies = yield threads.deferToThread(self.script)
        self.assertEqual(sorted(bodies), sorted(f"line {i}".encode() for i in range(5)))

    def test_refuses_the_reactor_thread(self):
        producer = BlockingProducer(self.cluster.namesrv_addr, "P_wrong_thread", config=self.config())
        self.assertRaises(RuntimeError, producer.send, "T", b"x")


SCRIPT = """
import sys
from rmqtx.client.blocking import BlockingProducer
with BlockingProducer(sys.argv[1], "P_script") as producer:
    result = producer.send("T_script", b"from a script", tags="TagS")
print(result.send_status.name, result.message_queue.topic)
"""


class PlainScriptTest(ClusterTestCase):
    @defer.inlineCallbacks
    def test_plain_script_process(self):
        """A separate Python process with no reactor of its own sends and exits cleanly."""
        import os
        import sys

        from twisted.internet import utils

        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out, err, code = yield utils.getProcessOutputAndValue(
            sys.executable, ["-c", SCRIPT, self.cluster.namesrv_addr], env={**os.environ, "PYTHONPATH": root}, path=root
        )
        self.assertEqual(code, 0, err.decode())
        self.assertEqual(out.decode().strip(), "SEND_OK T_script")


PUSH_SCRIPT = """
import queue, sys, threading, time
from rmqtx.client.blocking import BlockingProducer, BlockingPushConsumer
from rmqtx.client.consumer import CONSUME_FROM_FIRST_OFFSET, ConsumeStatus

got = queue.Queue()
threads = set()

def handle(msgs, ctx):
    threads.add(threading.current_thread().name)
    time.sleep(0.05)  # a listener may block: it runs in a worker thread, not the reactor's
    for m in msgs:
        got.put(m.body.decode())
    return ConsumeStatus.CONSUME_SUCCESS

with BlockingProducer(sys.argv[1], "P_push_script") as producer:
    for i in range(6):
        producer.send("T_push_script", f"push {i}", tags="TagP")
with BlockingPushConsumer(sys.argv[1], "C_push_script", handle, topics={"T_push_script": "TagP"},
                          consume_from=CONSUME_FROM_FIRST_OFFSET) as consumer:
    bodies = [got.get(timeout=30) for _ in range(6)]
print(" ".join(sorted(bodies)))
print("reactor thread used" if "rmqtx-reactor" in threads else "worker threads only")
"""


class BlockingPushConsumerTest(ClusterTestCase):
    @defer.inlineCallbacks
    def test_push_consumer_in_a_plain_script(self):
        """A separate process with no reactor of its own consumes with a blocking listener and exits cleanly."""
        import os
        import sys

        from twisted.internet import utils

        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out, err, code = yield utils.getProcessOutputAndValue(
            sys.executable, ["-c", PUSH_SCRIPT, self.cluster.namesrv_addr], env={**os.environ, "PYTHONPATH": root}, path=root
        )
        self.assertEqual(code, 0, err.decode())
        self.assertEqual(out.decode().splitlines(), [" ".join(f"push {i}" for i in range(6)), "worker threads only"])
