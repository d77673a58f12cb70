"""Issue 8 on a real broker: SQL92 subscriptions, and transactions end to end (commit, rollback, check-back)."""

from __future__ import annotations

import time

import orjson
from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.client.consumer import PullConsumer
from rmqtx.client.errors import MQBrokerError, MQClientError
from rmqtx.client.message import Message, PullStatus
from rmqtx.client.producer import Producer
from rmqtx.remoting import Dispatcher, RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from tests.broker.inprocess import InProcessCluster
from tests.broker.wire import decode_records, props_of, send
from tests.client.support import ClusterTestCase, wait_until

MESSAGES = [
    ("m1", "A", {"a": "3", "region": "eu"}),
    ("m2", "B", {"a": "4", "region": "us"}),
    ("m3", "C", {"a": "5", "region": "eu"}),
    ("m4", "A", {"a": "6", "region": "eu"}),
    ("m5", "B", {"region": "eu"}),
    ("m6", "A", {"a": "2"}),
]


class Sql92Test(ClusterTestCase):
    broker_conf = {"enablePropertyFilter": "true"}

    async def _select(self, expression: str) -> list[str]:
        reader = PullConsumer("C_sql", config=self.config())
        await reader.start()
        try:
            bodies: list[str] = []
            for mq in await reader.fetch_queues("T_sql"):
                result = await reader.pull(mq, 0, expression=expression, expression_type="SQL92")
                if result.status is PullStatus.FOUND:
                    bodies += [m.body.decode() for m in result.messages]
            return sorted(bodies)
        finally:
            await reader.shutdown()

    async def _scenario(self) -> None:
        producer = Producer("P_sql", config=self.config())
        await producer.start()
        for body, tag, props in MESSAGES:
            await producer.send(Message("T_sql", body, tags=tag, properties=props))
        await producer.shutdown()
        self.assertEqual(await self._select("a BETWEEN 3 AND 5"), ["m1", "m2", "m3"])
        self.assertEqual(await self._select("TAGS IN ('A','B') AND region = 'eu'"), ["m1", "m4", "m5"])
        self.assertEqual(await self._select("a > 0"), ["m1", "m2", "m3", "m4", "m6"])  # m5 has no a: false
        self.assertEqual(await self._select("NOT (a > 4)"), ["m1", "m2", "m6"])
        self.assertEqual(await self._select("a IS NULL"), ["m5"])
        with self.assertRaises((MQBrokerError, MQClientError)) as caught:
            await self._select("a BETWEEN 3")
        self.assertEqual(caught.exception.code, ResponseCode.SUBSCRIPTION_PARSE_FAILED)

    def test_sql92_selects_exactly_the_matching_messages(self):
        return defer.ensureDeferred(self._scenario())


class Sql92RefusedTest(ClusterTestCase):
    async def _scenario(self) -> None:
        body = orjson.dumps({"clientId": "c", "group": "G", "subscriptionData": {"topic": "T", "subString": "a > 1", "expressionType": "SQL92"}})
        client = RemotingClient()
        try:
            resp = await client.invoke(self.cluster.broker_addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body))
        finally:
            await client.close()
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertEqual(resp.remark, "The broker does not support consumer to filter message by SQL92")

    def test_sql92_refused_when_property_filter_off(self):
        return defer.ensureDeferred(self._scenario())


