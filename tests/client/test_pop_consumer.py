"""rmqtx's PopConsumer against an in-process broker: receive, ack, change the invisible time, orderly."""

from __future__ import annotations

from twisted.internet import defer

from rmqtx.client.message import Message, MessageQueue
from rmqtx.client.pop import PopConsumer
from rmqtx.client.producer import Producer
from tests.client.support import ClusterTestCase


class PopConsumerTest(ClusterTestCase):
    broker_conf = {"reviveInterval": "100"}

    @defer.inlineCallbacks
    def test_receive_ack_and_change_invisible_time(self):
        yield defer.ensureDeferred(self._receive_ack_change())

    async def _receive_ack_change(self) -> None:
        producer = Producer("P_pop", config=self.config())
        await producer.start()
        for i in range(4):
            await producer.send(Message("T_pop", f"b{i}".encode(), tags="TagA"))
        await producer.shutdown()
        consumer = PopConsumer("C_pop", config=self.config())
        await consumer.start()
        try:
            got = []
            while len(got) < 4:
                batch = await consumer.receive("T_pop", invisible_time=60, poll_time=5, from_first=True)
                self.assertTrue(batch, f"only {got} popped")
                got.extend(batch)
            self.assertEqual(sorted(m.body for m in got), [b"b0", b"b1", b"b2", b"b3"])
            late = next(m for m in got if m.body == b"b3")
            for m in got:
                if m is not late:
                    await consumer.ack(m)
            await consumer.change_invisible_time(late, 0.5)
            again = await consumer.receive("T_pop", invisible_time=60, poll_time=10)
            self.assertEqual([(m.body, m.reconsume_times, m.topic) for m in again], [(b"b3", 1, "T_pop")])
            await consumer.ack(again[0])
            self.assertEqual(await consumer.receive("T_pop", poll_time=1), [])
        finally:
            await consumer.shutdown()

    @defer.inlineCallbacks
    def test_orderly_receive_counts_consumptions(self):
        yield defer.ensureDeferred(self._orderly())

    async def _orderly(self) -> None:
        producer = Producer("P_popo", config=self.config())
        await producer.start()
        first = await producer.send(Message("T_popo", b"o0", tags="TagA"))
        queue = MessageQueue("T_popo", first.message_queue.broker_name, first.message_queue.queue_id)
        for i in (1, 2):
            await producer.send(Message("T_popo", f"o{i}".encode(), tags="TagA"), queue=queue)
        await producer.shutdown()
        consumer = PopConsumer("C_popo", config=self.config())
        await consumer.start()
        try:
            kw = dict(order=True, queue_id=queue.queue_id, from_first=True, max_nums=2)
            batch = await consumer.receive("T_popo", invisible_time=0.5, poll_time=0, **kw)
            self.assertEqual([(m.body, m.reconsume_times) for m in batch], [(b"o0", 0), (b"o1", 0)])
            again: list = []
            for _ in range(15):  # locked until the half second is over, then the same two, counted once more
                again = await consumer.receive("T_popo", invisible_time=60, poll_time=1, **kw)
                if again:
                    break
            self.assertEqual([(m.body, m.reconsume_times) for m in again], [(b"o0", 1), (b"o1", 1)])
            for m in again:
                await consumer.ack(m)
            last = await consumer.receive("T_popo", invisible_time=60, poll_time=3, **kw)
            self.assertEqual([m.body for m in last], [b"o2"])
        finally:
            await consumer.shutdown()
