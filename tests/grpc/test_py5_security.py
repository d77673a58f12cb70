"""ACL and TLS on the gRPC endpoint with the official 5.x Python SDK and raw signed gRPC calls.

ACL: the SDK with the right keys sends and consumes; a wrong secret, an unknown key, no credentials and
a missing permission are refused with Code UNAUTHORIZED and ACL 1.0's message, and nothing is stored.
TLS: enforcing serves the SDK over TLS (its certificate checked against the test CA) and turns a plain
SDK away; permissive (with the ACL) serves both on the one port.
"""

from __future__ import annotations

import binascii
import hmac
import os
import shutil
import socket
import ssl
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any

from rmqtx.acl.signing import sign_request
from rmqtx.remoting.codes import RequestCode
from testkit.ports import free_port
from testkit.py5 import PY5_VENV, GrpcServerTest, pull_topic, run_driver
from tests.security.acl_support import raw_call, signed
from tests.security.certs import make_certs
from tests.security.test_tls import TlsStandalone, call_over

USER, USER_SK = "GrpcUser", "grpc-user-secret"  # publish and subscribe
READER, READER_SK = "GrpcReader", "grpc-reader-secret"  # subscribe only
DENIED, DENIED_SK = "GrpcDenied", "grpc-denied-secret"  # topics yes, the group GroupD no
ADMIN, ADMIN_SK = "GrpcAdmin", "grpc-admin-secret"
ACL_YML = f"""\
globalWhiteRemoteAddresses: []
accounts:
- accessKey: {USER}
  secretKey: {USER_SK}
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: SUB
- accessKey: {READER}
  secretKey: {READER_SK}
  admin: false
  defaultTopicPerm: SUB
  defaultGroupPerm: SUB
- accessKey: {DENIED}
  secretKey: {DENIED_SK}
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: SUB
  groupPerms:
  - GroupD=DENY
- accessKey: {ADMIN}
  secretKey: {ADMIN_SK}
  admin: true
"""
SECRETS = (USER_SK, READER_SK, DENIED_SK, ADMIN_SK)
QUEUES = 4


def keys(ak: str, sk: str) -> dict[str, str]:
    return {"access_key": ak, "secret_key": sk}


