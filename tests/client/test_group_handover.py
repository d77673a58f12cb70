"""Push consumers of one group started together, then sends: the queues are handed over between
members while they join, and no message may be lost on the way, nor given twice to one member."""

from __future__ import annotations

from collections import defaultdict

from twisted.internet import defer

from rmqtx.client.consumer import ConsumeStatus, PushConsumer
from rmqtx.client.message import Message, MessageQueue
from rmqtx.client.producer import Producer
from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.headers import QueryConsumerOffsetRequestHeader
from tests.client.support import ClusterTestCase, wait_until


class GroupHandoverTest(ClusterTestCase):
    async def committed(self, group: str, topic: str) -> int:
        """The sum of the offsets the broker holds for ``group`` on the topic's four queues."""
        client = RemotingClient()
        total = 0
        try:
            for q in range(4):
                cmd = QueryConsumerOffsetRequestHeader(group, topic, q).apply_to(RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET))
                resp = await client.invoke(self.cluster.broker_addr, cmd)
                self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
                total += int(resp.field("offset") or 0)
        finally:
            await client.close()
        return total

    def members(self, group: str, topic: str, seen: dict[str, list[int]], count: int) -> list[PushConsumer]:
        """``count`` members with the default consumeFromWhere (CONSUME_FROM_LAST_OFFSET), recording who got what."""
        out = []
        for i in range(count):
            def listener(msgs, ctx, member=i):
                for m in msgs:
                    if m.reconsume_times == 0:
                        seen[m.body.decode()].append(member)
                return ConsumeStatus.CONSUME_SUCCESS
            c = PushConsumer(group, config=self.config(f"{group}-{i}"), listener=listener)
            c.subscribe(topic, "*")
            out.append(c)
        return out

    async def produce(self, topic: str, bodies: list[str]) -> None:
        producer = Producer(f"P_{topic}", config=self.config())
        await producer.start()
        try:
            for body in bodies:
                await producer.send(Message(topic, body.encode()))
        finally:
            await producer.shutdown()

    @defer.inlineCallbacks
    def test_three_members_started_together_lose_nothing(self):
        yield defer.ensureDeferred(self._three())

    async def _three(self) -> None:
        topic, group = "T_three", "C_three"
        await self.produce(topic, ["warm-up"])  # creates the topic (4 queues)
        seen: dict[str, list[int]] = defaultdict(list)
        members = self.members(group, topic, seen, 3)
        await defer.gatherResults([defer.ensureDeferred(c.start()) for c in members])  # started together
        try:
            bodies = [f"three-{i}" for i in range(100)]
            await self.produce(topic, bodies)  # while the members are still sharing the queues out
            await wait_until(lambda: set(bodies) <= set(seen), 40)
            owners: dict[MessageQueue, int] = {}
            await wait_until(lambda: sum(len([mq for mq in c.pqs if mq.topic == topic]) for c in members) == 4, 20)
            for i, c in enumerate(members):
                for mq in c.pqs:
                    if mq.topic == topic:
                        self.assertNotIn(mq, owners, "two members hold one queue after the rebalance")
                        owners[mq] = i
        finally:
            for c in members:
                await c.shutdown()
        twice = {b: who for b, who in seen.items() if len(who) != len(set(who))}
        self.assertEqual(twice, {}, "a member got a message twice")
        self.assertTrue(set(bodies) <= set(seen))
        # every member committed at shutdown: the group's offsets cover all 101 messages
        self.assertEqual(await self.committed(group, topic), 101)

    @defer.inlineCallbacks
    def test_members_joining_one_by_one_during_sends(self):
        yield defer.ensureDeferred(self._joining())

    async def _joining(self) -> None:
        topic, group = "T_join", "C_join"
        await self.produce(topic, ["warm-up"])
        seen: dict[str, list[int]] = defaultdict(list)
        members = self.members(group, topic, seen, 3)
        await members[0].start()
        bodies = [f"join-{i}" for i in range(60)]
        try:
            producer = Producer(f"P_{topic}", config=self.config())
            await producer.start()
            for i, body in enumerate(bodies):
                await producer.send(Message(topic, body.encode()))
                if i in (20, 40):  # queues move to the newcomer while messages keep coming
                    await members[i // 20].start()
            await producer.shutdown()
            await wait_until(lambda: set(bodies) <= set(seen), 40)
        finally:
            for c in members:
                await c.shutdown()
        twice = {b: who for b, who in seen.items() if len(who) != len(set(who))}
        self.assertEqual(twice, {}, "a member got a message twice")
        self.assertEqual(await self.committed(group, topic), 61)

    @defer.inlineCallbacks
    def test_offsets_of_queues_no_longer_held_are_not_committed(self):
        yield defer.ensureDeferred(self._not_held())

    async def _not_held(self) -> None:
        topic, group = "T_held", "C_held"
        await self.produce(topic, [f"held-{i}" for i in range(8)])
        seen: dict[str, list[int]] = defaultdict(list)
        (member,) = self.members(group, topic, seen, 1)
        await member.start()
        try:
            await wait_until(lambda: len(seen) == 8, 20)
            held = sorted(mq for mq in member.pqs if mq.topic == topic)
            gone = held[-1]
            await member.persist_offsets()
            before = await member.offsets.read_store(gone)  # answered after the commits just sent
            self.assertEqual(before, member.offsets.read_memory(gone))
            member.pqs.pop(gone).dropped = True  # as if a rebalance had moved it to another member
            member.offsets.update(gone, 1000)  # a late consume result for it must not reach the broker
            await member.persist_offsets()
            self.assertNotIn(gone, member.offsets.table)
            # a request answered on the same connection: the oneway commits before it were applied
            kept = await member.offsets.read_store(held[0])
            self.assertEqual(kept, member.offsets.read_memory(held[0]))
            self.assertEqual(await member.offsets.read_store(gone), before)
        finally:
            await member.shutdown()
