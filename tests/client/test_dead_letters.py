"""Issue 20 with rmqtx's client: a message that keeps failing reaches the DLQ at once, its copies as Java stores them."""

from __future__ import annotations

import time

from twisted.internet import defer

from rmqtx.client.consumer import CONSUME_FROM_FIRST_OFFSET, ConsumeStatus, PullConsumer, PushConsumer
from rmqtx.client.message import Message, PullStatus
from rmqtx.client.producer import Producer
from rmqtx.common.message import parse_properties
from rmqtx.store.record import decode_record
from tests.client.support import ClusterTestCase, wait_until

#: Level 3 (the first retry) takes 3 s: a second trip through it would be plain to see.
LEVELS = "1s 2s 3s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


class DeadLetterTest(ClusterTestCase):
    broker_conf = {"messageDelayLevel": LEVELS, "brokerClusterName": "DefaultCluster"}

    @defer.inlineCallbacks
    def test_always_failing_message_is_dead_lettered_within_a_second(self):
        yield defer.ensureDeferred(self._always_failing())

    async def _always_failing(self) -> None:
        producer = Producer("P_dead", config=self.config())
        await producer.start()
        sent = await producer.send(Message("T_dead", b"never ok", tags="TagA", keys="K_dead"))
        await producer.shutdown()
        deliveries: list[tuple[float, object]] = []

        def fail(msgs, ctx):
            deliveries.extend((time.time(), m) for m in msgs)
            return ConsumeStatus.RECONSUME_LATER

        consumer = PushConsumer("C_dead", config=self.config(), listener=fail, consume_from=CONSUME_FROM_FIRST_OFFSET,
                                max_reconsume_times=1)
        consumer.subscribe("T_dead", "*")
        await consumer.start()
        store = self.cluster.broker.ctx.store
        try:
            await wait_until(lambda: store.get_max_offset_in_queue("%DLQ%C_dead", 0) == 1, timeout=30)
        finally:
            await consumer.shutdown()
        self.assertEqual([m.reconsume_times for _, m in deliveries], [0, 1])
        dead = decode_record(store.get_message("%DLQ%C_dead", 0, 0, 1).messages[0])
        last_failed_at = deliveries[-1][0]
        self.assertLess(dead.store_timestamp / 1000 - last_failed_at, 1.0)
        self.assertEqual(dead.reconsume_times, 2)
        # the redelivered copy: what Java's send-back and schedule store (DELAY and the real place stay)
        pulled = deliveries[-1][1].properties
        redelivered = {k: v for k, v in pulled.items() if k not in ("MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME")}  # client-side
        self.assertEqual(redelivered["RETRY_TOPIC"], "T_dead")
        self.assertEqual(redelivered["ORIGIN_MESSAGE_ID"], sent.offset_msg_id)
        self.assertEqual((redelivered["WAIT"], redelivered["DELAY"]), ("false", "3"))
        self.assertEqual((redelivered["REAL_TOPIC"], redelivered["REAL_QID"]), ("%RETRY%C_dead", str(deliveries[-1][1].queue_id)))
        self.assertEqual((redelivered["TAGS"], redelivered["KEYS"], redelivered["CLUSTER"]), ("TagA", "K_dead", "DefaultCluster"))
        self.assertEqual(redelivered["UNIQ_KEY"], sent.msg_id)
        # the dead letter: the same keys, DELAY=0 (so no second trip through the schedule topic)
        self.assertEqual(parse_properties(dead.properties), dict(redelivered, DELAY="0"))

        # and anyone may consume the DLQ: its route has a readable queue, a pull consumer reads the dead letter
        reader = PullConsumer("C_dead_reader", config=self.config())
        await reader.start()
        try:
            (mq,) = await reader.fetch_queues("%DLQ%C_dead")
            result = await reader.pull(mq, 0)
        finally:
            await reader.shutdown()
        self.assertEqual(result.status, PullStatus.FOUND)
        self.assertEqual([m.body for m in result.messages], [b"never ok"])
