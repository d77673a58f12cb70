"""ACL 2.0 (RocketMQ 5.3+) on a real standalone started with Apache 5.x's settings.

One broker for the module: users and ACLs are made through the admin codes 3001-3010 (signed by the
initAuthenticationUser super user), then the issue's eight requests are decided as Apache 5.4.0
decides them (six refused with NO_PERMISSION and Apache's remark, two allowed), and the admin codes'
answers are checked byte for byte against the JSON Apache's broker writes. The last case restarts the
broker on the same store: users and ACLs are still there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import unittest

from rmqtx.acl.signing import sign_request
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from tests.security.acl_support import raw_call
from testkit.standalone import REPO, Standalone

SUPER_USER, SUPER_PW = "rocketmq", "12345678"
NORMAL_USER, NORMAL_PW = "alice", "alice-pw-1"
LOCAL = "org.apache.rocketmq.auth.{0}.provider.Local{1}MetadataProvider"
AUTH_CONF = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "authenticationMetadataProvider": LOCAL.format("authentication", "Authentication"),
    "authorizationMetadataProvider": LOCAL.format("authorization", "Authorization"),
    "initAuthenticationUser": json.dumps({"username": SUPER_USER, "password": SUPER_PW}),
}


#: An ACL 1.0 file for migrateAuthFromV1Enabled=true
V1_YML = """\
globalWhiteRemoteAddresses:
- 10.10.0.0/16
accounts:
- accessKey: v1user
  secretKey: v1-secret-1
  whiteRemoteAddress: 192.168.0.*
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - TopicAllowed=PUB|SUB
  - TopicDenied=DENY
  groupPerms:
  - G1=SUB
- accessKey: v1admin
  secretKey: v1-admin-1
  admin: true
