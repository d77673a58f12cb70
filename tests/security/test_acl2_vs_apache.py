"""ACL 2.0 side by side: Apache 5.4.0's broker (inside its Local-mode proxy) and an rmqtx standalone,
both started with the same ACL 2.0 settings, get the same signed remoting requests; every answer's
code, remark and body must be the same.

The requests: the admin codes 3001-3010 that make and read the users and ACLs, the issue's eight
sends and topic creations (six refused), and the matching rules (literal before prefixed, the longer
prefix first, Deny, source IPs, a disabled user), and what migrateAuthFromV1Enabled made of an ACL 1.0
plain_acl.yml. Frames are signed as the 5.x AclClientRPCHook signs.
Then Apache's own 5.4.0 tools against each: mqadmin's user and ACL subcommands and DefaultMQProducer
sends with AclClientRPCHook (tests/security/java5/Acl2Scenario.java); their output must be the same.
Last, raw gRPC calls signed as the 5.x SDKs sign them, to Apache's proxy (with ACL 2.0 on in its
rmq-proxy.json) and to rmqtx's gRPC endpoint: the same status codes and refusal messages.
Three JVMs, about two minutes: run once, in the trial env.
"""

from __future__ import annotations

import json
import unittest

from rmqtx.acl.signing import sign_request
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from tests.security.acl2_java import run_scenario
from tests.security.acl_support import raw_call
from tests.security.test_acl2 import AUTH_CONF, SUPER_PW, SUPER_USER, V1_STEPS, V1_YML, acl_body, create_topic, request, send_v2
from testkit.apache5 import ApacheProxy
from testkit.py5 import grpc_standalone
from testkit.standalone import call


class SignedApacheProxy(ApacheProxy):
    """Its readiness probes signed by the initial super user (the broker refuses unsigned ones)."""

    def _remoting_ok(self, addr: str, code: int) -> bool:  # type: ignore[override]
        cmd = RemotingCommand.request(code, {})
        sign_request(cmd, SUPER_USER, SUPER_PW)
        return call(addr, cmd, 2).code == 0


ALICE = ("alice", "alice-pw-1")
BOB = ("bob", "bob-pw-1")