def metadata(ak: str | None, sk: str | None, date_time: str = "20261123T051500Z", signature: str | None = None) -> list:
    """What the 5.x SDKs send: x-mq-date-time and the MQv2-HMAC-SHA1 authorization over it."""
    out = [("x-mq-client-id", "rmqtx-test@1"), ("x-mq-date-time", date_time)]
    if ak is not None:
        sign = signature or binascii.hexlify(hmac.digest(sk.encode(), date_time.encode(), "sha1")).decode()
        out.append(("authorization", f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sign}"))
    return out


def load_stubs() -> tuple[Any, Any, Any]:
    """The generated classes, from the py5 venv (as the broker loads them)."""
    from rmqtx.grpc import stubs

    os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
    return stubs.load()


def refusals(events: list[dict]) -> dict[str, str]:
    return {e["body"]: e["error"] for e in events if e["event"] == "refused"}


class GrpcAclTest(GrpcServerTest):
    """aclEnable=true: the gRPC calls are checked with plain_acl.yml's accounts, as remoting's are. TLS is
    permissive (one standalone for both): plain and TLS SDKs on the one gRPC port, through rmqtx's front."""

    topic_prefix = "GACL"

    def setUp(self) -> None:
        self.acl_dir = Path(tempfile.mkdtemp(prefix="rmqtx-grpc-acl-"))
        (self.acl_dir / "plain_acl.yml").write_text(ACL_YML)
        self.conf = {"aclEnable": "true", "aclFilePath": str(self.acl_dir / "plain_acl.yml"),
                     "tls.server.mode": "permissive"}
        super().setUp()

    def tearDown(self) -> None:
        log = self.server.log_path.read_text() if self.server.log_path.exists() else ""
        try:
            super().tearDown()
        finally:
            shutil.rmtree(self.acl_dir, ignore_errors=True)
        for secret in SECRETS:
            self.assertNotIn(secret, log)

    def _topic(self, name: str) -> str:
        topic = f"{self.topic_prefix}_{name}_{int(time.time() * 1000) % 10**8}"
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": QUEUES, "writeQueueNums": QUEUES,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        resp = raw_call(self.server.broker, signed(RequestCode.UPDATE_AND_CREATE_TOPIC, fields, ak=ADMIN, sk=ADMIN_SK))
        self.assertEqual(resp.code, 0, resp.remark)
        return topic

    def stored(self, topic: str) -> int:
        """Messages in the topic: the queues' max offsets, asked with the admin's keys."""
        total = 0
        for queue in range(QUEUES):
            ask = signed(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue}, ak=ADMIN, sk=ADMIN_SK)
            resp = raw_call(self.server.broker, ask)
            self.assertEqual(resp.code, 0, resp.remark)
            total += int(resp.ext_fields["offset"])
        return total

    def stored_bodies(self, topic: str) -> set[str]:
        def ask(addr: str, request: Any) -> Any:
            sign_request(request, ADMIN, ADMIN_SK)
            return raw_call(addr, request)

        return {m.body.decode() for msgs in pull_topic(self.server.broker, topic, QUEUES, ask).values() for m in msgs}

    def send(self, topic: str, acl: dict | None, *bodies: str, tls: bool = False) -> list[dict]:
        return run_driver({"op": "refused_send", "endpoint": self.server.grpc, "topic": topic, "acl": acl,
                           "messages": [{"body": b} for b in bodies], "timeout": 3, "tls": tls})

    def test_sdk_right_keys_pass_and_wrong_ones_are_refused(self) -> None:
        topic = self._topic("sdk")
        sent = [e for e in self.send(topic, keys(USER, USER_SK), "ok-1") if e["event"] == "sent"]
        sent += [e for e in self.send(topic, keys(USER, USER_SK), "ok-2", tls=True) if e["event"] == "sent"]
        self.assertEqual([e["body"] for e in sent], ["ok-1", "ok-2"], "plain and TLS on the one permissive port")
        cases = {
            "wrong-secret": (keys(USER, "not-the-secret"), f"Check signature failed for accessKey={USER}"),
            "unknown-key": (keys("GrpcNobody", USER_SK), "No acl config for GrpcNobody"),
            "no-keys": (None, "No accessKey is configured"),
            "no-pub": (keys(READER, READER_SK), f"No default permission for topic:{topic}"),
        }
        for body, (acl, why) in cases.items():
            refused = refusals(self.send(topic, acl, body))
            self.assertIn(body, refused, body)
            self.assertIn(f"40100, {why}", refused[body], body)  # Code.UNAUTHORIZED, ACL's message
        self.assertEqual(self.stored(topic), 2, "only the two signed sends are stored")
        self.assertEqual(self.stored_bodies(topic), {"ok-1", "ok-2"})
        # a subscriber's SimpleConsumer: receive and ack need SUB on the topic and the group
        events = run_driver({"op": "consume", "endpoint": self.server.grpc, "topic": topic, "group": "GroupR",
                             "acl": keys(READER, READER_SK), "expect": 2, "wait": 20, "invisible": 20, "await": 1})
        self.assertEqual(sorted(e["body"] for e in events if e["event"] == "acked"), ["ok-1", "ok-2"])

    def test_raw_calls_get_apache_status_codes(self) -> None:
        import grpc

        topic = self._topic("raw")
        d, s, service = load_stubs()
        unauthorized = d.Code.Value("UNAUTHORIZED")
        with grpc.insecure_channel(self.server.grpc) as channel:
            stub = service.MessagingServiceStub(channel)
            route = s.QueryRouteRequest(topic=d.Resource(name=topic))

            def status(call: Any, request: Any, meta: list) -> Any:
                return call(request, metadata=meta, timeout=10).status

            ok = status(stub.QueryRoute, route, metadata(USER, USER_SK))
            self.assertEqual(ok.code, d.Code.Value("OK"), ok.message)
            wrong_hex = "00" * 20
            for meta, why in [
                (metadata(None, None), "No accessKey is configured"),
                (metadata(USER, USER_SK, signature=wrong_hex), f"Check signature failed for accessKey={USER}"),
                (metadata(USER, USER_SK, signature="not-hex"), "not hex"),
                ([m for m in metadata(USER, USER_SK) if m[0] != "x-mq-date-time"], "Check signature failed"),
            ]:
                got = status(stub.QueryRoute, route, meta)
                self.assertEqual((got.code, why in got.message), (unauthorized, True), got.message)
            message = d.Message(topic=d.Resource(name=topic), body=b"raw",
                                system_properties=d.SystemProperties(message_id="01RAW", body_encoding=d.Encoding.IDENTITY,
                                                                     message_type=d.MessageType.NORMAL))
            refused = status(stub.SendMessage, s.SendMessageRequest(messages=[message]), metadata(READER, READER_SK))
            self.assertEqual((refused.code, refused.message), (unauthorized, f"No default permission for topic:{topic}"))
            receive = s.ReceiveMessageRequest(group=d.Resource(name="GroupD"), batch_size=1,
                                              message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=-1))
            first = next(iter(stub.ReceiveMessage(receive, metadata=metadata(DENIED, DENIED_SK), timeout=10)))
            self.assertEqual((first.status.code, first.status.message), (unauthorized, "No default permission for group:GroupD"))
            # a consumer's heartbeat needs SUB on its group; a producer's needs nothing
            for kind, code in ((d.ClientType.SIMPLE_CONSUMER, unauthorized), (d.ClientType.PRODUCER, d.Code.Value("OK"))):
                beat = s.HeartbeatRequest(group=d.Resource(name="GroupD"), client_type=kind)
                self.assertEqual(status(stub.Heartbeat, beat, metadata(DENIED, DENIED_SK)).code, code, kind)
            # Telemetry: a refused command is answered with its status, and the stream goes on
            publish = d.Settings(client_type=d.ClientType.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=topic)]))
            entry = d.SubscriptionEntry(topic=d.Resource(name=topic), expression=d.FilterExpression(type=d.FilterType.TAG,
                                                                                                    expression="*"))
            subscribe = d.Settings(client_type=d.ClientType.SIMPLE_CONSUMER,
                                   subscription=d.Subscription(group=d.Resource(name="GroupR"), subscriptions=[entry]))
            commands = iter([s.TelemetryCommand(settings=publish), s.TelemetryCommand(settings=subscribe)])
            replies = list(stub.Telemetry(commands, metadata=metadata(READER, READER_SK), timeout=10))
            self.assertEqual([(r.status.code, r.status.message) for r in replies][:1],
                             [(unauthorized, f"No default permission for topic:{topic}")])
            self.assertEqual([(r.status.code, r.HasField("settings")) for r in replies][1:], [(d.Code.Value("OK"), True)])
        self.assertEqual(self.stored(topic), 0)


