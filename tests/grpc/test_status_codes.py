"""The gRPC endpoint's answers to requests the SDK would not send: apache.rocketmq.v2.Code as
Apache's proxy returns them, never a crash (a raw grpcio client with the SDK's generated classes)."""

from __future__ import annotations

import os
import unittest

import time

from tests.grpc.py5 import PY5_VENV, grpc_standalone, pull_queue
from tests.ha.harness import Sender

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
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        if not clean:
            raise AssertionError(f"standalone with gRPC did not shut down cleanly\n{log}")

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
        self.assertEqual(send(message_id="01AC", topic="NO_SUCH_TOPIC").status.code, self.code("TOPIC_NOT_FOUND"))
        self.assertEqual(send(message_id="01AD", tag="a|b").status.code, self.code("ILLEGAL_MESSAGE_TAG"))
        self.assertEqual(send(message_id="01AE", body=b"x" * (4 * 1024 * 1024 + 1)).status.code,
                         self.code("MESSAGE_BODY_TOO_LARGE"))
        empty = self.stub.SendMessage(s.SendMessageRequest(), metadata=METADATA, timeout=5)
        self.assertEqual(empty.status.code, self.code("BAD_REQUEST"))

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
        offset = self.stub.GetOffset(s.GetOffsetRequest(), metadata=METADATA, timeout=5)
        self.assertEqual(offset.status.code, self.code("NOT_IMPLEMENTED"))
        bye = self.stub.NotifyClientTermination(s.NotifyClientTerminationRequest(), metadata=METADATA, timeout=5)
        self.assertEqual(bye.status.code, self.code("OK"))
        self._recall()

    def _recall(self) -> None:
        """RecallMessage (5.3) with a handle a remoting send of a timer message gave, and its refusals."""
        d, s = self.d, self.s
        sender = Sender(self.server.broker, "P_recall")
        self.addCleanup(sender.close)
        sent = sender.send("GRPC_STATUS", b"later", 0, UNIQ_KEY="01RECALL", TIMER_DELAY_SEC="30")
        handle = sent.ext_fields["recallHandle"]

        def recall(topic: str, recall_handle: str) -> object:
            return self.stub.RecallMessage(s.RecallMessageRequest(topic=d.Resource(name=topic), recall_handle=recall_handle),
                                           metadata=METADATA, timeout=5)

        for topic, sent_handle, code, message in (
            ("bad topic!", handle, "ILLEGAL_TOPIC", "topic name 'bad topic!' is illegal"),
            ("GRPC_STATUS", "%%%", "INTERNAL_SERVER_ERROR", "recall handle is invalid"),
            ("NO_SUCH_TOPIC", handle, "TOPIC_NOT_FOUND", "recall failed, the topic[NO_SUCH_TOPIC] not exist"),
            ("GRPC_OTHER", handle, "INTERNAL_SERVER_ERROR", "recall failed, topic not match"),
        ):
            if topic == "GRPC_OTHER":
                self.server.create_topic(topic, 1)
            answer = recall(topic, sent_handle)
            self.assertEqual((answer.status.code, answer.status.message), (self.code(code), message), topic)
        done = recall("GRPC_STATUS", handle)
        self.assertEqual((done.status.code, done.message_id), (self.code("OK"), "01RECALL"))

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
        missing = self.stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="NO_SUCH_TOPIC")),
                                            metadata=METADATA, timeout=5)
        self.assertEqual(missing.status.code, self.code("TOPIC_NOT_FOUND"))
        no_group = list(self.stub.ReceiveMessage(s.ReceiveMessageRequest(), metadata=METADATA, timeout=5))
        self.assertEqual([r.status.code for r in no_group], [self.code("ILLEGAL_CONSUMER_GROUP")])
        started = time.monotonic()
        empty = self._receive("GID_status", poll_s=1)
        self.assertEqual([r.status.code for r in empty], [self.code("MESSAGE_NOT_FOUND")])
        self.assertGreater(time.monotonic() - started, 0.9, "long polled for long_polling_timeout")
        bogus = self.stub.AckMessage(s.AckMessageRequest(
            group=d.Resource(name="GID_status"), topic=d.Resource(name="GRPC_STATUS"),
            entries=[s.AckMessageEntry(message_id="01AA", receipt_handle="not a handle")]), metadata=METADATA, timeout=5)
        self.assertEqual(bogus.status.code, self.code("INVALID_RECEIPT_HANDLE"))
        self.assertEqual(bogus.entries[0].status.code, self.code("INVALID_RECEIPT_HANDLE"))

    def test_forward_to_dead_letter_queue(self) -> None:
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
        forward = self.stub.ForwardMessageToDeadLetterQueue(s.ForwardMessageToDeadLetterQueueRequest(
            group=d.Resource(name="GID_dlq"), topic=d.Resource(name="GRPC_STATUS"), message_id="01DLQ",
            receipt_handle=received.system_properties.receipt_handle, delivery_attempt=1, max_delivery_attempts=16),
            metadata=METADATA, timeout=5)
        self.assertEqual(forward.status.code, self.code("OK"))
        dead = pull_queue(self.server.broker, "%DLQ%GID_dlq", 0)
        self.assertEqual([(m.body, m.msg_id) for m in dead], [(b"to-dlq", "01DLQ")])
