"""The same gRPC requests against Apache RocketMQ 5.4.0's proxy (Local mode, testkit/apache5.py) and against
rmqtx's standalone with ``--grpc-port``: rmqtx must answer each with Apache's ``status.code`` (issue 28: "same
successes, same refusals"). Messages may differ, except where Apache's names a token a client may match on, and
the topic message-type, system-topic and ack-summary refusals, which must be Apache's word for word.

Raw grpcio calls with the SDK's generated classes, plus the Python SDK's own send, receive and ack through
interop/py5/driver.py. Slow (two JVMs start and stop; 60-100 s in all): run in the trial env only. On a
mismatch the failure shows one table of every case, Apache's answer beside rmqtx's, then every message.
"""

from __future__ import annotations

import json
import os
import queue
import re
import threading
import time
import unittest
from dataclasses import dataclass, field
from typing import Any, Callable

from testkit.apache5 import BROKER_NAME, ApacheProxy
from testkit.py5 import PY5_VENV, grpc_standalone, run_driver

MIB = 1024 * 1024
SETTINGS_RACE = 'because "settings" is null'
#: Cases where rmqtx may answer otherwise, each with why (reviewed; empty until a difference is chosen).
ALLOWED_DIFFERENCES: dict[str, str] = {
    "send_to_%RETRY%GID_vs_nobody": "the proxy does not type-check retry topics, and Apache 5.4.0's Local mode then "
                                    "fails on one its broker does not have (a NullPointerException in "
                                    "LocalTopicRouteService.toTopicRouteData: INTERNAL_SERVER_ERROR); rmqtx answers "
                                    "TOPIC_NOT_FOUND, as for any topic it does not have",
}
#: Apache's messages rmqtx must answer word for word (the message-type and system-topic refusals, the ack summary).
EXACT_MESSAGES = re.compile(r"org\.apache\.rocketmq\.proxy\.common\.ProxyException: TopicMessageType validate failed.*"
                            r"|cannot access system topic|ack message result is empty|cannot use system consumer group"
                            r"|the specified group is blank|topic in message is not same|no message to send")
#: 5.x topic message types (``mqadmin updateTopic -a +message.type=X``) and the SDK's message types sent to them.
TOPIC_TYPES = ("FIFO", "DELAY", "TRANSACTION")
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")
#: The SDK's own headers (a Python 5.x client), so both servers see ordinary clients.
CLIENT_VERSION = "5.0.6"


@dataclass
class Answer:
    """What one case got: a Code name and the status message, or the gRPC error the call raised."""

    code: str
    message: str = ""

    def __str__(self) -> str:
        text = self.message.replace("\n", " ")
        return f"{self.code} ({text[:70]})" if text else self.code