def mutual_tls_call(addr: str, request: Any, certs: dict[str, Path]) -> Any:
    """A remoting call over TLS with the test client certificate (the remoting ports require one here)."""
    context = ssl.create_default_context(cafile=str(certs["ca"]))
    context.check_hostname = False
    context.load_cert_chain(str(certs["client_cert"]), str(certs["client_key"]))
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw, context.wrap_socket(raw) as sock:
        return call_over(sock, request)


class GrpcTlsEnforcingTest(unittest.TestCase):
    """tls.server.mode=enforcing: the gRPC port speaks TLS only, with the broker's certificate. The remoting
    ports require client certificates; the gRPC port asks none (as Apache's proxy), and the endpoint's
    loopback to its broker presents the broker's own (tls.client.*)."""

    def setUp(self) -> None:
        os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))  # the broker (and the raw client) load the stubs
        self.dir = Path(tempfile.mkdtemp(prefix="rmqtx-grpc-tls-"))
        self.certs = make_certs(self.dir)
        port = free_port()
        certs = self.certs
        conf = {"grpcPort": str(port), "tls.server.mode": "enforcing", "tls.enable": "true",
                "tls.server.certPath": str(certs["server_cert"]), "tls.server.keyPath": str(certs["server_key"]),
                "tls.server.need.client.auth": "require", "tls.server.trustCertPath": str(certs["ca"]),
                "tls.client.certPath": str(certs["client_cert"]), "tls.client.keyPath": str(certs["client_key"])}
        self.server = TlsStandalone(conf, lambda s: "new broker registered" in s.log())
        self.server.grpc = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
        self.server.start()

    def tearDown(self) -> None:
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertTrue(clean, f"standalone did not shut down cleanly\n{log}")
        self.assertNotIn("Traceback", log)

    def test_sdk_over_tls_and_a_plain_sdk_turned_away(self) -> None:
        import grpc

        topic = f"GTLS_{int(time.time() * 1000) % 10**8}"
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": QUEUES, "writeQueueNums": QUEUES,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        create = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        self.assertEqual(mutual_tls_call(self.server.broker, create, self.certs).code, 0)
        base = {"op": "refused_send", "endpoint": self.server.grpc, "topic": topic, "timeout": 3}
        events = run_driver({**base, "tls": True, "tls_ca": str(self.certs["ca"]), "messages": [{"body": "over-tls"}]})
        sent = [e for e in events if e["event"] == "sent"]
        self.assertEqual([e["body"] for e in sent], ["over-tls"], events)
        self.assertGreaterEqual(sent[0]["offset"], 0)  # stored by the broker (over the TLS loopback)
        plain = run_driver({**base, "tls": False, "messages": [{"body": "plain"}]})
        self.assertIn("plain", refusals(plain), plain)
        d, s, service = load_stubs()  # a raw handshake against the test CA: the server name checked too
        creds = grpc.ssl_channel_credentials(self.certs["ca"].read_bytes())
        with grpc.secure_channel(self.server.grpc, creds) as channel:
            answer = service.MessagingServiceStub(channel).QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=topic)),
                                                                       timeout=10)
        self.assertEqual(answer.status.code, d.Code.Value("OK"))
