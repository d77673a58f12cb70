"""ACL 2.0 on the gRPC endpoint: the 5.x Python SDK and raw signed calls against a standalone started with
Apache 5.x's ACL 2.0 settings; users and ACLs made through the remoting admin codes. Refusals are Code
UNAUTHORIZED with Apache 5.4.0's proxy messages."""

from __future__ import annotations

import json
from typing import Any

from rmqtx.remoting.codes import RequestCode
from testkit.py5 import GrpcServerTest, run_driver
from tests.grpc.test_py5_security import load_stubs, metadata
from tests.security.acl_support import raw_call
from tests.security.test_acl2 import AUTH_CONF, SUPER_PW, SUPER_USER, acl_body, create_topic, request

ALICE, ALICE_PW = "alice", "alice-pw-1"


def keys(ak: str, sk: str) -> dict[str, str]:
    return {"access_key": ak, "secret_key": sk}


class GrpcAcl2Test(GrpcServerTest):
    conf = AUTH_CONF
    topic_prefix = "GACL2"

    def admin(self, cmd: Any) -> None:
        resp = raw_call(self.server.broker, cmd)
        self.assertEqual(resp.code, 0, resp.remark)

    def send(self, topic: str, acl: dict | None, *bodies: str) -> list[dict]:
        return run_driver({"op": "refused_send", "endpoint": self.server.grpc, "topic": topic, "acl": acl,
                           "messages": [{"body": b} for b in bodies], "timeout": 3, "tls": False})

    def test_sdk_and_raw_calls(self) -> None:
        import grpc

        allowed, denied = (f"{self.topic_prefix}_{n}" for n in ("Allowed", "Denied"))
        for topic in (allowed, denied):
            self.admin(create_topic(topic, (SUPER_USER, SUPER_PW)))
        self.admin(request(RequestCode.AUTH_CREATE_USER, {"username": ALICE}, json.dumps({"password": ALICE_PW}).encode()))
        self.admin(request(RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{ALICE}"}, acl_body(
            (f"Topic:{allowed}", ["Pub", "Sub"], "Allow"), (f"Topic:{denied}", ["Pub", "Sub"], "Deny"), ("Group:GA", ["Sub"], "Allow"))))
        sent = [e["body"] for e in self.send(allowed, keys(ALICE, ALICE_PW), "ok-1") if e["event"] == "sent"]
        self.assertEqual(sent, ["ok-1"])
        ip = "127.0.0.1"
        cases = {
            "wrong-secret": (keys(ALICE, "not-the-secret"), allowed, "check signature failed."),
            "unknown-user": (keys("ghost", ALICE_PW), allowed, "User:ghost is not found."),
            "no-keys": (None, allowed, "username cannot be null."),
            "denied": (keys(ALICE, ALICE_PW), denied, f"User:{ALICE} has no permission to access Topic:{denied} from {ip}, the decision is deny."),
        }
        for body, (acl, topic, why) in cases.items():
            refused = {e["body"]: e["error"] for e in self.send(topic, acl, body) if e["event"] == "refused"}
            self.assertIn(body, refused, body)
            self.assertIn(f"40100, {why}", refused[body], body)
        events = run_driver({"op": "consume", "endpoint": self.server.grpc, "topic": allowed, "group": "GA",
                             "acl": keys(ALICE, ALICE_PW), "expect": 1, "wait": 20, "invisible": 20, "await": 1})
        self.assertEqual([e["body"] for e in events if e["event"] == "acked"], ["ok-1"])
        d, s, service = load_stubs()
        unauthorized = d.Code.Value("UNAUTHORIZED")
        with grpc.insecure_channel(self.server.grpc) as channel:
            stub = service.MessagingServiceStub(channel)
            route = s.QueryRouteRequest(topic=d.Resource(name=allowed))
            self.assertEqual(stub.QueryRoute(route, metadata=metadata(ALICE, ALICE_PW), timeout=10).status.code, d.Code.Value("OK"))
            for meta, why in [
                (metadata(ALICE, ALICE_PW, signature="00" * 20), "check signature failed."),
                (metadata(ALICE, ALICE_PW, signature="not-hex"), "create authentication context error."),
                ([m for m in metadata(ALICE, ALICE_PW) if m[0] != "x-mq-date-time"], "datetime is null."),
            ]:
                got = stub.QueryRoute(route, metadata=meta, timeout=10).status
                self.assertEqual((got.code, got.message), (unauthorized, why))
            receive = s.ReceiveMessageRequest(group=d.Resource(name="GB"), batch_size=1,
                                              message_queue=d.MessageQueue(topic=d.Resource(name=allowed), id=-1))
            first = next(iter(stub.ReceiveMessage(receive, metadata=metadata(ALICE, ALICE_PW), timeout=10)))
            self.assertEqual((first.status.code, first.status.message),
                             (unauthorized, f"User:{ALICE} has no permission to access Group:GB from {ip}, no matched policies."))
            beat = s.HeartbeatRequest(group=d.Resource(name="GB"), client_type=d.ClientType.PRODUCER)  # a producer's: no check
            self.assertEqual(stub.Heartbeat(beat, metadata=metadata(ALICE, ALICE_PW), timeout=10).status.code, d.Code.Value("OK"))