def steps() -> list[tuple[str, RemotingCommand]]:
    """(label, request) in order; each run builds fresh frames (their opaques differ, nothing else)."""
    su = (SUPER_USER, SUPER_PW)
    out: list[tuple[str, RemotingCommand]] = []
    for topic in ("TopicAllowed", "TopicDenied", "TopicNoPolicy", "PreOk", "PreX", "AbC", "Ax"):
        out.append((f"create {topic}", create_topic(topic, su)))
    out += [
        ("create alice", request(RequestCode.AUTH_CREATE_USER, {"username": "alice"}, json.dumps({"password": ALICE[1], "userType": "Normal"}).encode())),
        ("create bob", request(RequestCode.AUTH_CREATE_USER, {"username": "bob"}, json.dumps({"password": BOB[1]}).encode())),
        ("create alice again", request(RequestCode.AUTH_CREATE_USER, {"username": "alice"}, b'{"password":"x"}')),
        ("create no password", request(RequestCode.AUTH_CREATE_USER, {"username": "carol"}, b'{"userType":"Normal"}')),
        ("create blank name", request(RequestCode.AUTH_CREATE_USER, {}, b'{"password":"x"}')),
        ("super by normal", request(RequestCode.AUTH_CREATE_USER, {"username": "eve"}, b'{"password":"p","userType":"Super"}', ALICE)),
        ("acl alice", request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:alice"}, acl_body(
            ("Topic:TopicAllowed", ["Pub"], "Allow"), ("Topic:TopicDenied", ["Pub"], "Deny"), ("Topic:Pre*", ["Pub"], "Deny"),
            ("Topic:PreOk", ["Pub"], "Allow"), ("Topic:A*", ["Pub"], "Deny"), ("Topic:Ab*", ["Pub"], "Allow"),
            ("Group:G*", ["Sub"], "Allow")))),
        ("acl bob ips", request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"},
                                acl_body(("Topic:TopicAllowed", ["Pub", "Sub"], "Allow"), ips=["10.0.0.0/8"]))),
        ("acl bob merge", request(RequestCode.AUTH_UPDATE_ACL, {"subject": "User:bob"},
                                  acl_body(("Topic:TopicNoPolicy", ["All"], "Allow"), ("Group:*", ["Sub"], "Deny")))),
        ("acl Any", request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, acl_body(("Topic:T2", ["Any"], "Allow")))),
        ("acl bad resource", request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, acl_body(("Queue:T2", ["Pub"], "Allow")))),
        ("acl bad decision", request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, acl_body(("Topic:T2", ["Pub"], "Maybe")))),
        ("acl bad ip", request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, acl_body(("Topic:T2", ["Pub"], "Allow"), ips=["1.2.3"]))),
        ("acl no user", request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:nobody"}, acl_body(("Topic:T2", ["Pub"], "Allow")))),
        ("get alice", request(RequestCode.AUTH_GET_USER, {"username": "alice"})),
        ("get nobody", request(RequestCode.AUTH_GET_USER, {"username": "nobody"})),
        ("list users", request(RequestCode.AUTH_LIST_USER, {})),
        ("list users filter", request(RequestCode.AUTH_LIST_USER, {"filter": "bo"})),
        ("get acl alice", request(RequestCode.AUTH_GET_ACL, {"subject": "User:alice"})),
        ("get acl bob", request(RequestCode.AUTH_GET_ACL, {"subject": "User:bob"})),
        ("list acls", request(RequestCode.AUTH_LIST_ACL, {})),
        ("list acls filtered", request(RequestCode.AUTH_LIST_ACL, {"subjectFilter": "bob", "resourceFilter": "Group"})),
        # the eight
        ("no credentials", send_v2("TopicAllowed", None)),
        ("wrong password", send_v2("TopicAllowed", (ALICE[0], "wrong"))),
        ("unknown user", send_v2("TopicAllowed", ("ghost", "whatever"))),
        ("denied topic", send_v2("TopicDenied", ALICE)),
        ("topic with no policy", send_v2("TopicNoPolicy", ALICE)),
        ("normal user creates a topic", create_topic("TopicByAlice", ALICE)),
        ("allowed send", send_v2("TopicAllowed", ALICE)),
        ("super creates a topic", create_topic("TopicBySuper", su)),
        # matching order
        ("literal before prefixed", send_v2("PreOk", ALICE)),
        ("prefixed deny", send_v2("PreX", ALICE)),
        ("longer prefix first", send_v2("AbC", ALICE)),
        ("shorter prefix", send_v2("Ax", ALICE)),
        ("source ip outside", send_v2("TopicAllowed", BOB)),
        ("all action", send_v2("TopicNoPolicy", BOB)),
        ("group prefix", request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G1", "topic": "%RETRY%G1", "queueId": 0}, user=ALICE)),
        ("group no policy", request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "H1", "topic": "%RETRY%H1", "queueId": 0}, user=ALICE)),
        ("group deny", request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G1", "topic": "%RETRY%G1", "queueId": 0}, user=BOB)),
        ("admin read by normal", request(RequestCode.AUTH_LIST_USER, {}, user=ALICE)),
        # deletes and a disabled user
        ("delete entry", request(RequestCode.AUTH_DELETE_ACL, {"subject": "User:bob", "resource": "Group:*"})),
        ("get acl bob after", request(RequestCode.AUTH_GET_ACL, {"subject": "User:bob"})),
        ("delete acl", request(RequestCode.AUTH_DELETE_ACL, {"subject": "User:bob"})),
        ("delete acl again", request(RequestCode.AUTH_DELETE_ACL, {"subject": "User:bob"})),
        ("disable alice", request(RequestCode.AUTH_UPDATE_USER, {"username": "alice"}, b'{"userStatus":"disable"}')),
        ("disabled send", send_v2("TopicAllowed", ALICE)),
        ("update nobody", request(RequestCode.AUTH_UPDATE_USER, {"username": "nobody"}, b'{"password":"x"}')),
        ("delete bob", request(RequestCode.AUTH_DELETE_USER, {"username": "bob"})),
        ("deleted send", send_v2("TopicAllowed", BOB)),
        ("get acl deleted", request(RequestCode.AUTH_GET_ACL, {"subject": "User:bob"})),
        # what migrateAuthFromV1Enabled made of V1_YML
        *[(label, request(code, fields)) for label, code, fields, _ in V1_STEPS],
        ("v1 admin creates a topic", create_topic("TopicOther", ("v1admin", "v1-admin-1"))),
        ("v1 allowed send", send_v2("TopicAllowed", ("v1user", "v1-secret-1"))),
        ("v1 denied topic", send_v2("TopicDenied", ("v1user", "v1-secret-1"))),
        ("v1 default deny", send_v2("TopicOther", ("v1user", "v1-secret-1"))),
        ("v1 default group", request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G9", "topic": "%RETRY%G9", "queueId": 0},
                                     user=("v1user", "v1-secret-1"))),
    ]
    return out


