"""Client sides of retry, orderly locks, transactions and message queries.

The broker has every one of these features: any error answer, REQUEST_CODE_NOT_SUPPORTED included,
fails the test.
"""

from __future__ import annotations

from twisted.internet import defer

from rmqtx.client.admin import MQAdmin
from rmqtx.client.consumer import CONSUME_FROM_FIRST_OFFSET, ConsumeStatus, OrderlyStatus, PullConsumer, PushConsumer
from rmqtx.client.errors import MQBrokerError, MQClientError
from rmqtx.client.message import Message, MessageQueue, PullStatus, TransactionState
from rmqtx.client.producer import Producer, TransactionProducer
from rmqtx.remoting.codes import RequestCode
from tests.client.support import ClusterTestCase, wait_until

FAST_DELAYS = " ".join(["1s"] * 18)


class RecordingPushConsumer(PushConsumer):
    """Keeps what CONSUMER_SEND_MSG_BACK answered, so the test can tell 'unsupported' from 'slow'."""

    send_back_errors: list[Exception]

    async def send_back(self, msg, delay_level=0):
        try:
            await super().send_back(msg, delay_level)
        except (MQClientError, MQBrokerError) as exc:
            self.send_back_errors.append(exc)
            raise


class BrokerFeatureTest(ClusterTestCase):
    broker_conf = {"messageDelayLevel": FAST_DELAYS, "transactionCheckInterval": "1000", "transactionTimeOut": "1000"}

    async def send(self, topic: str, bodies: list[str], **kwargs) -> list:
        producer = Producer(f"P_{topic}", config=self.config())
        await producer.start()
        try:
            return [await producer.send(Message(topic, body, tags="TagA", keys=f"key-{body.replace(' ', '-')}"), **kwargs) for body in bodies]
        finally:
            await producer.shutdown()

    @defer.inlineCallbacks
    def test_retry_after_reconsume_later(self):
        yield defer.ensureDeferred(self._retry())

    async def _retry(self) -> None:
        await self.send("T_retry", ["consume me twice"])
        seen: list[tuple[str, int, bytes]] = []

        def listener(msgs, ctx):
            for m in msgs:
                seen.append((m.topic, m.reconsume_times, m.body))
            return ConsumeStatus.RECONSUME_LATER if len(seen) == 1 else ConsumeStatus.CONSUME_SUCCESS

        consumer = RecordingPushConsumer("C_retry", config=self.config(), listener=listener, consume_from=CONSUME_FROM_FIRST_OFFSET)
        consumer.send_back_errors = []
        consumer.subscribe("T_retry", "*")
        await consumer.start()
        try:
            await wait_until(lambda: consumer.send_back_errors or len(seen) >= 2, timeout=30)
            self.assertEqual(consumer.send_back_errors, [], "CONSUMER_SEND_MSG_BACK failed")
            self.assertEqual(seen[0], ("T_retry", 0, b"consume me twice"))
            self.assertEqual(seen[1], ("T_retry", 1, b"consume me twice"))
        finally:
            await consumer.shutdown()

    @defer.inlineCallbacks
    def test_orderly_consumer_locks_and_keeps_order(self):
        yield defer.ensureDeferred(self._orderly())

    async def _orderly(self) -> None:
        results = await self.send("T_order", ["warm-up"])
        target = results[0].message_queue
        got: list[bytes] = []

        def listener(msgs, ctx):
            got.extend(m.body for m in msgs)
            return OrderlyStatus.SUCCESS

        consumer = PushConsumer("C_order", config=self.config(), listener=listener, orderly=True, consume_from=CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("T_order", "*")
        await consumer.start()
        try:
            locked = await consumer._lock_request(target.broker_name, [target], RequestCode.LOCK_BATCH_MQ)
            self.assertIn(target, locked)
            await wait_until(lambda: target in consumer.pqs)
            bodies = [f"step {i}" for i in range(10)]
            await self.send("T_order", bodies, queue=target)
            await wait_until(lambda: len(got) == 11)
            self.assertEqual(got, [b"warm-up"] + [b.encode() for b in bodies])
        finally:
            await consumer.shutdown()

    @defer.inlineCallbacks
    def test_transactions_commit_rollback_and_check(self):
        yield defer.ensureDeferred(self._transactions())

    async def _transactions(self) -> None:
        await self.send("T_tx", ["creates the topic"])
        states = {"commit": TransactionState.COMMIT_MESSAGE, "rollback": TransactionState.ROLLBACK_MESSAGE, "unknown": TransactionState.UNKNOW}
        checked: list[str] = []

        def check(msg):
            checked.append(msg.body.decode())
            return TransactionState.COMMIT_MESSAGE

        producer = TransactionProducer("P_tx", config=self.config(), execute=lambda msg, arg: states[arg], check=check)
        await producer.start()
        try:
            for name in states:
                result = await producer.send_in_transaction(Message("T_tx", name, tags="TagTx"), name)
                self.assertEqual(result.local_state, states[name])
            await wait_until(lambda: "unknown" in checked, timeout=30)
        finally:
            await producer.shutdown()
        reader = PullConsumer("C_tx_reader", config=self.config())
        await reader.start()
        try:
            expected = ["commit", "creates the topic", "unknown"]

            async def visible() -> list[str]:
                bodies = []
                for mq in await reader.fetch_queues("T_tx"):
                    result = await reader.pull(mq, 0, 32)
                    if result.status is PullStatus.FOUND:
                        bodies += [m.body.decode() for m in result.messages]
                return sorted(bodies)

            # the check's END_TRANSACTION is oneway: wait for the commit it makes
            ctx = self.cluster.broker.ctx
            queues = range(ctx.topics.get("T_tx").readQueueNums)
            await wait_until(lambda: sum(ctx.store.get_max_offset_in_queue("T_tx", q) for q in queues) >= 3, timeout=20)
            self.assertEqual(await visible(), expected)
        finally:
            await reader.shutdown()

    @defer.inlineCallbacks
    def test_query_by_offset_id_key_and_uniq_key(self):
        yield defer.ensureDeferred(self._query())

    async def _query(self) -> None:
        [sent] = await self.send("T_query", ["hello query"])
        admin = MQAdmin(config=self.config())
        try:
            viewed = await admin.view_message(sent.offset_msg_id)
            self.assertEqual((viewed.msg_id, viewed.body), (sent.msg_id, b"hello query"))
            by_key = await admin.query_message("T_query", "key-hello-query")
            self.assertEqual([m.msg_id for m in by_key], [sent.msg_id])
            by_uniq = await admin.query_by_uniq_key("T_query", sent.msg_id)
            self.assertIsNotNone(by_uniq)
            self.assertEqual(by_uniq.body, b"hello query")
            route = await admin.route("T_query")
            self.assertIn(MessageQueue("T_query", "broker-a", 0), route.subscribe_queues("T_query"))
        finally:
            await admin.close()
