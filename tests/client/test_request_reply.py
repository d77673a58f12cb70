"""Producer.request and create_reply_message end to end: requester, replying consumer, real broker."""

from __future__ import annotations

import time

from twisted.internet import defer

from rmqtx.client import ConsumeStatus, Message, MQClientError, Producer, PushConsumer, RequestTimeoutError, create_reply_message
from rmqtx.client.consumer import CONSUME_FROM_FIRST_OFFSET
from rmqtx.store.record import decode_record
from tests.client.support import ClusterTestCase, sleep, wait_until


class RequestReplyTest(ClusterTestCase):
    broker_conf = {"brokerClusterName": "DefaultCluster"}

    async def replier(self, topic: str, answer=lambda body: b"pong:" + body) -> tuple[PushConsumer, Producer, list]:
        """A consumer of ``topic`` that answers every request through its own producer."""
        producer = Producer("P_replier", config=self.config())
        await producer.start()
        requests: list = []
        failures: list = []  # replies the broker refused (the warm-up message is no request)

        def listener(msgs, ctx):
            for m in msgs:
                requests.append(m)
                defer.ensureDeferred(producer.send(create_reply_message(m, answer(m.body)))).addErrback(failures.append)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("C_replier", config=self.config(), listener=listener, consume_from=CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(topic, "*")
        await consumer.start()
        return consumer, producer, requests

    @defer.inlineCallbacks
    def test_request_gets_its_reply(self):
        yield defer.ensureDeferred(self._round_trip())

    async def _round_trip(self) -> None:
        requester = Producer("P_requester", config=self.config())
        await requester.start()
        await requester.send(Message("T_rr", b"warm-up"))  # creates the topic before the replier subscribes
        clients = self.cluster.broker.ctx.clients
        # the route is known now, so (as in Java) request() sends no heartbeat of its own: wait for the periodic one
        await wait_until(lambda: clients.producer_by_client_id(requester.client.client_id) is not None)
        consumer, producer, requests = await self.replier("T_rr")
        try:
            reply = await requester.request(Message("T_rr", b"ping", tags="Q"), 10.0)
            self.assertEqual(reply.body, b"pong:ping")
            self.assertEqual(reply.topic, "DefaultCluster_REPLY_TOPIC")
            asked = next(m for m in requests if m.body == b"ping")
            for name in ("CORRELATION_ID", "REPLY_TO_CLIENT", "TTL"):
                self.assertEqual(reply.properties[name], asked.properties[name], name)
            self.assertEqual(asked.properties["REPLY_TO_CLIENT"], requester.client.client_id)
            self.assertEqual(asked.properties["TTL"], "10000")
            self.assertEqual(reply.properties["MSG_TYPE"], "reply")
            self.assertIn("PUSH_REPLY_TIME", reply.properties)
            self.assertIn("ARRIVE_TIME", reply.properties)
            self.assertNotIn("WAIT", reply.properties)
            # the broker also kept the reply on the reply topic (storeReplyMessageEnable defaults to true)
            store = self.cluster.broker.ctx.store  # the broker stores the reply right after the push

            def stored_replies() -> list[bytes]:
                return [decode_record(raw).body for raw in store.get_message("DefaultCluster_REPLY_TOPIC", 0, 0, 32).messages]

            await wait_until(lambda: b"pong:ping" in stored_replies())
            self.assertEqual(stored_replies().count(b"pong:ping"), 1)
            again = await requester.request(Message("T_rr", b"second"), 10.0)
            self.assertEqual(again.body, b"pong:second")
            self.assertEqual(requester.client.replies.waiting, {})
        finally:
            await consumer.shutdown()
            await producer.shutdown()
            await requester.shutdown()

    @defer.inlineCallbacks
    def test_request_times_out_cleanly_without_a_replier(self):
        yield defer.ensureDeferred(self._timeout())

    async def _timeout(self) -> None:
        requester = Producer("P_lonely", config=self.config())
        await requester.start()
        try:
            started = time.monotonic()
            with self.assertRaises(RequestTimeoutError) as caught:
                await requester.request(Message("T_rr_nobody", b"anyone?"), 1.5)
            self.assertGreaterEqual(time.monotonic() - started, 1.4)
            self.assertEqual(caught.exception.code, 10006)
            self.assertIn("wait reply message timeout, 1500 ms", caught.exception.remark)
            self.assertEqual(requester.client.replies.waiting, {})
            await sleep(0.1)
        finally:
            await requester.shutdown()

    def test_create_reply_message_needs_the_cluster(self) -> None:
        from rmqtx.client.message import MessageExt

        request = MessageExt.__new__(MessageExt)
        request.properties = {"CORRELATION_ID": "c", "REPLY_TO_CLIENT": "x@y", "TTL": "3000"}
        with self.assertRaises(MQClientError) as caught:
            create_reply_message(request, b"x")
        self.assertEqual(caught.exception.code, 10007)
        request.properties["CLUSTER"] = "C1"
        reply = create_reply_message(request, b"x")
        self.assertEqual(reply.topic, "C1_REPLY_TOPIC")
        self.assertEqual(reply.properties, {"MSG_TYPE": "reply", "CORRELATION_ID": "c", "REPLY_TO_CLIENT": "x@y", "TTL": "3000"})