def answers(broker: str) -> list[tuple[str, int, str | None, object]]:
    out = []
    for label, cmd in steps():
        resp = raw_call(broker, cmd, timeout=15)
        body: object = resp.body  # the admin reads' JSON compared byte for byte
        if label.startswith(("group ", "v1 default group")) and resp.code != 16:
            # let through: what the offset query then answers is not ACL's (rmqtx answers a retry topic's
            # missing offset with 0, Apache 5.4.0 with QUERY_NOT_FOUND)
            out.append((label, "passed", None, None))
            continue
        if label.endswith(("send", "creates a topic")) or label.startswith(("create ", "literal", "longer", "all action")):
            body = None  # send results carry message ids and offsets: only the decision is compared
        out.append((label, resp.code, resp.remark if resp.code else None, body))
    return out


#: Apache's proxy checks gRPC calls with its own AuthConfig (rmq-proxy.json), reading the broker's users
#: and ACLs through its metadata service (the broker is in the proxy's JVM in Local mode)
PROXY_AUTH = {
    "authenticationEnabled": True, "authorizationEnabled": True,
    "authenticationProvider": AUTH_CONF["authenticationProvider"], "authorizationProvider": AUTH_CONF["authorizationProvider"],
    "authenticationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider",
    "authorizationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider",
}
V1 = ("v1user", "v1-secret-1")


def grpc_answers(endpoint: str) -> list[tuple[str, object, str | None]]:
    """Raw gRPC calls with the SDKs' signed metadata, after the remoting steps: (label, status code, message
    of a refusal)."""
    import grpc

    from tests.grpc.test_py5_security import load_stubs, metadata

    d, s, service = load_stubs()
    unauthorized = d.Code.Value("UNAUTHORIZED")

    def meta(user: tuple[str, str] | None, **kw: str) -> list:
        return metadata(*(user or (None, None)), **kw)  # type: ignore[arg-type]

    route = s.QueryRouteRequest(topic=d.Resource(name="TopicAllowed"))
    other = s.QueryRouteRequest(topic=d.Resource(name="TopicOther"))
    message = d.Message(topic=d.Resource(name="TopicDenied"), body=b"grpc",
                        system_properties=d.SystemProperties(message_id="01ACL2GRPC", body_encoding=d.Encoding.IDENTITY,
                                                             message_type=d.MessageType.NORMAL))
    calls = [
        ("route", "QueryRoute", route, meta(V1)),
        ("route default deny", "QueryRoute", other, meta(V1)),
        ("route unsigned", "QueryRoute", route, [("x-mq-client-id", "rmqtx-test@1")]),
        ("route wrong signature", "QueryRoute", route, meta(V1, signature="00" * 20)),
        ("route signature not hex", "QueryRoute", route, meta(V1, signature="zz")),
        ("route no date", "QueryRoute", route, [m for m in meta(V1) if m[0] != "x-mq-date-time"]),
        ("route unknown user", "QueryRoute", route, meta(("ghost", "x"))),
        ("route disabled user", "QueryRoute", route, meta(("alice", "alice-pw-1"))),
        ("send denied", "SendMessage", s.SendMessageRequest(messages=[message]), meta(V1)),
        ("receive group first", "ReceiveMessage", s.ReceiveMessageRequest(
            group=d.Resource(name="GX"), batch_size=1, message_queue=d.MessageQueue(topic=d.Resource(name="JTopicAllowed"), id=-1)),
         meta(("jalice", "alice-pw-1"))),
        ("ack topic after group", "AckMessage", s.AckMessageRequest(
            group=d.Resource(name="G1"), topic=d.Resource(name="JTopicAllowed"),
            entries=[s.AckMessageEntry(message_id="01X", receipt_handle="x")]), meta(("jalice", "alice-pw-1"))),
        ("consumer heartbeat", "Heartbeat", s.HeartbeatRequest(group=d.Resource(name="G1"), client_type=d.ClientType.SIMPLE_CONSUMER),
         meta(V1)),
        ("consumer heartbeat by jalice", "Heartbeat", s.HeartbeatRequest(group=d.Resource(name="G1"),
                                                                     client_type=d.ClientType.SIMPLE_CONSUMER),
         meta(("jalice", "alice-pw-1"))),
    ]
    out: list[tuple[str, object, str | None]] = []
    with grpc.insecure_channel(endpoint) as channel:
        stub = service.MessagingServiceStub(channel)
        for label, method, req, md in calls:
            call_ = getattr(stub, method)
            answer = call_(req, metadata=md, timeout=10)
            status = next(iter(answer)).status if method == "ReceiveMessage" else answer.status
            if status.code != unauthorized:  # let through: what the call then answers is not ACL's
                out.append((label, "passed", None))
                continue
            out.append((label, status.code, status.message))
    return out


