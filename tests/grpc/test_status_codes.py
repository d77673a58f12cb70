"""The gRPC endpoint's answers to requests the SDK would not send: apache.rocketmq.v2.Code as
Apache's proxy returns them, never a crash (a raw grpcio client with the SDK's generated classes)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import unittest

from testkit.py5 import PY5_VENV, grpc_standalone, pull_queue, stop_cleanly
from testkit.ha import Sender

METADATA = (("x-mq-client-id", "rmqtx-test@1"),)


class StatusCodeTest(unittest.TestCase):
    def setUp(self) -> None:
        os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
        import grpc

        from rmqtx.grpc import stubs

        self.d, self.s, service_grpc = stubs.load()
        self.server = grpc_standalone(by_option=True, recallMessageEnable="true").start()  # twistd rmqstandalone --grpc-port
        self.server.create_topic("GRPC_STATUS", 2)
        self.channel = grpc.insecure_channel(self.server.grpc)
        self.stub = service_grpc.MessagingServiceStub(self.channel)

    def tearDown(self) -> None:
        self.channel.close()
        stop_cleanly(self.server)

    def code(self, name: str) -> int:
        return self.d.Code.Value(name)

    def test_route(self) -> None:
        d, s = self.d, self.s
        resp = self.stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="GRPC_STATUS")), metadata=METADATA, timeout=5)
        self.assertEqual(resp.status.code, self.code("OK"))
        self.assertEqual([q.id for q in resp.message_queues], [0, 1])
        self.assertEqual({q.permission for q in resp.message_queues}, {d.Permission.READ_WRITE})
        host, port = self.server.grpc.rsplit(":", 1)
        address = resp.message_queues[0].broker.endpoints.addresses[0]
        self.assertEqual((address.host, address.port), (host, int(port)))
        missing = self.stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="NO_SUCH_TOPIC")), metadata=METADATA, timeout=5)
        self.assertEqual(missing.status.code, self.code("TOPIC_NOT_FOUND"))
        illegal = self.stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="bad topic!")), metadata=METADATA, timeout=5)
        self.assertEqual(illegal.status.code, self.code("ILLEGAL_TOPIC"))

    def test_send_errors(self) -> None:
        d, s = self.d, self.s

        def send(**sysp: object) -> object:
            msg = d.Message(topic=d.Resource(name=str(sysp.pop("topic", "GRPC_STATUS"))), body=sysp.pop("body", b"x"),
                            system_properties=d.SystemProperties(message_type=d.MessageType.NORMAL, **sysp))
            return self.stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=METADATA, timeout=5)

        self.assertEqual(send(message_id="01AA").status.code, self.code("OK"))
        self.assertEqual(send(message_id="01AB", body=b"").status.code, self.code("MESSAGE_BODY_EMPTY"))
        # as Apache's proxy: the type check comes before the topic's queues, and a topic it has not is UNSPECIFIED
        unknown = send(message_id="01AC", topic="NO_SUCH_TOPIC").status
        self.assertEqual((unknown.code, unknown.message), (self.code("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"),
                         "org.apache.rocketmq.proxy.common.ProxyException: TopicMessageType validate failed, "
                         "the expected type is UNSPECIFIED, but actual type is NORMAL"))
        self.assertEqual(send(message_id="01AD", tag="a|b").status.code, self.code("ILLEGAL_MESSAGE_TAG"))
        self.assertEqual(send(message_id="01AE", body=b"x" * (4 * 1024 * 1024 + 1)).status.code,
                         self.code("MESSAGE_BODY_TOO_LARGE"))
        empty = self.stub.SendMessage(s.SendMessageRequest(), metadata=METADATA, timeout=5)
        self.assertEqual((empty.status.code, empty.status.message), (self.code("MESSAGE_CORRUPTED"), "no message to send"))

    def test_transaction_and_unbuilt(self) -> None:
        d, s = self.d, self.s
        end = self.stub.EndTransaction(s.EndTransactionRequest(
            topic=d.Resource(name="GRPC_STATUS"), message_id="01AA", transaction_id="nope",
            resolution=d.TransactionResolution.COMMIT, source=d.TransactionSource.SOURCE_CLIENT), metadata=METADATA, timeout=5)
        self.assertEqual(end.status.code, self.code("INVALID_TRANSACTION_ID"))
        beat = self.stub.Heartbeat(s.HeartbeatRequest(client_type=d.ClientType.PRODUCER), metadata=METADATA, timeout=5)
        self.assertEqual(beat.status.code, self.code("OK"))
        anonymous = self.stub.Heartbeat(s.HeartbeatRequest(client_type=d.ClientType.PRODUCER), timeout=5)
        self.assertEqual(anonymous.status.code, self.code("CLIENT_ID_REQUIRED"))
        lite = self.stub.SyncLiteSubscription(s.SyncLiteSubscriptionRequest(), metadata=METADATA, timeout=5)
        self.assertEqual(lite.status.code, self.code("NOT_IMPLEMENTED"))
        bye = self.stub.NotifyClientTermination(s.NotifyClientTerminationRequest(), metadata=METADATA, timeout=5)
        self.assertEqual(bye.status.code, self.code("OK"))
        self._recall()

    def _recall(self) -> None:
        """RecallMessage (5.3) with a handle a remoting send of a timer message gave, and its refusals; as the
        proxy it recalls only from a DELAY topic (5.x ``message.type``)."""
        d, s = self.d, self.s
        self.server.create_topic("GRPC_TIMED", 2, "DELAY")
        sender = Sender(self.server.broker, "P_recall")
        self.addCleanup(sender.close)
        sent = sender.send("GRPC_TIMED", b"later", 0, UNIQ_KEY="01RECALL", TIMER_DELAY_SEC="30")
        handle = sent.ext_fields["recallHandle"]

        def recall(topic: str, recall_handle: str) -> object:
            return self.stub.RecallMessage(s.RecallMessageRequest(topic=d.Resource(name=topic), recall_handle=recall_handle),
                                           metadata=METADATA, timeout=5)

        conflict = ("org.apache.rocketmq.proxy.common.ProxyException: TopicMessageType validate failed, the expected "
                    "type is {}, but actual type is DELAY")
        for topic, sent_handle, code, message in (
            ("bad topic!", handle, "ILLEGAL_TOPIC",
             "The specified topic[bad topic!] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
            ("SCHEDULE_TOPIC_XXXX", handle, "ILLEGAL_TOPIC", "cannot access system topic"),
            ("GRPC_TIMED", "%%%", "INTERNAL_SERVER_ERROR", "recall handle is invalid"),
            ("NO_SUCH_TOPIC", handle, "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", conflict.format("UNSPECIFIED")),
            ("GRPC_STATUS", handle, "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", conflict.format("NORMAL")),
            ("GRPC_OTHER", handle, "INTERNAL_SERVER_ERROR", "recall failed, topic not match"),
        ):
            if topic == "GRPC_OTHER":
                self.server.create_topic(topic, 1, "DELAY")
            answer = recall(topic, sent_handle)
            self.assertEqual((answer.status.code, answer.status.message), (self.code(code), message), topic)
        done = recall("GRPC_TIMED", handle)
        self.assertEqual((done.status.code, done.message_id), (self.code("OK"), "01RECALL"))
        # a 5.x SDK's own timer send answers the handle in its SendResultEntry
        timed = d.Message(topic=d.Resource(name="GRPC_TIMED"), body=b"later too",
                          system_properties=d.SystemProperties(message_type=d.MessageType.DELAY, message_id="01RECALL2"))
        timed.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 30_000)
        entry = self.stub.SendMessage(s.SendMessageRequest(messages=[timed]), metadata=METADATA, timeout=5).entries[0]
        self.assertEqual(entry.status.code, self.code("OK"), entry)
        self.assertTrue(entry.recall_handle, "a timer message's send answers its recall handle")
        again = recall("GRPC_TIMED", entry.recall_handle)
        self.assertEqual((again.status.code, again.message_id), (self.code("OK"), "01RECALL2"))

    def _receive(self, group: str, topic: str = "GRPC_STATUS", poll_s: int = 0, invisible_s: int = 20) -> list:
        d, s = self.d, self.s
        request = s.ReceiveMessageRequest(group=d.Resource(name=group), batch_size=16,
                                          message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=0),
                                          filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"))
        request.invisible_duration.FromSeconds(invisible_s)
        request.long_polling_timeout.FromSeconds(poll_s)
        return list(self.stub.ReceiveMessage(request, metadata=METADATA, timeout=poll_s + 5))

    def test_consumer_side(self) -> None:
        d, s = self.d, self.s
        assignment = self.stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="GRPC_STATUS"),
                                                                        group=d.Resource(name="GID_status")),
                                               metadata=METADATA, timeout=5)
        self.assertEqual(assignment.status.code, self.code("OK"))
        self.assertEqual([a.message_queue.id for a in assignment.assignments], [-1], "the broker, every queue popped")
        self.assertEqual(assignment.assignments[0].message_queue.broker.name, "broker-a")
        missing = self.stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="NO_SUCH_TOPIC"),
                                                                     group=d.Resource(name="GID_status")),
                                            metadata=METADATA, timeout=5)
        self.assertEqual(missing.status.code, self.code("TOPIC_NOT_FOUND"))
        anonymous = self.stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="GRPC_STATUS")),
                                              metadata=METADATA, timeout=5)  # the proxy checks the group first
        self.assertEqual(anonymous.status.code, self.code("ILLEGAL_CONSUMER_GROUP"))
        no_group = list(self.stub.ReceiveMessage(s.ReceiveMessageRequest(
            message_queue=d.MessageQueue(topic=d.Resource(name="GRPC_STATUS"))), metadata=METADATA, timeout=5))
        self.assertEqual([r.status.code for r in no_group], [self.code("ILLEGAL_CONSUMER_GROUP")])
        started = time.monotonic()
        empty = self._receive("GID_status", poll_s=1)
        self.assertEqual([r.status.code for r in empty], [self.code("MESSAGE_NOT_FOUND")])
        self.assertGreater(time.monotonic() - started, 0.9, "long polled for long_polling_timeout")
        self._receive_without_polling_timeout()
        bogus = self.stub.AckMessage(s.AckMessageRequest(
            group=d.Resource(name="GID_status"), topic=d.Resource(name="GRPC_STATUS"),
            entries=[s.AckMessageEntry(message_id="01AA", receipt_handle="not a handle")]), metadata=METADATA, timeout=5)
        # as Apache 5.4.0's proxy answers an unparseable handle (tests/grpc/test_vs_apache.py)
        self.assertEqual(bogus.status.code, self.code("INTERNAL_SERVER_ERROR"))
        self.assertEqual(bogus.entries[0].status.code, self.code("INTERNAL_SERVER_ERROR"))
        self._fifo_group_assignment_and_settings()

    def _fifo_group_assignment_and_settings(self) -> None:
        """An orderly group (5.x consumeMessageOrderly) is assigned each readable queue, and its consumers'
        settings say FIFO, with its retryMaxTimes + 1 attempts and its groupRetryPolicy's backoff."""
        d, s = self.d, self.s
        from rmqtx.common import fastjson
        from rmqtx.remoting.codes import RequestCode, ResponseCode
        from rmqtx.remoting.command import RemotingCommand
        from testkit.standalone import call

        for name, policy in (("GID_status_fifo", {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 2000]}}),
                             ("GID_status_exp", {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 500, "max": 8000,
                                                                                                   "multiplier": 3}})):
            body = fastjson.dumps({"consumeMessageOrderly": name.endswith("fifo"), "groupName": name,
                                   "groupRetryPolicy": policy, "retryMaxTimes": 2})
            resp = call(self.server.broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body=body))
            self.assertEqual(resp.code, ResponseCode.SUCCESS)
        assignment = self.stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="GRPC_STATUS"),
                                                                        group=d.Resource(name="GID_status_fifo")),
                                               metadata=METADATA, timeout=5)
        self.assertEqual([a.message_queue.id for a in assignment.assignments], [0, 1], "each queue of an orderly group")

        def settings(group: str) -> object:
            mine = d.Settings(client_type=d.ClientType.SIMPLE_CONSUMER,
                              subscription=d.Subscription(group=d.Resource(name=group)))
            replies = self.stub.Telemetry(iter([s.TelemetryCommand(settings=mine)]), metadata=METADATA, timeout=5)
            return next(iter(replies)).settings

        fifo = settings("GID_status_fifo")
        self.assertTrue(fifo.subscription.fifo)
        self.assertEqual(fifo.backoff_policy.max_attempts, 3)
        self.assertEqual([t.ToMilliseconds() for t in fifo.backoff_policy.customized_backoff.next], [1000, 2000])
        exp = settings("GID_status_exp")
        self.assertFalse(exp.subscription.fifo)
        backoff = exp.backoff_policy.exponential_backoff
        self.assertEqual((backoff.initial.ToMilliseconds(), backoff.max.ToMilliseconds(), backoff.multiplier), (500, 8000, 3.0))
        plain = settings("GID_status")
        self.assertFalse(plain.subscription.fifo)
        self.assertEqual(plain.backoff_policy.max_attempts, 17, "retryMaxTimes 16, and the delay levels from 3 on")
        self.assertEqual(plain.backoff_policy.customized_backoff.next[0].ToMilliseconds(), 10_000)

    def _receive_without_polling_timeout(self) -> None:
        """golang/v5 names no long_polling_timeout: the endpoint long polls for the deadline less half the
        request timeout, at least 5 s, and refuses a receive with less time left, as Apache's proxy."""
        d, s = self.d, self.s
        request = s.ReceiveMessageRequest(group=d.Resource(name="GID_implied"), batch_size=16,
                                          message_queue=d.MessageQueue(topic=d.Resource(name="GRPC_STATUS"), id=-1),
                                          filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"))
        request.invisible_duration.FromSeconds(20)
        short = list(self.stub.ReceiveMessage(request, metadata=METADATA, timeout=4))
        self.assertEqual([r.status.code for r in short], [self.code("BAD_REQUEST")], "no client version: BAD_REQUEST")
        versioned = METADATA + (("x-mq-client-version", "5.0.8"),)
        short = list(self.stub.ReceiveMessage(request, metadata=versioned, timeout=4))
        self.assertEqual([r.status.code for r in short], [self.code("ILLEGAL_POLLING_TIME")])
        msg = d.Message(topic=d.Resource(name="GRPC_STATUS"), body=b"late",
                        system_properties=d.SystemProperties(message_type=d.MessageType.NORMAL, message_id="01LATE"))
        # sent a second into the receive: it arrives in that receive's long poll (it was no zero-length poll)
        sender = threading.Timer(1.0, self.stub.SendMessage, (s.SendMessageRequest(messages=[msg]),),
                                 {"metadata": METADATA, "timeout": 5})
        started = time.monotonic()
        sender.start()
        try:
            answers = list(self.stub.ReceiveMessage(request, metadata=versioned, timeout=8))
        finally:
            sender.join()
        self.assertEqual(answers[0].status.code, self.code("OK"), answers[0])
        self.assertEqual([r.message.body for r in answers if r.HasField("message")], [b"late"])
        self.assertGreater(time.monotonic() - started, 0.9)

    def test_change_invisible_then_forward_to_dead_letter_queue(self) -> None:
        """A negative invisible duration is refused, 0 makes the message visible at once (a Node PushConsumer's
        nack without a backoff), as Apache's proxy; its next delivery is forwarded to %DLQ%group."""
        d, s = self.d, self.s
        msg = d.Message(topic=d.Resource(name="GRPC_STATUS"), body=b"to-dlq",
                        system_properties=d.SystemProperties(message_type=d.MessageType.NORMAL, message_id="01DLQ"))
        sent = self.stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=METADATA, timeout=5)
        self.assertEqual(sent.status.code, self.code("OK"))
        answers = self._receive("GID_dlq", poll_s=3)
        self.assertEqual(answers[0].status.code, self.code("OK"))
        messages = [r.message for r in answers if r.HasField("message")]
        self.assertEqual([m.body for m in messages], [b"to-dlq"])
        self.assertTrue(answers[-1].HasField("delivery_timestamp"), "status, messages, then the delivery timestamp")
        received = messages[0]
        self.assertEqual(received.system_properties.message_id, "01DLQ")
        self.assertEqual(received.system_properties.delivery_attempt, 1)

        def change(invisible_ms: int) -> object:
            request = s.ChangeInvisibleDurationRequest(
                group=d.Resource(name="GID_dlq"), topic=d.Resource(name="GRPC_STATUS"), message_id="01DLQ",
                receipt_handle=received.system_properties.receipt_handle)
            request.invisible_duration.FromMilliseconds(invisible_ms)
            return self.stub.ChangeInvisibleDuration(request, metadata=METADATA, timeout=5)

        self.assertEqual(change(-1000).status.code, self.code("ILLEGAL_INVISIBLE_TIME"))
        changed = change(0)
        self.assertEqual(changed.status.code, self.code("OK"))
        self.assertNotEqual(changed.receipt_handle, received.system_properties.receipt_handle)
        deadline = time.monotonic() + 20
        again: list = []
        while not again and time.monotonic() < deadline:
            again = [r.message for r in self._receive("GID_dlq", poll_s=2) if r.HasField("message")]
        self.assertEqual([(m.body, m.system_properties.delivery_attempt) for m in again], [(b"to-dlq", 2)],
                         "back at once, as the second attempt")
        received = again[0]
        # the body's MD5 in upper-case hex, as Apache's proxy sends it (the Node SDK cannot read a message without one)
        self.assertEqual((received.system_properties.body_digest.type, received.system_properties.body_digest.checksum),
                         (d.DigestType.MD5, hashlib.md5(b"to-dlq").hexdigest().upper()))
        forward = self.stub.ForwardMessageToDeadLetterQueue(s.ForwardMessageToDeadLetterQueueRequest(
            group=d.Resource(name="GID_dlq"), topic=d.Resource(name="GRPC_STATUS"), message_id="01DLQ",
            receipt_handle=received.system_properties.receipt_handle, delivery_attempt=2, max_delivery_attempts=16),
            metadata=METADATA, timeout=5)
        self.assertEqual(forward.status.code, self.code("OK"))
        dead = pull_queue(self.server.broker, "%DLQ%GID_dlq", 0)
        self.assertEqual([(m.body, m.msg_id) for m in dead], [(b"to-dlq", "01DLQ")])

    def test_offsets_and_pull(self) -> None:
        """GetOffset / UpdateOffset over the group's committed offsets, QueryOffset by policy over the store,
        and PullMessage of one queue from an offset (status, messages, next offset; long polling)."""
        d, s = self.d, self.s
        queue = d.MessageQueue(topic=d.Resource(name="GRPC_STATUS"), id=1)
        group = d.Resource(name="GID_offsets")
        before_ms = int(time.time() * 1000) - 1000
        for i in range(3):
            self.server.send_to_queue("GRPC_STATUS", 1, f"p{i}")

        def query(policy: str, **extra: object) -> tuple[int, int]:
            resp = self.stub.QueryOffset(s.QueryOffsetRequest(message_queue=queue, query_offset_policy=d.QueryOffsetPolicy.Value(policy),
                                                              **extra), metadata=METADATA, timeout=5)
            return resp.status.code, resp.offset

        def stamp(ms: int) -> object:
            out = self.d.Message().system_properties.born_timestamp  # a google.protobuf.Timestamp
            out.FromMilliseconds(ms)
            return out

        ok = self.code("OK")
        self.assertEqual(query("BEGINNING"), (ok, 0))
        self.assertEqual(query("END"), (ok, 3))
        self.assertEqual(query("TIMESTAMP", timestamp=stamp(before_ms)), (ok, 0))
        # past the last message: its offset, as SEARCH_OFFSET_BY_TIMESTAMP answers (Java's search in the consume queue)
        self.assertEqual(query("TIMESTAMP", timestamp=stamp(int(time.time() * 1000) + 60_000)), (ok, 2))
        self.assertEqual(query("TIMESTAMP")[0], self.code("BAD_REQUEST"), "TIMESTAMP without a timestamp")
        far = self.stub.QueryOffset(s.QueryOffsetRequest(message_queue=d.MessageQueue(topic=d.Resource(name="GRPC_STATUS"), id=7)),
                                    metadata=METADATA, timeout=5)
        self.assertEqual(far.status.code, self.code("BAD_REQUEST"), "no such queue")

        def get() -> tuple[int, int]:
            resp = self.stub.GetOffset(s.GetOffsetRequest(group=group, message_queue=queue), metadata=METADATA, timeout=5)
            return resp.status.code, resp.offset

        def update(offset: int) -> int:
            return self.stub.UpdateOffset(s.UpdateOffsetRequest(group=group, message_queue=queue, offset=offset),
                                          metadata=METADATA, timeout=5).status.code

        self.assertEqual(get(), (ok, 0), "no offset yet, the queue still starts in memory: 0, as QUERY_CONSUMER_OFFSET")
        self.assertEqual(update(2), ok)
        self.assertEqual(get(), (ok, 2))
        self.assertEqual(update(-1), self.code("ILLEGAL_OFFSET"))
        anonymous = self.stub.GetOffset(s.GetOffsetRequest(message_queue=queue), metadata=METADATA, timeout=5)
        self.assertEqual(anonymous.status.code, self.code("ILLEGAL_CONSUMER_GROUP"))

        def pull(offset: int, tag: str = "*", poll_s: int = 0) -> list:
            request = s.PullMessageRequest(group=group, message_queue=queue, offset=offset, batch_size=16,
                                           filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression=tag))
            request.long_polling_timeout.FromSeconds(poll_s)
            return list(self.stub.PullMessage(request, metadata=METADATA, timeout=poll_s + 5))

        got = pull(1)
        self.assertEqual(got[0].status.code, ok)
        self.assertEqual([r.message.body for r in got if r.HasField("message")], [b"p1", b"p2"])
        self.assertEqual([r.message.system_properties.queue_offset for r in got if r.HasField("message")], [1, 2])
        self.assertEqual(got[-1].next_offset, 3, "status, messages, then the next offset")
        self.assertEqual(get(), (ok, 2), "a pull commits nothing")
        other = pull(0, tag="Other")
        self.assertEqual((other[0].status.code, other[-1].next_offset), (self.code("MESSAGE_NOT_FOUND"), 3))
        started = time.monotonic()
        empty = pull(3, poll_s=1)
        self.assertEqual([r.status.code for r in empty if r.HasField("status")], [self.code("MESSAGE_NOT_FOUND")])
        self.assertEqual(empty[-1].next_offset, 3)
        self.assertGreater(time.monotonic() - started, 0.9, "long polled for long_polling_timeout")


class ImpliedPollingTest(unittest.TestCase):
    """The long poll of a receive naming no long_polling_timeout, worked out as Apache's proxy does."""

    def test_bounds(self) -> None:
        from rmqtx.grpc.consumer import implied_polling_ms, short_deadline_code

        self.assertEqual(implied_polling_ms(8_000, 3_000), 6_500, "deadline less half the request timeout")
        self.assertEqual(implied_polling_ms(5_500, 3_000), 5_000, "at least 5 s")
        self.assertEqual(implied_polling_ms(60_000, 3_000), 20_000, "at most 20 s")
        self.assertEqual(implied_polling_ms(None, 3_000), 20_000, "no deadline")
        self.assertEqual(implied_polling_ms(5_000, 20_000), 5_000, "never past the deadline")
        self.assertIsNone(implied_polling_ms(4_999, 0))
        self.assertEqual([short_deadline_code(v) for v in ("", "5.0.1-rc1", "5.0.3", "5.1.2")],
                         ["BAD_REQUEST", "BAD_REQUEST", "ILLEGAL_POLLING_TIME", "ILLEGAL_POLLING_TIME"])
