"""Producer sends of every kind, read back with the pull consumer (real broker, real TCP)."""

from __future__ import annotations

from twisted.internet import defer

from rmqtx.client.consumer import PullConsumer
from rmqtx.client.errors import MQBrokerError, MQClientError
from rmqtx.client.message import Message, MessageExt, MessageQueue, PullStatus, SendStatus
from rmqtx.client.producer import Producer
from tests.client.support import ClusterTestCase


class ProducerTest(ClusterTestCase):
    async def read_all(self, topic: str, expression: str = "*") -> list[MessageExt]:
        consumer = PullConsumer("C_read", config=self.config())
        await consumer.start()
        try:
            out = []
            for mq in await consumer.fetch_queues(topic):
                offset = 0
                while True:
                    result = await consumer.pull(mq, offset, 32, expression)
                    if result.status is not PullStatus.FOUND:
                        self.assertIn(result.status, (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG))
                        break
                    out += result.messages
                    offset = result.next_begin_offset
            return out
        finally:
            await consumer.shutdown()

    @defer.inlineCallbacks
    def test_every_kind_of_send_read_back(self):
        yield defer.ensureDeferred(self._every_kind())

    async def _every_kind(self) -> None:
        producer = Producer("P_all", config=self.config())
        await producer.start()
        try:
            sync = await producer.send(Message("T_all", b"sync body", tags="TagA", keys=["k1", "k2"], properties={"color": "red"}))
            self.assertIs(sync.send_status, SendStatus.SEND_OK)
            self.assertEqual(len(sync.msg_id), 32)
            self.assertEqual(len(sync.offset_msg_id), 32)
            asyncs = await defer.gatherResults(
                [producer.send(Message("T_all", f"async {i}", tags="TagB", keys=f"ka{i}")) for i in range(5)]
            )
            await producer.send_oneway(Message("T_all", b"oneway body", tags="TagC"))
            batch = await producer.send_batch([Message("T_all", f"batch {i}", tags="TagA", properties={"idx": str(i)}) for i in range(3)])
            self.assertEqual(len(batch.msg_id.split(",")), 3)
            self.assertEqual(len(batch.offset_msg_id.split(",")), 3)

            def by_key(queues, msg, arg):
                return queues[arg % len(queues)]

            ordered = [await producer.send(Message("T_all", f"order {i}", tags="TagO"), selector=by_key, arg=7) for i in range(4)]
            self.assertEqual(len({r.message_queue for r in ordered}), 1)
            self.assertEqual([r.queue_offset for r in ordered], sorted(r.queue_offset for r in ordered))
            big = "x" * 10000
            compressed = await producer.send(Message("T_all", big, tags="TagBig"))
        finally:
            await producer.shutdown()

        msgs = await self.read_all("T_all")
        self.assertEqual(len(msgs), 1 + 5 + 1 + 3 + 4 + 1)
        by_id = {m.msg_id: m for m in msgs}
        first = by_id[sync.msg_id]
        self.assertEqual(first.body, b"sync body")
        self.assertEqual(first.tags, "TagA")
        self.assertEqual(first.keys, ["k1", "k2"])
        self.assertEqual(first.properties["color"], "red")
        self.assertEqual(first.offset_msg_id, sync.offset_msg_id)
        self.assertEqual((first.queue_id, first.queue_offset), (sync.message_queue.queue_id, sync.queue_offset))
        self.assertEqual({by_id[r.msg_id].body for r in asyncs}, {f"async {i}".encode() for i in range(5)})
        self.assertIn(b"oneway body", {m.body for m in msgs})
        for i, uniq in enumerate(batch.msg_id.split(",")):
            self.assertEqual(by_id[uniq].body, f"batch {i}".encode())
            self.assertEqual(by_id[uniq].properties["idx"], str(i))
            self.assertEqual(by_id[uniq].queue_id, batch.message_queue.queue_id)
        self.assertEqual([by_id[r.msg_id].body for r in ordered], [f"order {i}".encode() for i in range(4)])
        big_msg = by_id[compressed.msg_id]
        self.assertEqual(big_msg.body, big.encode())
        self.assertEqual(big_msg.sys_flag & 0x1, 0x1)

        tagged = await self.read_all("T_all", "TagA || TagC")
        self.assertEqual(sorted(m.tags for m in tagged), ["TagA"] * 4 + ["TagC"])

    @defer.inlineCallbacks
    def test_explicit_queue_and_queue_positions(self):
        yield defer.ensureDeferred(self._explicit_queue())

    async def _explicit_queue(self) -> None:
        producer = Producer("P_q", config=self.config())
        await producer.start()
        consumer = PullConsumer("C_q", config=self.config())
        await consumer.start()
        try:
            queues = await producer.publish_queues("T_q")
            target = queues[-1]
            for i in range(3):
                result = await producer.send(Message("T_q", f"m{i}"), queue=target)
                self.assertEqual(result.message_queue, target)
            self.assertEqual(await consumer.max_offset(target), 3)
            self.assertEqual(await consumer.min_offset(target), 0)
            self.assertEqual(await consumer.fetch_offset(target), 0)
            self.assertGreater(await consumer.earliest_msg_store_time(target), 0)
            self.assertEqual(await consumer.search_offset(target, 0), 0)
            await consumer.update_offset(target, 2)
        finally:
            await consumer.shutdown()
            await producer.shutdown()
        again = PullConsumer("C_q", config=self.config())
        await again.start()
        try:
            self.assertEqual(await again.fetch_offset(target), 2)
        finally:
            await again.shutdown()

    @defer.inlineCallbacks
    def test_errors_carry_codes(self):
        yield defer.ensureDeferred(self._errors())

    async def _errors(self) -> None:
        producer = Producer("P_err", config=self.config())
        await producer.start()
        try:
            with self.assertRaises(MQClientError):
                await producer.send(Message("T_err", b""))
            await producer.send(Message("T_err", b"creates the topic"))
            with self.assertRaises(MQBrokerError) as caught:
                await producer.send(Message("T_err", b"x"), queue=MessageQueue("T_err", "broker-a", 99))
            self.assertEqual(caught.exception.code, 1)
        finally:
            await producer.shutdown()
