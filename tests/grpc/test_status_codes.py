"""The gRPC endpoint's answers to requests the SDK would not send: apache.rocketmq.v2.Code as
Apache's proxy returns them, never a crash (a raw grpcio client with the SDK's generated classes)."""

from __future__ import annotations

import os
import unittest

from tests.grpc.py5 import PY5_VENV, grpc_standalone

METADATA = (("x-mq-client-id", "rmqtx-test@1"),)


class StatusCodeTest(unittest.TestCase):
    def setUp(self) -> None:
        os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
        import grpc

        from rmqtx.grpc import stubs

        self.d, self.s, service_grpc = stubs.load()
        self.server = grpc_standalone(by_option=True).start()  # twistd rmqstandalone --grpc-port
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
        assignment = self.stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="GRPC_STATUS")),
                                               metadata=METADATA, timeout=5)
        self.assertEqual(assignment.status.code, self.code("NOT_IMPLEMENTED"))
        received = list(self.stub.ReceiveMessage(s.ReceiveMessageRequest(), metadata=METADATA, timeout=5))
        self.assertEqual([r.status.code for r in received], [self.code("NOT_IMPLEMENTED")])
        bye = self.stub.NotifyClientTermination(s.NotifyClientTerminationRequest(), metadata=METADATA, timeout=5)
        self.assertEqual(bye.status.code, self.code("OK"))
