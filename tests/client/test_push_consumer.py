"""Push consumers against a real broker: clustering split, broadcasting, tag filter, offset resume."""

from __future__ import annotations

import tempfile

from twisted.internet import defer

from rmqtx.client.consumer import BROADCASTING, CONSUME_FROM_FIRST_OFFSET, ConsumeStatus, PushConsumer
from rmqtx.client.message import Message, MessageQueue
from rmqtx.client.producer import Producer
from tests.client.support import ClusterTestCase, wait_until


class Recorder:
    """A listener that remembers what it got and on which queue."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.queues: set[MessageQueue] = set()
        self.tags: list[str | None] = []

    def __call__(self, msgs, ctx):
        for m in msgs:
            self.bodies.append(m.body)
            self.tags.append(m.tags)
            self.queues.add(MessageQueue(m.topic, m.broker_name, m.queue_id))
        return ConsumeStatus.CONSUME_SUCCESS


class PushConsumerTest(ClusterTestCase):
    async def produce(self, topic: str, count: int, tags=lambda i: "TagA") -> list[bytes]:
        producer = Producer(f"P_{topic}", config=self.config())
        await producer.start()
        try:
            bodies = [f"{topic} #{i}".encode() for i in range(count)]
            for i, body in enumerate(bodies):
                await producer.send(Message(topic, body, tags=tags(i)))
            return bodies
        finally:
            await producer.shutdown()

    def committed(self, group: str, topic: str) -> int:
        """Messages of ``topic`` whose consumption ``group`` has committed to the broker."""
        return sum(self.cluster.broker.ctx.offsets.queues_of(group, topic).values())

    def stored(self, topic: str) -> int:
        store, tc = self.cluster.broker.ctx.store, self.cluster.broker.ctx.topics.get(topic)
        return sum(store.get_max_offset_in_queue(topic, q) for q in range(tc.readQueueNums)) if tc else 0

    async def until_caught_up(self, topic: str) -> None:
        """The broker holds a pull at the end of every queue of ``topic``: the consumer has fetched all it can.

        (With a tag filter the committed offset only passes filtered tail messages when such a long poll
        ends, as in Java, so committed offsets are no condition here.)
        """
        ctx = self.cluster.broker.ctx

        def caught_up() -> bool:
            queues = range(ctx.topics.get(topic).readQueueNums)
            return all(any(h.offset >= ctx.store.get_max_offset_in_queue(topic, q) for h in ctx.holds.held.get((topic, q), ()))
                       for q in queues)

        await wait_until(caught_up)

    async def until_all_committed(self, group: str, topic: str) -> None:
        """Every stored message consumed and acknowledged: nothing can be delivered again, barring a bug."""
        await wait_until(lambda: self.committed(group, topic) == self.stored(topic) > 0)

    def consumer(self, group: str, topic: str, listener, expression: str = "*", **kwargs) -> PushConsumer:
        c = PushConsumer(group, config=self.config(), listener=listener, consume_from=CONSUME_FROM_FIRST_OFFSET, **kwargs)
        c.subscribe(topic, expression)
        return c

    @defer.inlineCallbacks
    def test_clustering_members_split_the_queues(self):
        yield defer.ensureDeferred(self._clustering())

    async def _clustering(self) -> None:
        await self.produce("T_split", 1)  # creates the topic (4 queues)
        first, second = Recorder(), Recorder()
        c1 = self.consumer("C_split", "T_split", first)
        c2 = self.consumer("C_split", "T_split", second)
        await c1.start()
        try:
            # the broker makes %RETRY%C_split on c1's heartbeat; let that settle before c2 joins
            await wait_until(lambda: any(mq.topic == "%RETRY%C_split" for mq in c1.pqs))
            await c2.start()
            main = lambda c: {mq for mq in c.pqs if mq.topic == "T_split"}  # noqa: E731
            await wait_until(lambda: len(main(c1)) == len(main(c2)) == 2 and not (main(c1) & main(c2)))
            await self.until_all_committed("C_split", "T_split")  # the warm-up message cannot come again
            for r in (first, second):  # only what was sent after the split counts
                r.bodies.clear()
                r.queues.clear()
            bodies = await self.produce("T_split", 40)
            await wait_until(lambda: sorted(first.bodies + second.bodies) == sorted(bodies))
            await self.until_all_committed("C_split", "T_split")
            self.assertFalse(first.queues & second.queues, "a queue was consumed by both members")
            self.assertTrue(first.bodies and second.bodies, "one member got nothing")
            self.assertEqual(sorted(first.bodies + second.bodies), sorted(bodies))
            # the retry topic the broker made for the group is subscribed and shared too
            await wait_until(lambda: {mq.topic for mq in c1.pqs} | {mq.topic for mq in c2.pqs} == {"T_split", "%RETRY%C_split"})
        finally:
            await c1.shutdown()
            await c2.shutdown()

    @defer.inlineCallbacks
    def test_broadcasting_every_member_gets_everything(self):
        yield defer.ensureDeferred(self._broadcasting())

    async def _broadcasting(self) -> None:
        bodies = await self.produce("T_bc", 12)
        store = tempfile.mkdtemp(prefix="rmqtx-offsets-")
        first, second = Recorder(), Recorder()
        c1 = self.consumer("C_bc", "T_bc", first, message_model=BROADCASTING, offset_store_dir=store)
        c2 = self.consumer("C_bc", "T_bc", second, message_model=BROADCASTING, offset_store_dir=store)
        await c1.start()
        await c2.start()
        try:
            await wait_until(lambda: sorted(first.bodies) == sorted(bodies) and sorted(second.bodies) == sorted(bodies))
        finally:
            await c1.shutdown()
            await c2.shutdown()
        self.assertTrue(c1.offsets.path.exists())
        self.assertEqual(sum(c1.offsets.table.values()), 12)

    @defer.inlineCallbacks
    def test_tag_filter(self):
        yield defer.ensureDeferred(self._tag_filter())

    async def _tag_filter(self) -> None:
        tags = ["TagA", "TagB", "TagC"]
        await self.produce("T_tags", 12, tags=lambda i: tags[i % 3])
        got = Recorder()
        c = self.consumer("C_tags", "T_tags", got, "TagA || TagC")
        await c.start()
        try:
            await wait_until(lambda: len(got.bodies) == 8)
            await self.until_caught_up("T_tags")  # whatever the broker would still deliver has been fetched
            self.assertEqual(sorted(got.tags), ["TagA"] * 4 + ["TagC"] * 4)
            heartbeat_sub = c.consumer_data()["subscriptionDataSet"]
            t = next(s for s in heartbeat_sub if s["topic"] == "T_tags")
            self.assertEqual(sorted(t["tagsSet"]), ["TagA", "TagC"])
            self.assertEqual(len(t["codeSet"]), 2)
        finally:
            await c.shutdown()

    @defer.inlineCallbacks
    def test_offsets_committed_and_resumed(self):
        yield defer.ensureDeferred(self._resume())

    async def _resume(self) -> None:
        first_batch = await self.produce("T_resume", 10)
        got = Recorder()
        c = self.consumer("C_resume", "T_resume", got)
        await c.start()
        await wait_until(lambda: len(got.bodies) == 10)
        await c.shutdown()
        broker_offsets = self.cluster.broker
        self.assertIsNotNone(broker_offsets)
        producer = Producer("P_resume2", config=self.config())
        await producer.start()
        more = [f"late #{i}".encode() for i in range(5)]
        for body in more:
            await producer.send(Message("T_resume", body))
        await producer.shutdown()
        again = Recorder()
        c2 = self.consumer("C_resume", "T_resume", again)
        await c2.start()
        try:
            await wait_until(lambda: len(again.bodies) == 5)
            await self.until_all_committed("C_resume", "T_resume")
            self.assertEqual(sorted(again.bodies), sorted(more), "the restarted consumer re-read committed messages")
        finally:
            await c2.shutdown()
        self.assertEqual(sorted(got.bodies), sorted(first_batch))


class RunningInfoTest(ClusterTestCase):
    produce = PushConsumerTest.produce
    consumer = PushConsumerTest.consumer

    @defer.inlineCallbacks
    def test_running_info_has_what_mqadmin_consumer_status_reads(self):
        """mqadmin consumerStatus died parsing PROP_CONSUMER_START_TIMESTAMP ("null"); the queue table was empty."""
        yield defer.ensureDeferred(self._running_info())

    async def _running_info(self) -> None:
        from rmqtx.common import fastjson
        from rmqtx.remoting import RemotingClient, RemotingCommand
        from rmqtx.remoting.codes import RequestCode

        bodies = await self.produce("T_info", 6)
        got = Recorder()
        consumer = self.consumer("C_info", "T_info", got, "TagA")
        await consumer.start()
        try:
            await wait_until(lambda: len(got.bodies) == len(bodies))
            await wait_until(lambda: sum(max(consumer.offsets.read_memory(mq), 0) for mq in consumer.pqs) == len(bodies))
            client = RemotingClient()
            try:  # the way mqadmin asks: through the broker, which forwards to the client
                request = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                                  {"consumerGroup": "C_info", "clientId": consumer.client.client_id, "jstackEnable": False})
                response = await client.invoke(self.cluster.broker_addr, request, 10)
            finally:
                await client.close()
            self.assertEqual(response.code, 0, response.remark)
            info = fastjson.loads(response.body)
            props = info["properties"]
            started = int(props["PROP_CONSUMER_START_TIMESTAMP"])
            self.assertLess(abs(started - consumer.started_at), 1)
            self.assertEqual(props["PROP_CONSUME_TYPE"], "CONSUME_PASSIVELY")
            int(props["PROP_THREADPOOL_CORE_SIZE"])
            table = {(dict(k)["topic"], dict(k)["queueId"]): v for k, v in info["mqTable"].items()}
            self.assertEqual({q for t, q in table if t == "T_info"}, set(range(4)))
            self.assertEqual(sum(v["commitOffset"] for (t, _), v in table.items() if t == "T_info"), len(bodies))
            self.assertTrue(all(v["lastPullTimestamp"] >= started and not v["droped"] for v in table.values()))
            self.assertEqual(sorted(info["statusTable"]), ["%RETRY%C_info", "T_info"])
            self.assertEqual([s["topic"] for s in info["subscriptionSet"]].count("T_info"), 1)
        finally:
            await consumer.shutdown()