@dataclass
class Prober:
    """Runs every case against one gRPC endpoint with raw grpcio calls and the SDK's generated classes."""

    address: str
    create_topic: Callable[..., None]  # (topic, queues, message_type="")
    answers: dict[str, Answer] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
        import grpc

        from rmqtx.grpc import stubs

        self.grpc = grpc
        self.d, self.s, service = stubs.load()
        self.channel = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", 64 * MIB)])
        self.stub = service.MessagingServiceStub(self.channel)
        self._ids = 0
        self._streams: list[tuple[queue.Queue, Any]] = []

    # -- plumbing ---------------------------------------------------------------------------------------------------
    def meta(self, client: str) -> tuple[tuple[str, str], ...]:
        return (("x-mq-client-id", f"rmqtx-vs-apache-{client}@{os.getpid()}"), ("x-mq-language", "PYTHON"),
                ("x-mq-client-version", CLIENT_VERSION), ("x-mq-protocol", "v2"))

    def code_name(self, code: int) -> str:
        return self.d.Code.Name(code)

    def record(self, case: str, call: Callable[[], Any]) -> Any:
        """Run ``call``; keep its status (the first status of a stream) or the RpcError's code."""
        try:
            resp = call()
        except self.grpc.RpcError as exc:
            self.answers[case] = Answer(f"rpc:{exc.code().name}", exc.details() or "")
            return None
        status = resp.status if not isinstance(resp, list) else next((r.status for r in resp if r.HasField("status")), None)
        self.answers[case] = Answer(self.code_name(status.code), status.message) if status is not None else Answer("no status")
        return resp

    def message_id(self) -> str:
        self._ids += 1
        return f"01{os.getpid() % 65536:04X}{int(time.time()):08X}{self._ids:018X}"

    def message(self, topic: str, body: bytes = b"hello", **system: Any) -> Any:
        d = self.d
        user = system.pop("user", {})
        props = d.SystemProperties(message_type=d.MessageType.NORMAL, message_id=self.message_id(),
                                   body_encoding=d.Encoding.IDENTITY, born_host="127.0.0.1", **system)
        props.born_timestamp.FromMilliseconds(int(time.time() * 1000))
        return d.Message(topic=d.Resource(name=topic), body=body, user_properties=user, system_properties=props)

    def send(self, case: str, topic: str, body: bytes = b"hello", **system: Any) -> Any:
        msg = self.message(topic, body, **system)
        resp = self.record(case, lambda: self.stub.SendMessage(self.s.SendMessageRequest(messages=[msg]),
                                                                metadata=self.meta("producer"), timeout=15))
        if resp is not None and resp.entries and self.answers[case].code != self.code_name(resp.entries[0].status.code):
            self.notes[case] = f"entry {self.code_name(resp.entries[0].status.code)}"
        return resp

    def telemetry(self, client: str, settings: Any) -> None:
        """Open the client's Telemetry stream with its settings and keep it open, as the SDK does; the
        proxy reads a consumer's settings (its backoff, FIFO flag) from there."""
        requests: queue.Queue = queue.Queue()
        requests.put(self.s.TelemetryCommand(settings=settings))

        def feed():
            while (item := requests.get()) is not None:
                yield item

        replies = self.stub.Telemetry(feed(), metadata=self.meta(client), timeout=300)
        first = next(iter(replies))
        if not first.HasField("settings"):
            raise AssertionError(f"{self.address}: Telemetry answered {first}")
        self._streams.append((requests, replies))

    def receive(self, case: str, group: str, topic: str, invisible_ms: int, poll_s: int = 5) -> list:
        d, s = self.d, self.s
        request = s.ReceiveMessageRequest(
            group=d.Resource(name=group), batch_size=16, auto_renew=False,
            message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=-1, broker=d.Broker(name=BROKER_NAME)),
            filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"))
        request.invisible_duration.FromMilliseconds(invisible_ms)
        request.long_polling_timeout.FromSeconds(poll_s)
        answers = self.record(case, lambda: list(self.stub.ReceiveMessage(request, metadata=self.meta("consumer"),
                                                                         timeout=poll_s + 10)))
        messages = [r.message for r in answers or [] if r.HasField("message")]
        if messages:
            self.notes[case] = f"{len(messages)} message(s): {[m.body[:16] for m in messages]}"
        return messages

    def ack(self, case: str, group: str, topic: str, message_id: str, handle: str) -> None:
        d, s = self.d, self.s
        request = s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                      entries=[s.AckMessageEntry(message_id=message_id, receipt_handle=handle)])
        resp = self.record(case, lambda: self.stub.AckMessage(request, metadata=self.meta("consumer"), timeout=10))
        if resp is not None and resp.entries:
            self.notes[case] = f"entry {self.code_name(resp.entries[0].status.code)}: {resp.entries[0].status.message[:200]}"

    def change(self, case: str, group: str, topic: str, message: Any, invisible_ms: int) -> str:
        """The receipt handle to use from now on: the new one when the change was made."""
        d, s = self.d, self.s
        handle = message.system_properties.receipt_handle
        request = s.ChangeInvisibleDurationRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                                   message_id=message.system_properties.message_id, receipt_handle=handle)
        request.invisible_duration.FromMilliseconds(invisible_ms)
        resp = self.record(case, lambda: self.stub.ChangeInvisibleDuration(request, metadata=self.meta("consumer"), timeout=10))
        return resp.receipt_handle if resp is not None and resp.receipt_handle else handle

    def close(self) -> None:
        for requests, replies in self._streams:
            requests.put(None)
            replies.cancel()
        self.channel.close()

    # -- the cases ----------------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Answer]:
        d = self.d
        send_topic, recv_topic = "VS_SEND", "VS_RECV"
        self.create_topic(send_topic, 4)
        self.create_topic(recv_topic, 1)
        self.telemetry("producer", d.Settings(
            client_type=d.ClientType.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=send_topic),
                                                                              d.Resource(name=recv_topic)]),
            user_agent=d.UA(language=d.Language.PYTHON, version=CLIENT_VERSION)))
        for group in ("GID_vs_ok", "GID_vs_expired", "GID_vs_invisible", "GID_vs_invisible_12h", "GID_vs_multi"):
            self.telemetry("consumer", d.Settings(
                client_type=d.ClientType.SIMPLE_CONSUMER,
                subscription=d.Subscription(group=d.Resource(name=group), subscriptions=[d.SubscriptionEntry(
                    topic=d.Resource(name=recv_topic), expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"))]),
                user_agent=d.UA(language=d.Language.PYTHON, version=CLIENT_VERSION)))

        self.record("query_route_unknown_topic", lambda: self.stub.QueryRoute(
            self.s.QueryRouteRequest(topic=d.Resource(name="VS_NO_SUCH_TOPIC")), metadata=self.meta("producer"), timeout=10))
        self.send("send_ok", recv_topic, b"hello", tag="TagA", keys=["k1"])

        # a handle that expires while the other cases run: received with the least invisible time a receive may ask
        expiring = self.receive("receive_invisible_10s", "GID_vs_expired", recv_topic, 10_000)
        expiring_at = time.monotonic() + 10

        got = self.receive("receive_ok", "GID_vs_ok", recv_topic, 30_000)
        if got:
            self.change("change_invisible_negative", "GID_vs_ok", recv_topic, got[0], -1_000)
            self.change("change_invisible_13h", "GID_vs_ok", recv_topic, got[0], 13 * 3600 * 1000)
            handle = self.change("change_invisible_12h", "GID_vs_ok", recv_topic, got[0], 12 * 3600 * 1000)
            self.ack("ack_ok", "GID_vs_ok", recv_topic, got[0].system_properties.message_id, handle)
        self.ack("ack_bogus_handle", "GID_vs_ok", recv_topic, "01AA", "not a handle")
        # well formed and unexpired, but never given out: an offset nothing was received from
        unknown = f"0 {int(time.time() * 1000)} 60000 0 0 {BROKER_NAME} 0 7 0"
        self.ack("ack_unknown_handle", "GID_vs_ok", recv_topic, "01AB", unknown)
        self.receive("receive_invisible_5s", "GID_vs_invisible", recv_topic, 5_000)
        self.receive("receive_invisible_13h", "GID_vs_invisible", recv_topic, 13 * 3600 * 1000)
        self.receive("receive_invisible_12h", "GID_vs_invisible_12h", recv_topic, 12 * 3600 * 1000)

        self.send("send_unknown_topic", "VS_NO_SUCH_TOPIC")
        self.send("send_tag_control_char", send_topic, tag="a\x01b")
        self.send("send_tag_whitespace", send_topic, tag=" ")
        self.send("send_key_control_char", send_topic, keys=["k\x02"])
        self.send("send_key_whitespace", send_topic, keys=[" "])
        self.send("send_property_name_control_char", send_topic, user={"p\x03q": "v"})
        self.send("send_property_value_control_char", send_topic, user={"p": "v\x04w"})
        self.send("send_128_user_properties", send_topic, user={f"p{i}": "v" for i in range(128)})
        self.send("send_129_user_properties", send_topic, user={f"p{i}": "v" for i in range(129)})
        # the limit counts the UTF-8 bytes of every property name and value, the tag and the keys
        self.send("send_user_properties_16384_bytes", send_topic, user={"big": "v" * (16 * 1024 - 3)})
        self.send("send_user_properties_16385_bytes", send_topic, user={"big": "v" * (16 * 1024 - 2)})
        self.send("send_user_properties_16385_bytes_with_tag_and_key", send_topic, tag="T", keys=["K"],
                  user={"big": "v" * (16 * 1024 - 4)})
        self.send("send_UNIQ_KEY_as_user_property", send_topic, user={"UNIQ_KEY": "01ABCDEF"})
        self.send("send_body_4MiB", send_topic, b"x" * (4 * MIB))
        self.send("send_body_4MiB_plus_1", send_topic, b"x" * (4 * MIB + 1))

        self.message_type_cases(send_topic)
        self.system_topic_cases()
        self.ack_summary_cases(recv_topic)
        self.group_check_cases(recv_topic)
        self.several_messages_cases(send_topic)
        self.sdk_cases()
        if expiring:
            handle = expiring[0].system_properties.receipt_handle
            fields = handle.split(" ")
            self.notes["receipt_handle"] = handle
            if len(fields) > 2 and fields[1].isdigit():  # the pop time, an hour earlier: expired long ago
                forged = " ".join([fields[0], str(int(fields[1]) - 3600_000), *fields[2:]])
                self.ack("ack_forged_expired_handle", "GID_vs_expired", recv_topic,
                         expiring[0].system_properties.message_id, forged)
            time.sleep(max(0.0, expiring_at + 1 - time.monotonic()))
            self.ack("ack_expired_handle", "GID_vs_expired", recv_topic, expiring[0].system_properties.message_id, handle)
        return self.answers

    def typed_message(self, topic: str, kind: str) -> Any:
        """A message of ``kind`` as the SDKs build one (FIFO: a message group; DELAY: a delivery timestamp)."""
        d = self.d
        msg = self.message(topic, b"typed")
        msg.system_properties.message_type = d.MessageType.Value(kind)
        if kind == "FIFO":
            msg.system_properties.message_group = "vs-group"
        elif kind == "DELAY":
            msg.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 60_000)
        return msg

    def message_type_cases(self, normal_topic: str) -> None:
        """Each message type sent to a NORMAL topic and to FIFO, DELAY and TRANSACTION topics; each topic's route
        (its accept_message_types as the case's code); a recall on a topic that is not DELAY."""
        d, s = self.d, self.s
        topics = {"NORMAL": normal_topic}
        for kind in TOPIC_TYPES:
            topics[kind] = f"VS_{kind}"
            self.create_topic(topics[kind], 1, kind)
        for topic_type, topic in topics.items():
            route = self.record(f"route_{topic_type}_topic", lambda: self.stub.QueryRoute(
                s.QueryRouteRequest(topic=d.Resource(name=topic)), metadata=self.meta("producer"), timeout=10))
            if route is not None and route.message_queues:
                accepts = "+".join(d.MessageType.Name(t) for t in route.message_queues[0].accept_message_types)
                self.answers[f"route_{topic_type}_topic_accepts"] = Answer(accepts)
            for kind in MESSAGE_TYPES:
                msg = self.typed_message(topic, kind)
                case = f"send_{kind}_to_{topic_type}_topic"
                self.record(case, lambda: self.stub.SendMessage(s.SendMessageRequest(messages=[msg]),
                                                                metadata=self.meta("producer"), timeout=15))
        self.record("recall_on_NORMAL_topic", lambda: self.stub.RecallMessage(
            s.RecallMessageRequest(topic=d.Resource(name=normal_topic), recall_handle="bm90IGEgaGFuZGxl"),
            metadata=self.meta("producer"), timeout=10))

    def system_topic_cases(self) -> None:
        """Sends (and a route) to the broker's system topics; a retry topic is none."""
        d, s = self.d, self.s
        for topic in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "TBW102", "DefaultCluster",
                      "rmq_sys_wheel_timer", "%RETRY%GID_vs_nobody"):
            self.send(f"send_to_{topic}", topic)
        self.record("query_route_TBW102", lambda: self.stub.QueryRoute(
            s.QueryRouteRequest(topic=d.Resource(name="TBW102")), metadata=self.meta("producer"), timeout=10))

    def several_messages_cases(self, topic: str) -> None:
        """One call of several messages: one refused (by its tag), two topics, none at all; the entries noted."""
        s = self.s

        def send(case: str, messages: list) -> None:
            resp = self.record(case, lambda: self.stub.SendMessage(s.SendMessageRequest(messages=messages),
                                                                    metadata=self.meta("producer"), timeout=15))
            if resp is not None:
                self.notes[case] = f"{len(resp.entries)} entries"

        send("send_two_one_bad_tag", [self.message(topic), self.message(topic, tag="a|b")])
        send("send_two_topics", [self.message(topic), self.message("VS_OTHER_TOPIC")])
        send("send_no_messages", [])

    def group_check_cases(self, topic: str) -> None:
        """A consumer's calls with a blank or a system group, or on a system topic; EndTransaction on one."""
        d, s, meta = self.d, self.s, self.meta("consumer")
        entry = [s.AckMessageEntry(message_id="01G", receipt_handle="not a handle")]
        for case, group in (("system_group", "CID_RMQ_SYS_VS"), ("blank_group", "")):
            self.record(f"ack_{case}", lambda g=group: self.stub.AckMessage(s.AckMessageRequest(
                group=d.Resource(name=g), topic=d.Resource(name=topic), entries=entry), metadata=meta, timeout=10))
            self.record(f"forward_to_dlq_{case}", lambda g=group: self.stub.ForwardMessageToDeadLetterQueue(
                s.ForwardMessageToDeadLetterQueueRequest(group=d.Resource(name=g), topic=d.Resource(name=topic),
                                                         receipt_handle="not a handle", message_id="01G"),
                metadata=meta, timeout=10))
            self.record(f"query_assignment_{case}", lambda g=group: self.stub.QueryAssignment(
                s.QueryAssignmentRequest(group=d.Resource(name=g), topic=d.Resource(name=topic)), metadata=meta, timeout=10))
        self.record("change_invisible_system_topic", lambda: self.stub.ChangeInvisibleDuration(
            s.ChangeInvisibleDurationRequest(group=d.Resource(name="GID_vs_ok"), topic=d.Resource(name="SCHEDULE_TOPIC_XXXX"),
                                             receipt_handle="not a handle", message_id="01G"), metadata=meta, timeout=10))
        self.record("end_transaction_system_topic", lambda: self.stub.EndTransaction(
            s.EndTransactionRequest(topic=d.Resource(name="RMQ_SYS_TRANS_HALF_TOPIC"), message_id="01G", transaction_id="t",
                                    resolution=d.TransactionResolution.COMMIT), metadata=self.meta("producer"), timeout=10))

    def ack_summary_cases(self, topic: str) -> None:
        """Acks of several entries: all failing alike, one good and one failing, none at all."""
        d, s = self.d, self.s

        def ack(case: str, entries: list) -> None:
            request = s.AckMessageRequest(group=d.Resource(name="GID_vs_multi"), topic=d.Resource(name=topic),
                                          entries=entries)
            resp = self.record(case, lambda: self.stub.AckMessage(request, metadata=self.meta("consumer"), timeout=10))
            if resp is not None:
                self.notes[case] = " ".join(self.code_name(e.status.code) for e in resp.entries)

        bogus = [s.AckMessageEntry(message_id=f"01B{i}", receipt_handle=f"not a handle {i}") for i in range(2)]
        ack("ack_two_bogus_handles", bogus)
        ack("ack_no_entries", [])
        self.send("send_for_multi_ack", topic)
        got = self.receive("receive_for_multi_ack", "GID_vs_multi", topic, 30_000)
        if got:
            good = s.AckMessageEntry(message_id=got[0].system_properties.message_id,
                                     receipt_handle=got[0].system_properties.receipt_handle)
            ack("ack_good_and_bogus", [good, bogus[0]])

    def sdk_cases(self) -> None:
        """The 5.x Python SDK's ordinary use through interop/py5/driver.py: its send, its SimpleConsumer's
        receive and ack, and one send the server should refuse (SENT or REFUSED, the SDK's error as message)."""
        topic = "VS_SDK"
        self.create_topic(topic, 4)
        specs = [{"body": f"sdk-{i}", "tag": "TagS", "keys": [f"key-{i}"], "props": {"p": str(i)}} for i in range(3)]

        def driver(case: str, params: dict, ok: Callable[[list[dict]], bool]) -> None:
            for attempt in range(3):
                try:
                    events = run_driver({"endpoint": self.address, "topic": topic, **params}, timeout=120)
                    break
                except AssertionError as exc:
                    self.answers[case] = Answer("DRIVER_ERROR", str(exc)[:300])
                    # Apache's proxy fails a receive that overtakes the client's first Telemetry settings
                    # (an NPE, INTERNAL_SERVER_ERROR) and the SDK sends both at once: a race on a busy machine
                    if SETTINGS_RACE not in str(exc):
                        return
                    self.notes[case] = f"attempt {attempt + 1} lost the settings race"
            else:
                return
            self.answers[case] = Answer("OK" if ok(events) else "INCOMPLETE", "" if ok(events) else json.dumps(events)[:300])

        driver("sdk_send", {"op": "send", "messages": specs}, lambda ev: len([e for e in ev if e["event"] == "sent"]) == 3)
        driver("sdk_receive_and_ack", {"op": "consume", "group": "GID_vs_sdk", "expect": 3, "wait": 40, "invisible": 15},
               lambda ev: {e["body"] for e in ev if e["event"] == "acked"} == {s["body"] for s in specs})
        try:
            events = run_driver({"op": "refused_send", "endpoint": self.address, "topic": topic, "timeout": 5,
                                 "messages": [{"body": "many", "props": {f"p{i}": "v" for i in range(129)}}]}, timeout=120)
        except AssertionError as exc:
            self.answers["sdk_send_129_user_properties"] = Answer("DRIVER_ERROR", str(exc)[:300])
        else:
            last = events[-1] if events else {"event": "none"}
            self.answers["sdk_send_129_user_properties"] = Answer(last["event"].upper(), last.get("error", ""))


def token(message: str) -> str | None:
    """Apache's message when it is a bare code-like token (``INVALID_RECEIPT_HANDLE``), which a client may match on."""
    return message if re.fullmatch(r"[A-Z][A-Z_]+", message) else None


def verdict(apache: Answer, ours: Answer) -> str:
    """'' when rmqtx answers as Apache did: the same code and, where Apache's message is a token, that token."""
    if apache.code != ours.code:
        return "code differs"
    named = token(apache.message)
    if named and named not in ours.message:
        return f"message lacks {named}"
    if EXACT_MESSAGES.fullmatch(apache.message) and apache.message != ours.message:
        return "message differs"
    return ""


def table(apache: dict[str, Answer], ours: dict[str, Answer], notes: dict[str, dict[str, str]]) -> str:
    """One row per case (codes and verdict), then every message in full and the notes."""
    cases = list(dict.fromkeys([*apache, *ours]))
    rows = [("case", "Apache 5.4.0", "rmqtx", "")]
    rows += [(c, apache.get(c, Answer("-")).code, ours.get(c, Answer("-")).code,
              verdict(apache.get(c, Answer("-")), ours.get(c, Answer("-")))) for c in cases]
    rows = [(c, a, o, f"{v} (allowed: {ALLOWED_DIFFERENCES[c]})" if v and c in ALLOWED_DIFFERENCES else v)
            for c, a, o, v in rows]
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [" | ".join(r[i].ljust(width[i]) for i in range(3)) + (f" <-- {r[3]}" if r[3] else "") for r in rows]
    for side, answers in (("apache", apache), ("rmqtx", ours)):
        lines += [f"{side} {c}: {a.message!r}" for c, a in answers.items()]
    for side, extra in notes.items():
        lines += [f"{side} {c} note: {text}" for c, text in extra.items()]
    return "\n".join(lines)


class VersusApacheTest(unittest.TestCase):
    """One run of every case per server (each JVM start costs 15-20 s), then one comparison."""

    def test_same_codes_as_apache_proxy(self) -> None:
        apache_pair = ApacheProxy()
        self.addCleanup(apache_pair.close)
        apache_pair.start()
        prober = Prober(apache_pair.grpc, apache_pair.create_topic)
        try:
            apache = prober.run()
        finally:
            prober.close()
        apache_notes = prober.notes
        # the JVMs take about 20 s to shut down (their executors' grace periods): meanwhile rmqtx runs
        stopping = threading.Thread(target=apache_pair.close, daemon=True)
        stopping.start()
        self.addCleanup(stopping.join, 60)

        server = grpc_standalone(by_option=True).start()
        self.addCleanup(server.close)
        prober = Prober(server.grpc, server.create_topic)
        try:
            ours = prober.run()
        finally:
            prober.close()
        clean = server.stop()
        report = table(apache, ours, {"apache": apache_notes, "rmqtx": prober.notes})
        print(f"\n{report}")
        differing = [case for case in apache
                     if verdict(apache[case], ours.get(case, Answer("-"))) and case not in ALLOWED_DIFFERENCES]
        self.assertEqual(differing, [], f"rmqtx answers differently from Apache 5.4.0's proxy:\n{report}")
        self.assertEqual(apache["send_ok"].code, "OK", report)
        self.assertIn("ack_ok", apache, f"Apache delivered nothing to the ordinary receive:\n{report}")
        self.assertTrue(clean, f"standalone with gRPC did not shut down cleanly\n{server.log()}")
