"""Where a consumer starts: QUERY_CONSUMER_OFFSET for new and known groups, commits by
UPDATE_CONSUMER_OFFSET and by the pull's commit flag, and the offset a pull past the end is moved to.

A queue handed from one group member to another is only as safe as these answers: the new owner
asks QUERY_CONSUMER_OFFSET and starts where it is told.
"""

from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.headers import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from tests.broker.inprocess import InProcessCluster
from tests.broker.wire import pull, send

NOT_FOUND_REMARK = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


class _OffsetCase(unittest.TestCase):
    timeout = 30
    broker_conf: dict[str, str] = {}

    def setUp(self) -> None:
        self.cluster = InProcessCluster(**self.broker_conf)
        self.cluster.start()
        self.client = RemotingClient()
        self.addr = self.cluster.broker_addr

    async def _down(self) -> None:
        await self.client.close()
        await self.cluster.stop()

    def tearDown(self) -> defer.Deferred:
        return defer.ensureDeferred(self._down())

    async def query(self, group: str, topic: str, queue_id: int) -> RemotingCommand:
        cmd = QueryConsumerOffsetRequestHeader(group, topic, queue_id).apply_to(RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET))
        return await self.client.invoke(self.addr, cmd)

    async def update(self, group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
        return await self.client.invoke(self.addr, header.apply_to(RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET)))

    async def fill(self, topic: str, count: int, queue_id: int = 0) -> None:
        for i in range(count):
            resp = await send(self.client, self.addr, topic, b"m%d" % i, queue_id, TAGS="T")
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)

    def assert_offset(self, resp: RemotingCommand, offset: int) -> None:
        self.assertEqual((resp.code, resp.field("offset")), (ResponseCode.SUCCESS, str(offset)), resp.remark)


class ConsumerOffsetTest(_OffsetCase):
    @defer.inlineCallbacks
    def test_new_group_starts_at_zero(self):
        yield defer.ensureDeferred(self._new_group())

    async def _new_group(self) -> None:
        await self.fill("T_new", 3)
        # the first message is in memory: a group that never committed starts at 0, so a consumer
        # taking the queue over sees what was sent before it joined, whatever its consumeFromWhere
        self.assert_offset(await self.query("G_new", "T_new", 0), 0)
        self.assert_offset(await self.query("G_new", "T_new", 1), 0)  # a queue with nothing in it yet
        self.assert_offset(await self.query("G_new", "T_unknown", 0), 0)  # a topic the store never saw

    @defer.inlineCallbacks
    def test_set_zero_if_not_found_false(self):
        yield defer.ensureDeferred(self._no_zero())

    async def _no_zero(self) -> None:
        """A 5.x client's setZeroIfNotFound=false: QUERY_NOT_FOUND instead of 0 for a group without an offset
        (Apache 5.x); a committed offset is answered all the same."""
        await self.fill("T_nozero", 2)
        cmd = QueryConsumerOffsetRequestHeader("G_nozero", "T_nozero", 0, setZeroIfNotFound=False).apply_to(
            RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET))
        self.assertEqual(cmd.ext_fields["setZeroIfNotFound"], "false")
        resp = await self.client.invoke(self.addr, cmd)
        self.assertEqual((resp.code, resp.remark), (ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first"))
        await self.update("G_nozero", "T_nozero", 0, 1)
        self.assert_offset(await self.client.invoke(self.addr, cmd), 1)

    @defer.inlineCallbacks
    def test_committed_offset_is_answered_last_write_wins(self):
        yield defer.ensureDeferred(self._committed())

    async def _committed(self) -> None:
        await self.fill("T_commit", 5)
        resp = await self.update("G_commit", "T_commit", 0, 4)
        self.assertEqual(resp.code, ResponseCode.SUCCESS)
        self.assert_offset(await self.query("G_commit", "T_commit", 0), 4)
        # a member that lost the queue may still send its older offset: Java stores it as it comes
        await self.update("G_commit", "T_commit", 0, 2)
        self.assert_offset(await self.query("G_commit", "T_commit", 0), 2)
        self.assert_offset(await self.query("G_other", "T_commit", 0), 0)  # groups are apart

    @defer.inlineCallbacks
    def test_pull_commit_flag(self):
        yield defer.ensureDeferred(self._pull_commit())

    async def _pull_commit(self) -> None:
        await self.fill("T_pc", 6)

        async def pull_with(sys_flag: int, commit: int, offset: int) -> RemotingCommand:
            header = PullMessageRequestHeader(
                consumerGroup="G_pc", topic="T_pc", queueId=0, queueOffset=offset, maxMsgNums=32, sysFlag=sys_flag,
                commitOffset=commit, suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG",
            )
            return await self.client.invoke(self.addr, header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE)))

        resp = await pull_with(0x4, 3, 3)  # no commit flag: the offset is not stored
        self.assertEqual(resp.code, ResponseCode.SUCCESS)
        self.assert_offset(await self.query("G_pc", "T_pc", 0), 0)
        await pull_with(0x1 | 0x4, 3, 3)  # commit flag: the consumed offset travels with the pull
        self.assert_offset(await self.query("G_pc", "T_pc", 0), 3)
        resp = await pull_with(0x1 | 0x4, 6, 6)  # nothing new: still committed
        self.assertEqual(resp.code, ResponseCode.PULL_NOT_FOUND)
        self.assertEqual(PullMessageResponseHeader.from_command(resp).nextBeginOffset, 6)
        self.assert_offset(await self.query("G_pc", "T_pc", 0), 6)

    @defer.inlineCallbacks
    def test_pull_past_the_end_moves_to_the_max_offset(self):
        yield defer.ensureDeferred(self._past_end())

    async def _past_end(self) -> None:
        await self.fill("T_end", 3)
        resp, records = await pull(self.client, self.addr, "T_end", 0, 10)
        answer = PullMessageResponseHeader.from_command(resp)
        self.assertEqual(resp.code, ResponseCode.PULL_OFFSET_MOVED)
        self.assertEqual(records, [])
        # Java 4.9.8 corrects an offset beyond the end to the max offset (not to 0, which would replay)
        self.assertEqual((answer.nextBeginOffset, answer.minOffset, answer.maxOffset), (3, 0, 3))
        resp, _ = await pull(self.client, self.addr, "T_end", 0, 3)  # exactly the end: nothing yet, not moved
        self.assertEqual((resp.code, PullMessageResponseHeader.from_command(resp).nextBeginOffset), (ResponseCode.PULL_NOT_FOUND, 3))


class SwappedOutOffsetTest(_OffsetCase):
    """accessMessageInMemoryMaxRatio=0: every stored message counts as swapped out of memory."""

    broker_conf = {"accessMessageInMemoryMaxRatio": "0"}

    @defer.inlineCallbacks
    def test_new_group_is_not_found_when_the_first_message_is_on_disk(self):
        yield defer.ensureDeferred(self._swapped())

    async def _swapped(self) -> None:
        await self.fill("T_disk", 2)
        resp = await self.query("G_disk", "T_disk", 0)
        self.assertEqual((resp.code, resp.remark), (ResponseCode.QUERY_NOT_FOUND, NOT_FOUND_REMARK))
        self.assertIsNone(resp.field("offset"))
        self.assert_offset(await self.query("G_disk", "T_disk", 1), 0)  # an empty queue still starts at 0
        await self.update("G_disk", "T_disk", 0, 1)
        self.assert_offset(await self.query("G_disk", "T_disk", 0), 1)  # a stored offset always wins