"""
V1_STEPS = [  # (label, code, fields, user) for what the migration made
    ("v1 get user", RequestCode.AUTH_GET_USER, {"username": "v1user"}, None),
    ("v1 get admin", RequestCode.AUTH_GET_USER, {"username": "v1admin"}, None),
    ("v1 get acl", RequestCode.AUTH_GET_ACL, {"subject": "User:v1user"}, None),
]


def request(code: int, fields: dict, body: bytes = b"", user: tuple[str, str] | None = (SUPER_USER, SUPER_PW)) -> RemotingCommand:
    cmd = RemotingCommand.request(code, fields, body)
    if user is not None:
        sign_request(cmd, *user)
    return cmd


def send_v2(topic: str, user: tuple[str, str] | None) -> RemotingCommand:
    fields = {"a": "PG", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1700000000000, "h": 0, "i": "", "j": 0, "k": False, "m": False}
    return request(RequestCode.SEND_MESSAGE_V2, fields, b"hello", user)


def create_topic(topic: str, user: tuple[str, str] | None) -> RemotingCommand:
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}, user=user)


def acl_body(*entries: tuple[str, list[str], str], ips: list[str] | None = None) -> bytes:
    return json.dumps({"policies": [{"entries": [
        {"resource": r, "actions": a, "decision": d, **({"sourceIps": ips} if ips else {})} for r, a, d in entries]}]}).encode()


class Acl2Test(unittest.TestCase):
    server: Standalone

    def test_acl2_on_one_standalone(self) -> None:
        """One broker for every part (trial runs no setUpClass), in order: each part builds on the last."""
        self.server = Standalone(AUTH_CONF)
        self.addCleanup(self.server.close)
        self.server.start()
        self.users_policies_and_the_eight_cases()
        self.admin_answers_as_apache_writes_them()
        self.rmqadmin_user_and_acl_subcommands()
        self.users_and_acls_survive_a_restart()

    def call(self, cmd: RemotingCommand) -> RemotingCommand:
        return raw_call(self.server.broker, cmd)

    def ok(self, cmd: RemotingCommand) -> RemotingCommand:
        resp = self.call(cmd)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        return resp

    def refused(self, cmd: RemotingCommand, remark: str) -> None:
        resp = self.call(cmd)
        self.assertEqual((resp.code, resp.remark), (ResponseCode.NO_PERMISSION, remark))

    def users_policies_and_the_eight_cases(self) -> None:
        alice = (NORMAL_USER, NORMAL_PW)
        for topic in ("TopicAllowed", "TopicDenied", "TopicNoPolicy"):
            self.ok(create_topic(topic, (SUPER_USER, SUPER_PW)))
        self.ok(request(RequestCode.AUTH_CREATE_USER, {"username": NORMAL_USER},
                        json.dumps({"password": NORMAL_PW, "userType": "Normal"}).encode()))
        self.ok(request(RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{NORMAL_USER}"},
                        acl_body(("Topic:TopicAllowed", ["Pub"], "Allow"), ("Topic:TopicDenied", ["Pub"], "Deny"),
                                 ("Group:G*", ["Sub"], "Allow"))))
        ip = "127.0.0.1"
        self.refused(send_v2("TopicAllowed", None), "username cannot be null.")
        self.refused(send_v2("TopicAllowed", (NORMAL_USER, "wrong")), "check signature failed.")
        self.refused(send_v2("TopicAllowed", ("ghost", "whatever")), "User:ghost is not found.")
        self.refused(send_v2("TopicDenied", alice),
                     f"User:{NORMAL_USER} has no permission to access Topic:TopicDenied from {ip}, the decision is deny.")
        self.refused(send_v2("TopicNoPolicy", alice),
                     f"User:{NORMAL_USER} has no permission to access Topic:TopicNoPolicy from {ip}, no matched policies.")
        self.refused(create_topic("TopicByAlice", alice),
                     f"User:{NORMAL_USER} has no permission to access Topic:TopicByAlice from {ip}, no matched policies.")
        self.ok(send_v2("TopicAllowed", alice))
        self.ok(create_topic("TopicBySuper", (SUPER_USER, SUPER_PW)))
        # a prefixed group entry; the retry topic of a group names the group
        fields = {"consumerGroup": "G1", "topic": "%RETRY%G1", "queueId": 0}
        self.assertNotEqual(self.call(request(RequestCode.QUERY_CONSUMER_OFFSET, fields, user=alice)).code, ResponseCode.NO_PERMISSION)
        fields = {"consumerGroup": "H1", "topic": "%RETRY%H1", "queueId": 0}
        self.refused(request(RequestCode.QUERY_CONSUMER_OFFSET, fields, user=alice),
                     f"User:{NORMAL_USER} has no permission to access Group:H1 from {ip}, no matched policies.")
        # an unknown code is "not supported" before any check, as in Apache
        self.assertEqual(self.call(request(99999, {}, user=None)).code, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)

    def admin_answers_as_apache_writes_them(self) -> None:
        self.ok(request(RequestCode.AUTH_CREATE_USER, {"username": "bob"}, json.dumps({"password": "bob-pw"}).encode()))
        resp = self.ok(request(RequestCode.AUTH_GET_USER, {"username": "bob"}))
        self.assertEqual(resp.body, b'{"password":"bob-pw","userStatus":"enable","userType":"Normal","username":"bob"}')
        self.assertEqual(self.ok(request(RequestCode.AUTH_GET_USER, {"username": "nobody"})).body, b"")
        self.assertEqual(self.call(request(RequestCode.AUTH_GET_USER, {})).code, ResponseCode.INVALID_PARAMETER)
        self.refused(request(RequestCode.AUTH_CREATE_USER, {"username": "bob"}, b'{"password":"x"}'), "The user is existed")
        self.refused(request(RequestCode.AUTH_CREATE_USER, {"username": "carol"}, b'{"userType":"Normal"}'), "password can not be blank")
        names = [u["username"] for u in json.loads(self.ok(request(RequestCode.AUTH_LIST_USER, {})).body)]
        self.assertEqual(names, sorted(names))
        self.assertIn(SUPER_USER, names)
        self.assertEqual([u["username"] for u in json.loads(self.ok(request(RequestCode.AUTH_LIST_USER, {"filter": "bo"})).body)], ["bob"])
        # a normal user may not make a super user, nor touch the admin codes without a policy
        bob = ("bob", "bob-pw")
        resp = self.call(request(RequestCode.AUTH_CREATE_USER, {"username": "eve"}, b'{"password":"p","userType":"Super"}', bob))
        self.assertEqual((resp.code, resp.remark), (ResponseCode.NO_PERMISSION,
                         "User:bob has no permission to access Cluster:DefaultCluster from 127.0.0.1, no matched policies."))
        # ACLs: create, merge an update into the same policy, read back, validation messages
        self.ok(request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"},
                        acl_body(("Topic:T1", ["Pub", "Sub"], "Allow"), ("Group:*", ["Sub"], "Deny"), ips=["10.0.0.0/8"])))
        self.ok(request(RequestCode.AUTH_UPDATE_ACL, {"subject": "User:bob"}, acl_body(("Topic:T1", ["All"], "Deny"))))
        resp = self.ok(request(RequestCode.AUTH_GET_ACL, {"subject": "User:bob"}))
        self.assertEqual(resp.body, b'{"policies":[{"entries":[{"actions":["All"],"decision":"Deny","resource":"Topic:T1"},'
                                    b'{"actions":["Sub"],"decision":"Deny","resource":"Group:*","sourceIps":["10.0.0.0/8"]}],'
                                    b'"policyType":"Custom"}],"subject":"User:bob"}')
        self.refused(request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, acl_body(("Topic:T2", ["Any"], "Allow"))),
                     "The actions can not be Any.")
        self.refused(request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, acl_body(("Queue:T2", ["Pub"], "Allow"))),
                     "The resource is null.")
        self.refused(request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, acl_body(("Topic:T2", ["Pub"], "Maybe"))),
                     "The decision is null or illegal.")
        self.refused(request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, acl_body(("Topic:T2", ["Pub"], "Allow"), ips=["1.2.3"])),
                     "The source ip is invalid.")
        self.refused(request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:nobody"}, acl_body(("Topic:T2", ["Pub"], "Allow"))),
                     "The subject of User:nobody is not exist.")
        listed = json.loads(self.ok(request(RequestCode.AUTH_LIST_ACL, {"subjectFilter": "bob", "resourceFilter": "Group"})).body)
        self.assertEqual(listed, [{"policies": [{"entries": [{"actions": ["Sub"], "decision": "Deny", "resource": "Group:*",
                                                                "sourceIps": ["10.0.0.0/8"]}], "policyType": "Custom"}],
                                   "subject": "User:bob"}])
        self.ok(request(RequestCode.AUTH_DELETE_ACL, {"subject": "User:bob", "resource": "Topic:T1"}))
        self.assertNotIn(b"Topic:T1", self.ok(request(RequestCode.AUTH_GET_ACL, {"subject": "User:bob"})).body)
        self.ok(request(RequestCode.AUTH_DELETE_ACL, {"subject": "User:bob"}))
        self.refused(request(RequestCode.AUTH_DELETE_ACL, {"subject": "User:bob"}), "The acl is not exist.")
        # a disabled user is refused at authentication
        self.ok(request(RequestCode.AUTH_UPDATE_USER, {"username": "bob"}, b'{"userStatus":"disable"}'))
        self.refused(send_v2("T1", bob), "User:bob is disabled.")
        self.ok(request(RequestCode.AUTH_DELETE_USER, {"username": "bob"}))
        self.refused(send_v2("T1", bob), "User:bob is not found.")

    def test_migration_from_acl_1(self) -> None:
        """migrateAuthFromV1Enabled=true: plain_acl.yml's accounts become users and ACLs at start (and the
        innerClientAuthenticationCredentials a Super user)."""
        inner = json.dumps({"accessKey": "inner", "secretKey": "inner-secret-1"})
        server = Standalone({**AUTH_CONF, "migrateAuthFromV1Enabled": "true", "innerClientAuthenticationCredentials": inner})
        self.addCleanup(server.close)
        (server.root / "plain_acl.yml").write_text(V1_YML)
        server.conf_path.write_text(server.conf_path.read_text() + f"aclFilePath={server.root / 'plain_acl.yml'}\n")
        server.start()
        get = raw_call(server.broker, request(RequestCode.AUTH_GET_USER, {"username": "v1user"}))
        self.assertEqual(get.body, b'{"password":"v1-secret-1","userStatus":"enable","userType":"Normal","username":"v1user"}')
        get = raw_call(server.broker, request(RequestCode.AUTH_GET_USER, {"username": "inner"}))  # made a Super user too
        self.assertEqual(get.body, b'{"password":"inner-secret-1","userStatus":"enable","userType":"Super","username":"inner"}')
        acl = raw_call(server.broker, request(RequestCode.AUTH_GET_ACL, {"subject": "User:v1user"}))
        self.assertEqual(json.loads(acl.body), {"policies": [
            {"entries": [{"actions": ["Pub", "Sub"], "decision": "Allow", "resource": "Topic:TopicAllowed"},
                         {"actions": ["All"], "decision": "Deny", "resource": "Topic:TopicDenied"},
                         {"actions": ["Sub"], "decision": "Allow", "resource": "Group:G1"}], "policyType": "Custom"},
            {"entries": [{"actions": ["All"], "decision": "Deny", "resource": "Topic:*"},
                         {"actions": ["Sub"], "decision": "Allow", "resource": "Group:*"}], "policyType": "Default"}],
            "subject": "User:v1user"})
        for topic in ("TopicAllowed", "TopicOther"):
            self.assertEqual(raw_call(server.broker, create_topic(topic, ("v1admin", "v1-admin-1"))).code, 0)
        self.assertEqual(raw_call(server.broker, send_v2("TopicAllowed", ("v1user", "v1-secret-1"))).code, 0)
        refused = raw_call(server.broker, send_v2("TopicOther", ("v1user", "v1-secret-1")))
        self.assertEqual((refused.code, refused.remark), (ResponseCode.NO_PERMISSION,
                         "User:v1user has no permission to access Topic:TopicOther from 127.0.0.1, the decision is deny."))
        self.assertTrue(server.stop())
        self.assertNotIn("v1-secret-1", server.log())

    def rmqadmin(self, *args: str, user: tuple[str, str] = (SUPER_USER, SUPER_PW)) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rmqtx.tools.admin", *args, "-n", self.server.namesrv, "--ak", user[0],
                               "--sk", user[1]], capture_output=True, text=True, timeout=60, cwd=REPO)

    def rmqadmin_user_and_acl_subcommands(self) -> None:
        """rmqadmin's createUser ... listAcl: the requests and the output of Apache's mqadmin 5.4.0 (its
        lines as tests/security/java5/Acl2Scenario.java prints them)."""
        b = self.server.broker
        done = self.rmqadmin("createUser", "-b", b, "-u", "erin", "-p", "erin-pw-1", "-t", "Normal")
        self.assertEqual((done.returncode, done.stdout), (0, f"create user to {b} success.\n"), done.stderr)
        self.assertEqual(self.rmqadmin("getUser", "-b", b, "-u", "erin").stdout,
                         "#UserName         #Password               #UserType               #UserStatus           \n"
                         "erin              erin-pw-1               Normal                  enable                \n")
        done = self.rmqadmin("createAcl", "-c", "DefaultCluster", "-s", "User:erin", "-r", "Topic:TopicAllowed,Group:G*",
                             "-a", "Pub,Sub", "-d", "Allow", "-i", "127.0.0.1,10.0.0.0/8")
        self.assertEqual(done.stdout, f"create acl to {b} success.\n", done.stderr)
        self.assertEqual(self.rmqadmin("updateAcl", "-b", b, "-s", "User:erin", "-r", "Topic:TopicDenied", "-a", "Pub",
                                       "-d", "Deny").returncode, 0)
        self.assertEqual(self.rmqadmin("getAcl", "-b", b, "-s", "User:erin").stdout,
                         "#Subject          #PolicyType  #Resource               #Actions              #SourceIp                 #Decision \n"
                         "User:erin         Custom      Topic:TopicAllowed      [Pub, Sub]            [127.0.0.1, 10.0.0.0/8]   Allow     \n"
                         "User:erin         Custom      Group:G*                [Pub, Sub]            [127.0.0.1, 10.0.0.0/8]   Allow     \n"
                         "User:erin         Custom      Topic:TopicDenied       [Pub]                 null                      Deny      \n")
        self.assertEqual(self.rmqadmin("listAcl", "-b", b, "-s", "erin", "-r", "Denied").stdout.splitlines()[1:],
                         ["User:erin         Custom      Topic:TopicDenied       [Pub]                 null                      Deny      "])
        self.assertEqual(self.rmqadmin("deleteAcl", "-b", b, "-s", "User:erin", "-r", "Topic:TopicDenied").returncode, 0)
        self.assertEqual(self.rmqadmin("updateUser", "-b", b, "-u", "erin", "-s", "disable").returncode, 0)
        self.assertIn("erin              erin-pw-1               Normal                  disable", self.rmqadmin("listUser", "-b", b, "-f", "er").stdout)
        refused = self.rmqadmin("listUser", "-b", b, user=("erin", "erin-pw-1"))
        self.assertEqual((refused.returncode, refused.stderr),
                         (1, f"rmqadmin listUser failed: CODE: 16 DESC: User:erin is disabled. BROKER: {b}\n"))
        self.assertEqual(self.rmqadmin("deleteUser", "-b", b, "-u", "erin").stdout, f"delete user to {b} success.\n")

    def users_and_acls_survive_a_restart(self) -> None:
        self.ok(request(RequestCode.AUTH_CREATE_USER, {"username": "dave"}, b'{"password":"dave-pw"}'))
        self.ok(request(RequestCode.AUTH_CREATE_ACL, {"subject": "User:dave"}, acl_body(("Topic:TopicAllowed", ["Pub"], "Allow"))))
        self.assertTrue(self.server.stop())
        self.assertTrue((self.server.root / "store" / "config" / "users.json").exists())
        self.server.start()
        self.ok(send_v2("TopicAllowed", ("dave", "dave-pw")))
        self.refused(send_v2("TopicDenied", ("dave", "dave-pw")),
                     "User:dave has no permission to access Topic:TopicDenied from 127.0.0.1, no matched policies.")
        log = self.server.log()
        self.assertNotIn("Traceback", log)
        for secret in (SUPER_PW, NORMAL_PW, "dave-pw"):
            self.assertNotIn(secret, log)
        self.assertTrue(self.server.stop(), "the standalone did not stop cleanly")


if __name__ == "__main__":
    unittest.main()