class TransactionWireTest(unittest.TestCase):
    """END_TRANSACTION and CHECK_TRANSACTION_STATE as a Java producer exchanges them."""

    timeout = 60

    def setUp(self):
        self.checks: list[RemotingCommand] = []
        self.answer_checks = True
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)
        self.client = RemotingClient(dispatcher=dispatcher)
        self.cluster = InProcessCluster(transactionCheckInterval="200", transactionTimeOut="300", transactionCheckMax="3")
        self.cluster.start()
        self.addr = self.cluster.broker_addr

    async def _down(self):
        await self.client.close()
        await self.cluster.stop()

    def tearDown(self):
        return defer.ensureDeferred(self._down())

    def _on_check(self, request: RemotingCommand, conn) -> None:
        self.checks.append(request)
        if self.answer_checks:
            header = CheckTransactionStateRequestHeader.from_command(request)
            end = EndTransactionRequestHeader("P_tx", header.tranStateTableOffset, header.commitLogOffset, 8, True, header.msgId, header.transactionId)
            conn.invoke_oneway(end.apply_to(RemotingCommand(RequestCode.END_TRANSACTION)))

    async def _heartbeat(self) -> None:
        body = orjson.dumps({"clientID": "127.0.0.1@tx", "consumerDataSet": [], "producerDataSet": [{"groupName": "P_tx"}]})
        resp = await self.client.invoke(self.addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
        self.assertEqual(resp.code, ResponseCode.SUCCESS)

    async def _half(self, body: bytes, uniq: str) -> RemotingCommand:
        resp = await send(self.client, self.addr, "T_tx", body, TRAN_MSG="true", PGROUP="P_tx", UNIQ_KEY=uniq, TAGS="TagTx")
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        return resp

    async def _end(self, half: RemotingCommand, state: int) -> None:
        from rmqtx.store.record import decode_offset_msg_id

        offset = decode_offset_msg_id(half.ext_fields["msgId"])[2]
        header = EndTransactionRequestHeader("P_tx", int(half.ext_fields["queueOffset"]), offset, state, False, "x")
        await self.client.invoke_oneway(self.addr, header.apply_to(RemotingCommand(RequestCode.END_TRANSACTION)))

    def _ops(self) -> list:
        store = self.cluster.broker.ctx.store
        return decode_records(b"".join(store.get_message("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 0, 32).messages))

    async def _barrier(self) -> None:
        """A send answered on the same connection: the requests before it were handled, their puts done."""
        resp = await send(self.client, self.addr, "T_barrier", b"barrier")
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)

    async def _check_pass_asks_nothing(self) -> None:
        """Once every half is older than the timeout, run a check pass now; a check it sent would arrive
        before the answer to the barrier that follows on the same connection."""
        ctx = self.cluster.broker.ctx
        newest = ctx.store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0) - 1
        stored = ctx.store.get_message_store_timestamp("RMQ_SYS_TRANS_HALF_TOPIC", 0, newest)
        await wait_until(lambda: time.time() * 1000 - stored > ctx.config.transactionTimeOut, timeout=10)
        before = len(self.checks)
        ctx.transactions.check()
        await self._barrier()
        self.assertEqual(len(self.checks), before)

    def _visible(self) -> list:
        store = self.cluster.broker.ctx.store
        return decode_records(b"".join(store.get_message("T_tx", 0, 0, 32).messages))

    async def _commit_rollback(self) -> None:
        await self._heartbeat()
        commit = await self._half(b"commit", "U1")
        rollback = await self._half(b"rollback", "U2")
        self.assertEqual(self._visible(), [])  # halves are invisible
        await self._end(commit, 8)
        await self._end(rollback, 12)
        await self._end(commit, 8)  # duplicate
        await self._end(rollback, 8)  # late, contradicting
        await wait_until(lambda: len(self._ops()) == 2 and len(self._visible()) == 1, timeout=10)
        await self._barrier()  # the duplicate and the late end are handled too
        visible = self._visible()
        self.assertEqual([r.body for r in visible], [b"commit"])
        self.assertEqual(visible[0].sys_flag & 0xC, 0x8)
        self.assertEqual(props_of(visible[0])["REAL_TOPIC"], "T_tx")
        self.assertEqual(sorted(r.body for r in self._ops()), [b"0", b"1"])
        self.assertEqual(self.checks, [])  # both were resolved before the timeout

    def test_commit_once_rollback_never(self):
        return defer.ensureDeferred(self._commit_rollback())

    async def _commit_delayed(self) -> None:
        """As in Java, a committed copy that still carries a delay level waits in the schedule topic first."""
        half = await send(self.client, self.addr, "T_tx", b"later", TRAN_MSG="true", PGROUP="P_tx", UNIQ_KEY="U9",
                          TAGS="TagTx", DELAY="1")
        await self._end(half, 8)
        store = self.cluster.broker.ctx.store
        await wait_until(lambda: store.get_message("SCHEDULE_TOPIC_XXXX", 0, 0, 1).messages, timeout=5)
        (copy,) = decode_records(store.get_message("SCHEDULE_TOPIC_XXXX", 0, 0, 1).messages[0])
        props = props_of(copy)
        self.assertNotIn("TRAN_MSG", props)  # Java re-writes the string from the map it cleared
        self.assertEqual((props["REAL_TOPIC"], props["REAL_QID"], props["PGROUP"], props["DELAY"]), ("T_tx", "0", "P_tx", "1"))
        self.assertEqual(copy.sys_flag & 0xC, 0x8)
        await wait_until(lambda: len(self._visible()) == 1, timeout=10)
        (due,) = self._visible()
        self.assertEqual((due.body, due.properties, due.sys_flag & 0xC), (b"later", copy.properties, 0x8))

    def test_committed_copy_with_delay_level_is_scheduled(self):
        return defer.ensureDeferred(self._commit_delayed())

    async def _commit_past_the_timers_max(self) -> None:
        """A half is not checked against the timer; its commit is, as Java's store hook checks the copy."""
        self.answer_checks = False
        half = await send(self.client, self.addr, "T_tx", b"too far", TRAN_MSG="true", PGROUP="P_tx", UNIQ_KEY="U8",
                          TAGS="TagTx", TIMER_DELAY_SEC=str(4 * 24 * 3600))
        self.assertEqual(half.code, ResponseCode.SUCCESS, half.remark)
        from rmqtx.store.record import decode_offset_msg_id

        offset = decode_offset_msg_id(half.ext_fields["msgId"])[2]
        header = EndTransactionRequestHeader("P_tx", int(half.ext_fields["queueOffset"]), offset, 8, False, "x")
        resp = await self.client.invoke(self.addr, header.apply_to(RemotingCommand(RequestCode.END_TRANSACTION)))
        self.assertEqual((resp.code, resp.remark), (ResponseCode.MESSAGE_ILLEGAL, (
            "timer message illegal, the delay time should not be bigger than the max delay 259200000ms; "
            "or if set del msg, the delay time should be bigger than the current time")))
        await self._barrier()
        self.assertEqual((self._visible(), self._ops()), ([], []))  # nothing delivered; the half is still open
        self.assertEqual(self.cluster.broker.ctx.store.get_max_offset_in_queue("rmq_sys_wheel_timer", 0), 0)

    def test_commit_refused_by_the_timer_leaves_the_half_open(self):
        return defer.ensureDeferred(self._commit_past_the_timers_max())

    async def _check_back(self) -> None:
        await self._heartbeat()
        await self._half(b"unknown", "U3")
        await wait_until(lambda: len(self._visible()) == 1, timeout=10)
        self.assertEqual(len(self.checks), 1)
        check = self.checks[0]
        self.assertTrue(check.is_oneway)
        self.assertEqual(list(CheckTransactionStateRequestHeader.from_command(check).to_fields())[:2], ["tranStateTableOffset", "commitLogOffset"])
        shown = decode_records(check.body)[0]
        self.assertEqual((shown.topic, shown.body), ("T_tx", b"unknown"))
        self.assertEqual(props_of(shown)["TRANSACTION_CHECK_TIMES"], "1")
        await self._check_pass_asks_nothing()
        self.assertEqual(len(self._visible()), 1)
        self.assertEqual(len(self.checks), 1)

    def test_unknown_then_check_back_commit(self):
        return defer.ensureDeferred(self._check_back())

    async def _never_answers(self) -> None:
        self.answer_checks = False
        await self._heartbeat()
        await self._half(b"orphan", "U4")
        await wait_until(lambda: self.cluster.broker.ctx.topics.get("TRANS_CHECK_MAX_TIME_TOPIC") is not None, timeout=15)
        self.assertEqual(len(self.checks), 3)  # transactionCheckMax
        self.assertEqual(self._visible(), [])
        await self._check_pass_asks_nothing()
        self.assertEqual(len(self.checks), 3)

    def test_producer_that_never_answers_is_dropped_after_max_checks(self):
        return defer.ensureDeferred(self._never_answers())