class Acl2VsApacheTest(unittest.TestCase):
    def test_same_answers_as_apache_5_4_0(self) -> None:
        conf = {**AUTH_CONF, "migrateAuthFromV1Enabled": "true"}
        apache = SignedApacheProxy(broker_conf=conf, proxy_conf=PROXY_AUTH)
        self.addCleanup(apache.close)
        (apache.root / "proxy" / "conf").mkdir(parents=True)
        (apache.root / "proxy" / "conf" / "plain_acl.yml").write_text(V1_YML)  # $ROCKETMQ_HOME/conf/plain_acl.yml
        apache.start()
        theirs = answers(apache.broker)
        their_java = run_scenario(apache.namesrv, apache.broker, SUPER_USER, SUPER_PW)
        their_grpc = grpc_answers(apache.grpc)
        apache.stop()
        ours_server = grpc_standalone(**conf)
        self.addCleanup(ours_server.close)
        (ours_server.root / "plain_acl.yml").write_text(V1_YML)
        ours_server.conf_path.write_text(ours_server.conf_path.read_text() + f"aclFilePath={ours_server.root / 'plain_acl.yml'}\n")
        ours = answers(ours_server.start().broker)
        our_java = run_scenario(ours_server.namesrv, ours_server.broker, SUPER_USER, SUPER_PW)
        our_grpc = grpc_answers(ours_server.grpc)  # type: ignore[attr-defined]
        self.assertTrue(ours_server.stop())
        self.assertNotIn("Traceback", ours_server.log())
        refused = [a for a in theirs if a[0] in ("no credentials", "wrong password", "unknown user", "denied topic",
                                                 "topic with no policy", "normal user creates a topic")]
        self.assertEqual([a[1] for a in refused], [16] * 6, refused)  # Apache refuses the six
        for mine, apaches in zip(ours, theirs):
            self.assertEqual(mine, apaches)
        self.assertEqual(len(ours), len(theirs))
        # Apache's mqadmin 5.4.0 (createUser ... listAcl, updateTopic) and DefaultMQProducer with AclClientRPCHook
        sends = {step["step"]: step for step in their_java if "code" in step or "status" in step}
        self.assertEqual([sends[k]["code"] for k in ("no credentials", "wrong password", "unknown user", "denied topic",
                                                      "topic with no policy")], [16] * 5, sends)
        self.assertEqual(sends["allowed send"]["status"], "SEND_OK")
        self.assertEqual(len(our_java), len(their_java))
        for mine_step, apache_step in zip(our_java, their_java):
            self.assertEqual(mine_step, apache_step)
        # the gRPC endpoint beside Apache's proxy
        self.assertEqual(sum(1 for a in their_grpc if a[2] is not None), 10, their_grpc)
        for mine_call, apache_call in zip(our_grpc, their_grpc):
            self.assertEqual(mine_call, apache_call)


if __name__ == "__main__":
    unittest.main()
