"""The proxy's checks on the gRPC endpoint, as Apache 5.x's proxy answers them (raw grpcio with the SDK's
stubs): control characters, system names and sizes of a message's tag, keys and user properties; a body
of exactly maxMessageSize stored with its properties (remoting and gRPC alike); the invisible time's
bounds; an ack with an expired receipt handle; and a gRPC port that takes TLS and plain clients when
no TLS setting is made."""

from __future__ import annotations

import os
import socket
import ssl
import time
import unittest
from typing import Any

from testkit.py5 import PY5_VENV, grpc_standalone, pull_queue, run_driver, stop_cleanly
from testkit.ha import Sender

METADATA = (("x-mq-client-id", "rmqtx-checks@1"),)
TOPIC = "GRPC_CHECKS"
FOUR_MIB = 4 * 1024 * 1024


def endpoint_certificate(addr: str) -> bytes:
    """The PEM certificate a TLS handshake with ``addr`` shows (offering h2, as a gRPC client does)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return ssl.DER_cert_to_PEM_cert(der).encode()


class _Endpoint(unittest.TestCase):
    conf: dict[str, str] = {}

    def setUp(self) -> None:
        os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
        import grpc

        from rmqtx.grpc import stubs

        self.grpc = grpc
        self.d, self.s, self.service = stubs.load()
        self.server = grpc_standalone(**self.conf).start()
        self.server.create_topic(TOPIC, 1)
        # room for a 4 MiB body coming back (grpcio's clients take 4 MiB messages by default)
        self.channel = grpc.insecure_channel(self.server.grpc, options=[("grpc.max_receive_message_length", 64 << 20),
                                                                        ("grpc.max_send_message_length", 64 << 20)])
        self.stub = self.service.MessagingServiceStub(self.channel)

    def tearDown(self) -> None:
        self.channel.close()
        stop_cleanly(self.server)

    def code(self, name: str) -> int:
        return self.d.Code.Value(name)

    def send(self, message_id: str, body: bytes = b"x", props: dict[str, str] | None = None, **sysp: Any) -> Any:
        d, s = self.d, self.s
        msg = d.Message(topic=d.Resource(name=TOPIC), body=body, user_properties=props or {},
                        system_properties=d.SystemProperties(message_type=d.MessageType.NORMAL, message_id=message_id,
                                                             **sysp))
        return self.stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=METADATA, timeout=20)

    def receive(self, group: str, invisible_ms: int | None, poll_s: int = 1, **extra: Any) -> list:
        d, s = self.d, self.s
        request = s.ReceiveMessageRequest(group=d.Resource(name=group), batch_size=16,
                                          message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC), id=-1),
                                          filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
                                          **extra)
        if invisible_ms is not None:
            request.invisible_duration.FromMilliseconds(invisible_ms)
        request.long_polling_timeout.FromSeconds(poll_s)
        return list(self.stub.ReceiveMessage(request, metadata=METADATA, timeout=poll_s + 10))

    def change(self, group: str, handle: str, invisible_ms: int) -> Any:
        d, s = self.d, self.s
        request = s.ChangeInvisibleDurationRequest(group=d.Resource(name=group), topic=d.Resource(name=TOPIC),
                                                   message_id="01", receipt_handle=handle)
        request.invisible_duration.FromMilliseconds(invisible_ms)
        return self.stub.ChangeInvisibleDuration(request, metadata=METADATA, timeout=5)


class MessageChecksTest(_Endpoint):
    def test_tag_keys_and_user_properties(self) -> None:
        """Each refusal with the proxy's code and message; what passes is stored."""
        big = "v" * (16 * 1024 - len("big") - len("t"))  # key, value and tag: exactly 16 KiB
        cases: list[tuple[str, dict, dict, str, str]] = [
            ("01T1", {"tag": "a\x01b"}, {}, "ILLEGAL_MESSAGE_TAG", "tag cannot contain control character"),
            ("01T2", {"tag": " \t"}, {}, "ILLEGAL_MESSAGE_TAG", "tag cannot be the char sequence of whitespace"),
            ("01T3", {"tag": "a|b"}, {}, "ILLEGAL_MESSAGE_TAG", "tag cannot contain '|'"),
            ("01K1", {"keys": ["good", "k\x02"]}, {}, "ILLEGAL_MESSAGE_KEY", "key cannot contain control character"),
            ("01K2", {"keys": ["  "]}, {}, "ILLEGAL_MESSAGE_KEY", "key cannot be the char sequence of whitespace"),
            ("01P1", {}, {"a\x03": "v"}, "ILLEGAL_MESSAGE_PROPERTY_KEY",
             "the key of property cannot contain control character"),
            ("01P2", {}, {"a": "v\x7f"}, "ILLEGAL_MESSAGE_PROPERTY_KEY",
             "the value of property cannot contain control character"),
            ("01P3", {}, {"a": "v\u0085"}, "ILLEGAL_MESSAGE_PROPERTY_KEY",
             "the value of property cannot contain control character"),
            ("01S1", {}, {"UNIQ_KEY": "mine"}, "ILLEGAL_MESSAGE_PROPERTY_KEY", "property is used by system: UNIQ_KEY"),
            ("01S2", {}, {"DELAY": "3"}, "ILLEGAL_MESSAGE_PROPERTY_KEY", "property is used by system: DELAY"),
            ("01N1", {}, {f"p{i}": "v" for i in range(129)}, "MESSAGE_PROPERTIES_TOO_LARGE",
             "too many user properties, max is 128"),
            ("01Z1", {"tag": "t"}, {"big": big + "v"}, "MESSAGE_PROPERTIES_TOO_LARGE",
             "the total size of user property is too large, max is 16384"),
            ("01Z2", {"tag": "t", "keys": ["k"]}, {"big": big}, "MESSAGE_PROPERTIES_TOO_LARGE",
             "the total size of user property is too large, max is 16384"),
        ]
        for message_id, sysp, props, code, message in cases:
            answer = self.send(message_id, props=props, **sysp)
            self.assertEqual((answer.status.code, answer.status.message), (self.code(code), message), message_id)
            self.assertEqual(list(answer.entries), [], f"{message_id}: a refusal answers the call, as the proxy's")
        passing = [
            ("01OK1", {"tag": "t"}, {"big": big}),  # 16 KiB exactly
            ("01OK2", {"tag": "two words"}, {}),  # whitespace inside a tag is no refusal (the proxy's rule)
            ("01OK3", {}, {f"p{i}": "v" for i in range(128)}),
            ("01OK4", {"keys": ["k1", "k2"]}, {"unicode": "h\u00e9llo \u4e16\u754c"}),
        ]
        for message_id, sysp, props in passing:
            answer = self.send(message_id, props=props, **sysp)
            self.assertEqual(answer.status.code, self.code("OK"), f"{message_id}: {answer.status.message}")
        stored = {m.properties.get("UNIQ_KEY"): m for m in pull_queue(self.server.broker, TOPIC, 0)}
        self.assertEqual(sorted(stored), ["01OK1", "01OK2", "01OK3", "01OK4"], "nothing refused was stored")
        self.assertEqual(stored["01OK1"].properties["big"], big)
        self.assertEqual(stored["01OK2"].properties["TAGS"], "two words")
        self.assertEqual(stored["01OK3"].properties["p127"], "v")

    def test_body_of_max_message_size_with_properties(self) -> None:
        """A body of exactly maxMessageSize (4 MiB) with tag, keys and properties is stored and read back whole,
        over gRPC and over a 4.x remoting send; a byte more is refused, as Apache's proxy and store judge."""
        body = bytes(range(256)) * (FOUR_MIB // 256)
        props = {f"prop{i}": "p" * 100 for i in range(20)}
        sent = self.send("01BIG", body=body, props=props, tag="Big", keys=["big-key"])
        self.assertEqual(sent.status.code, self.code("OK"), sent.status.message)
        over = self.send("01BIGGER", body=body + b"!")
        self.assertEqual((over.status.code, over.status.message),
                         (self.code("MESSAGE_BODY_TOO_LARGE"), f"message body cannot exceed the max {FOUR_MIB}"))
        sender = Sender(self.server.broker, "P_big")
        self.addCleanup(sender.sock.close)
        remoting = sender.send(TOPIC, body[::-1], 0, UNIQ_KEY="01BIGREMOTING", TAGS="Big", KEYS="k", **props)
        self.assertEqual(remoting.code, 0, remoting.remark)
        refused = sender.send(TOPIC, body + b"!", 0, UNIQ_KEY="01BIGGERREMOTING")
        self.assertEqual(refused.code, 13, "MESSAGE_ILLEGAL: over maxMessageSize")
        stored = {m.properties.get("UNIQ_KEY"): m for m in pull_queue(self.server.broker, TOPIC, 0)}
        self.assertEqual(sorted(stored), ["01BIG", "01BIGREMOTING"])
        self.assertEqual(stored["01BIG"].body, body)
        self.assertEqual(stored["01BIG"].properties["prop19"], "p" * 100)
        self.assertEqual(stored["01BIGREMOTING"].body, body[::-1])
        got: dict[str, Any] = {}
        for _ in range(4):  # a pop hands out what fits its transfer limit: one such message at a time
            answers = self.receive("GID_big", 30_000, poll_s=2)
            got.update((r.message.system_properties.message_id, r.message) for r in answers if r.HasField("message"))
        self.assertEqual(sorted(got), ["01BIG", "01BIGREMOTING"])
        self.assertEqual(got["01BIG"].body, body)
        self.assertEqual(got["01BIG"].system_properties.tag, "Big")
        self.assertEqual(dict(got["01BIG"].user_properties), props)


class InvisibleTimeTest(_Endpoint):
    def test_bounds_and_an_expired_receipt_handle(self) -> None:
        """ReceiveMessage: 10 s to 12 h (an auto-renewing receive is not checked); ChangeInvisibleDuration: 0 to
        12 h; an ack with a handle whose invisible time is over: INVALID_RECEIPT_HANDLE, entry and summary."""
        group = "GID_bounds"
        for invisible_ms, message in ((9_999, "the invisibleTime is too small. min is 10000"),
                                      (None, "the invisibleTime is too small. min is 10000"),
                                      (12 * 3600 * 1000 + 1, "the invisibleTime is too large. max is 43200000")):
            answers = self.receive(group, invisible_ms, poll_s=0)
            self.assertEqual([(r.status.code, r.status.message) for r in answers],
                             [(self.code("ILLEGAL_INVISIBLE_TIME"), message)], invisible_ms)
        renewing = self.receive(group, None, poll_s=0, auto_renew=True)
        self.assertEqual([r.status.code for r in renewing], [self.code("MESSAGE_NOT_FOUND")])
        self.assertEqual(self.send("01EXP").status.code, self.code("OK"))
        answers = self.receive(group, 10_000, poll_s=3)
        messages = [r.message for r in answers if r.HasField("message")]
        self.assertEqual([m.system_properties.message_id for m in messages], ["01EXP"])
        handle = messages[0].system_properties.receipt_handle
        for invisible_ms, message in ((-1, "the invisibleTime is too small. min is 0"),
                                      (12 * 3600 * 1000 + 1, "the invisibleTime is too large. max is 43200000")):
            answer = self.change(group, handle, invisible_ms)
            self.assertEqual((answer.status.code, answer.status.message), (self.code("ILLEGAL_INVISIBLE_TIME"), message))
        changed = self.change(group, handle, 1_000)
        self.assertEqual(changed.status.code, self.code("OK"), changed.status.message)
        time.sleep(1.5)
        d, s = self.d, self.s
        ack = self.stub.AckMessage(s.AckMessageRequest(
            group=d.Resource(name=group), topic=d.Resource(name=TOPIC),
            entries=[s.AckMessageEntry(message_id="01EXP", receipt_handle=changed.receipt_handle)]),
            metadata=METADATA, timeout=5)
        expired = "org.apache.rocketmq.proxy.common.ProxyException: receipt handle is expired"
        self.assertEqual((ack.status.code, ack.status.message),
                         (self.code("INVALID_RECEIPT_HANDLE"), "INVALID_RECEIPT_HANDLE"))
        self.assertEqual([(e.status.code, e.status.message) for e in ack.entries],
                         [(self.code("INVALID_RECEIPT_HANDLE"), expired)])
        late = self.change(group, changed.receipt_handle, 20_000)
        self.assertEqual((late.status.code, late.status.message), (self.code("INVALID_RECEIPT_HANDLE"), expired))


class DefaultTlsTest(unittest.TestCase):
    """No TLS setting: the gRPC port takes TLS clients (as the Java 5.x SDK connects by default) and plain ones,
    as Apache's proxy does; tls.server.mode=disabled still makes it plain only."""

    def setUp(self) -> None:
        os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
        from rmqtx.grpc import stubs

        self.d, self.s, self.service = stubs.load()

    def _start(self, **conf: str) -> Any:
        server = grpc_standalone(**conf).start()

        def stop() -> None:
            clean = server.stop()
            log = server.log()
            server.close()
            self.assertTrue(clean, f"standalone with gRPC did not shut down cleanly\n{log}")

        self.addCleanup(stop)
        server.create_topic(TOPIC, 1)
        return server

    def _route(self, channel: Any) -> int:
        stub = self.service.MessagingServiceStub(channel)
        return stub.QueryRoute(self.s.QueryRouteRequest(topic=self.d.Resource(name=TOPIC)), metadata=METADATA,
                               timeout=10).status.code

    def test_tls_and_plain_on_the_default_port(self) -> None:
        import grpc

        server = self._start()
        ok = self.d.Code.Value("OK")
        with grpc.insecure_channel(server.grpc) as channel:
            self.assertEqual(self._route(channel), ok, "a plain client")
        cert = endpoint_certificate(server.grpc)  # the self-signed one made at start, naming 127.0.0.1
        with grpc.secure_channel(server.grpc, grpc.ssl_channel_credentials(cert)) as channel:
            self.assertEqual(self._route(channel), ok, "a TLS client, the certificate checked")
        # the 5.x Python SDK both ways (over TLS it trusts the certificate the endpoint shows)
        for tls in (True, False):
            events = run_driver({"op": "send", "endpoint": server.grpc, "topic": TOPIC, "tls": tls,
                                 "messages": [{"body": f"tls={tls}"}]})
            self.assertEqual([e["body"] for e in events if e["event"] == "sent"], [f"tls={tls}"])
        bodies = sorted(m.body for m in pull_queue(server.broker, TOPIC, 0))
        self.assertEqual(bodies, [b"tls=False", b"tls=True"])
        # an operator's tls.server.mode still rules: disabled is plain only
        plain = self._start(**{"tls.server.mode": "disabled"})
        with grpc.insecure_channel(plain.grpc) as channel:
            self.assertEqual(self._route(channel), ok)
        with self.assertRaises(OSError):
            endpoint_certificate(plain.grpc)


class MessageTypeTest(_Endpoint):
    """Apache 5.x's topic message types over gRPC: a topic's ``message.type`` (UPDATE_AND_CREATE_TOPIC's attributes)
    is its queues' accept_message_types, a send of another type is MESSAGE_PROPERTY_CONFLICT_WITH_TYPE with the
    proxy's message, and the SDKs are told to check too (validate_message_type)."""

    conf = {"enableMixedMessageType": "true"}
    TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")

    def typed(self, topic: str, kind: str, message_id: str) -> Any:
        """One message of ``kind`` as the SDKs build it (FIFO: a message group; DELAY: a delivery timestamp)."""
        d, s = self.d, self.s
        sysp = d.SystemProperties(message_type=d.MessageType.Value(kind), message_id=message_id)
        if kind == "FIFO":
            sysp.message_group = "g1"
        elif kind == "DELAY":
            sysp.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 60_000)
        msg = d.Message(topic=d.Resource(name=topic), body=b"typed", system_properties=sysp)
        return self.stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=METADATA, timeout=20)

    def settings(self, topic: str) -> Any:
        d, s = self.d, self.s
        settings = d.Settings(client_type=d.ClientType.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=topic)]))
        replies = self.stub.Telemetry(iter([s.TelemetryCommand(settings=settings)]), metadata=METADATA, timeout=10)
        return next(iter(replies)).settings

    def test_sends_checked_against_the_topic_type(self) -> None:
        d = self.d
        for topic_type in self.TYPES:
            self.server.create_topic(f"T_{topic_type}", 1, topic_type)
        accepts = {}
        for topic_type in self.TYPES:
            route = self.stub.QueryRoute(self.s.QueryRouteRequest(topic=d.Resource(name=f"T_{topic_type}")),
                                         metadata=METADATA, timeout=10)
            accepts[topic_type] = [d.MessageType.Name(t) for t in route.message_queues[0].accept_message_types]
        self.assertEqual(accepts, {"NORMAL": ["NORMAL"], "FIFO": ["FIFO"], "DELAY": ["DELAY"],
                                   "TRANSACTION": ["TRANSACTION"],
                                   "MIXED": ["NORMAL", "FIFO", "DELAY", "TRANSACTION"]})
        plain = self.stub.QueryRoute(self.s.QueryRouteRequest(topic=d.Resource(name=TOPIC)), metadata=METADATA, timeout=10)
        self.assertEqual([list(q.accept_message_types) for q in plain.message_queues], [[d.MessageType.NORMAL]],
                         "a topic without message.type is NORMAL")
        self.assertTrue(self.settings(TOPIC).publishing.validate_message_type)
        stored = []
        for n, (topic_type, kind) in enumerate((t, k) for t in self.TYPES for k in self.TYPES[:4]):
            answer = self.typed(f"T_{topic_type}", kind, f"01TYPE{n:02d}")
            if topic_type in (kind, "MIXED"):
                self.assertEqual(answer.status.code, self.code("OK"), f"{kind} to {topic_type}: {answer.status.message}")
                stored.append(answer.entries[0].message_id)
                continue
            self.assertEqual((answer.status.code, answer.status.message), (
                self.code("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"),
                "org.apache.rocketmq.proxy.common.ProxyException: TopicMessageType validate failed, the expected "
                f"type is {topic_type}, but actual type is {kind}"), f"{kind} to {topic_type}")
        self.assertEqual(len(stored), 8)
        # the 5.x Python SDK sends a FIFO message to the FIFO topic, a normal one to the normal topic
        events = run_driver({"op": "send", "endpoint": self.server.grpc, "topic": "T_FIFO",
                             "messages": [{"body": "in order", "group": "g2"}]})
        self.assertEqual([e["body"] for e in events if e["event"] == "sent"], ["in order"])

    def test_system_topics_refused(self) -> None:
        """Sends and routes to the broker's system topics are ILLEGAL_TOPIC, as the proxy's validateTopic answers;
        a retry topic is no system topic (and its sends are not type checked)."""
        d, s = self.d, self.s
        for topic in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TBW102",
                      "DefaultCluster", "DefaultCluster_REPLY_TOPIC", "rmq_sys_wheel_timer", "OFFSET_MOVED_EVENT",
                      "SELF_TEST_TOPIC", "CHECKPOINT_TOPIC"):
            msg = d.Message(topic=d.Resource(name=topic), body=b"x",
                            system_properties=d.SystemProperties(message_type=d.MessageType.NORMAL, message_id="01SYS"))
            sent = self.stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=METADATA, timeout=10)
            self.assertEqual((sent.status.code, sent.status.message),
                             (self.code("ILLEGAL_TOPIC"), "cannot access system topic"), topic)
            route = self.stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=topic)), metadata=METADATA, timeout=10)
            self.assertEqual((route.status.code, route.status.message),
                             (self.code("ILLEGAL_TOPIC"), "cannot access system topic"), topic)
        retry = d.Message(topic=d.Resource(name="%RETRY%GID_nobody"), body=b"x",
                          system_properties=d.SystemProperties(message_type=d.MessageType.FIFO, message_id="01RTY",
                                                               message_group="g"))
        sent = self.stub.SendMessage(s.SendMessageRequest(messages=[retry]), metadata=METADATA, timeout=10)
        self.assertEqual(sent.status.code, self.code("TOPIC_NOT_FOUND"), sent.status.message)

    def test_ack_of_several_entries(self) -> None:
        """As the proxy sums an ack up: entries that all fail alike answer their code (by name), differing ones
        MULTIPLE_RESULTS, none INTERNAL_SERVER_ERROR; a system topic refuses the whole call."""
        d, s = self.d, self.s
        self.assertEqual(self.send("01ACK").status.code, self.code("OK"))
        got = [r.message for r in self.receive("GID_acks", 10_000, poll_s=3) if r.HasField("message")]
        self.assertEqual([m.system_properties.message_id for m in got], ["01ACK"])
        good = s.AckMessageEntry(message_id="01ACK", receipt_handle=got[0].system_properties.receipt_handle)
        bogus = [s.AckMessageEntry(message_id=f"01B{i}", receipt_handle=f"not a handle {i}") for i in range(2)]

        def ack(entries: list, topic: str = TOPIC) -> Any:
            return self.stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="GID_acks"),
                                                            topic=d.Resource(name=topic), entries=entries),
                                        metadata=METADATA, timeout=10)

        alike = ack(bogus)
        self.assertEqual((alike.status.code, alike.status.message),
                         (self.code("INTERNAL_SERVER_ERROR"), "INTERNAL_SERVER_ERROR"))
        self.assertEqual([e.status.code for e in alike.entries], [self.code("INTERNAL_SERVER_ERROR")] * 2)
        mixed = ack([good, bogus[0]])
        self.assertEqual((mixed.status.code, mixed.status.message), (self.code("MULTIPLE_RESULTS"), "MULTIPLE_RESULTS"))
        self.assertEqual([e.status.code for e in mixed.entries], [self.code("OK"), self.code("INTERNAL_SERVER_ERROR")])
        empty = ack([])
        self.assertEqual((empty.status.code, empty.status.message),
                         (self.code("INTERNAL_SERVER_ERROR"), "ack message result is empty"))
        system = ack(bogus, "SCHEDULE_TOPIC_XXXX")
        self.assertEqual((system.status.code, system.status.message, len(system.entries)),
                         (self.code("ILLEGAL_TOPIC"), "cannot access system topic", 0))


    def test_several_messages_are_checked_before_any_is_stored(self) -> None:
        """As the proxy's buildMessage: one refused message refuses the whole call (no entries, nothing stored),
        and the messages of one call share its first message's topic."""
        d, s = self.d, self.s

        def message(message_id: str, topic: str = TOPIC, tag: str = "") -> Any:
            return d.Message(topic=d.Resource(name=topic), body=b"x", system_properties=d.SystemProperties(
                message_type=d.MessageType.NORMAL, message_id=message_id, tag=tag))

        refused = self.stub.SendMessage(s.SendMessageRequest(messages=[message("01M1"), message("01M2", tag="a|b")]),
                                        metadata=METADATA, timeout=20)
        self.assertEqual((refused.status.code, refused.status.message, len(refused.entries)),
                         (self.code("ILLEGAL_MESSAGE_TAG"), "tag cannot contain '|'", 0))
        mixed = self.stub.SendMessage(s.SendMessageRequest(messages=[message("01M3"), message("01M4", "OTHER_TOPIC")]),
                                      metadata=METADATA, timeout=20)
        self.assertEqual((mixed.status.code, mixed.status.message, len(mixed.entries)),
                         (self.code("MESSAGE_CORRUPTED"), "topic in message is not same", 0))
        both = self.stub.SendMessage(s.SendMessageRequest(messages=[message("01M5"), message("01M6")]),
                                     metadata=METADATA, timeout=20)
        self.assertEqual([e.message_id for e in both.entries if e.status.code == self.code("OK")], ["01M5", "01M6"])
        got = [r.message.system_properties.message_id for r in self.receive("GID_several", 10_000, poll_s=3)
               if r.HasField("message")]
        self.assertNotIn("01M1", got)  # the refused call stored nothing
        self.assertNotIn("01M3", got)

    def test_consumer_calls_check_topic_and_group_first(self) -> None:
        """As the proxy's validateTopicAndConsumerGroup: a consumer's calls refuse a blank, malformed or system
        group, and a system topic, before anything else; EndTransaction checks its topic."""
        d, s = self.d, self.s
        group_cases = {"": "the specified group is blank", "GID bad": "the specified group[GID bad] contains illegal "
                       "characters, allowing only ^[%|a-zA-Z0-9_-]+$", "CID_RMQ_SYS_X": "cannot use system consumer group",
                       "G" * 256: "the specified group is longer than group max length 255."}
        illegal_group = self.code("ILLEGAL_CONSUMER_GROUP")
        for group, message in group_cases.items():
            ack = self.stub.AckMessage(s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=TOPIC),
                                                           entries=[s.AckMessageEntry(message_id="01X", receipt_handle="h")]),
                                       metadata=METADATA, timeout=10)
            self.assertEqual((ack.status.code, ack.status.message, len(ack.entries)), (illegal_group, message, 0), group)
            change = self.stub.ChangeInvisibleDuration(s.ChangeInvisibleDurationRequest(
                group=d.Resource(name=group), topic=d.Resource(name=TOPIC), receipt_handle="h", message_id="01X"),
                metadata=METADATA, timeout=10)
            self.assertEqual((change.status.code, change.status.message), (illegal_group, message), group)
            dlq = self.stub.ForwardMessageToDeadLetterQueue(s.ForwardMessageToDeadLetterQueueRequest(
                group=d.Resource(name=group), topic=d.Resource(name=TOPIC), receipt_handle="h", message_id="01X"),
                metadata=METADATA, timeout=10)
            self.assertEqual((dlq.status.code, dlq.status.message), (illegal_group, message), group)
            assignment = self.stub.QueryAssignment(s.QueryAssignmentRequest(group=d.Resource(name=group),
                                                                            topic=d.Resource(name=TOPIC)),
                                                   metadata=METADATA, timeout=10)
            self.assertEqual((assignment.status.code, assignment.status.message), (illegal_group, message), group)
            received = [r for r in self.receive(group, 10_000, poll_s=1) if r.HasField("status")]
            self.assertEqual([(r.status.code, r.status.message) for r in received], [(illegal_group, message)], group)
        system_topic = (self.code("ILLEGAL_TOPIC"), "cannot access system topic")
        change = self.stub.ChangeInvisibleDuration(s.ChangeInvisibleDurationRequest(
            group=d.Resource(name="GID_ok"), topic=d.Resource(name="SCHEDULE_TOPIC_XXXX"), receipt_handle="h"),
            metadata=METADATA, timeout=10)
        self.assertEqual((change.status.code, change.status.message), system_topic)
        ended = self.stub.EndTransaction(s.EndTransactionRequest(topic=d.Resource(name="RMQ_SYS_TRANS_HALF_TOPIC"),
                                                                 message_id="01X", transaction_id="t",
                                                                 resolution=d.TransactionResolution.COMMIT),
                                         metadata=METADATA, timeout=10)
        self.assertEqual((ended.status.code, ended.status.message), system_topic)


class MessageTypeCheckOffTest(_Endpoint):
    """enableTopicMessageTypeCheck=false (the proxy's switch, in broker.conf): any type goes to any topic, and the
    SDKs are told not to check."""

    conf = {"enableTopicMessageTypeCheck": "false"}

    def test_unchecked(self) -> None:
        d, s = self.d, self.s
        sysp = d.SystemProperties(message_type=d.MessageType.FIFO, message_id="01FIFO", message_group="g")
        msg = d.Message(topic=d.Resource(name=TOPIC), body=b"x", system_properties=sysp)
        sent = self.stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=METADATA, timeout=10)
        self.assertEqual(sent.status.code, self.code("OK"), sent.status.message)
        settings = d.Settings(client_type=d.ClientType.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=TOPIC)]))
        replies = self.stub.Telemetry(iter([s.TelemetryCommand(settings=settings)]), metadata=METADATA, timeout=10)
        self.assertFalse(next(iter(replies)).settings.publishing.validate_message_type)
