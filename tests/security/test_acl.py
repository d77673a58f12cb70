"""ACL with real clients: the Apache 4.9.8 Java client with AclClientRPCHook, rmqtx's Python client, raw frames.

Each wrong case gets the refusal Java's broker gives (SYSTEM_ERROR + AclException remark) and
changes nothing stored.
"""

from __future__ import annotations

import shutil
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

import yaml

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from tests.security.acl_support import (
    ADMIN,
    ADMIN_SK,
    USER,
    USER_SK,
    WHITE,
    acl_server,
    max_offset,
    raw_call,
    run_java,
    run_python,
    signed,
    topic_names,
)

ACL_EXC = "org.apache.rocketmq.acl.common.AclException: "


def create_topic_fields(topic: str) -> dict:
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}


class AclCase(unittest.TestCase):
    def setUp(self) -> None:
        self.server = acl_server().start()
        for topic in ("TopicA", "TopicR"):
            resp = raw_call(self.server.broker, signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields(topic)))
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        self.wait_route("TopicA")

    def tearDown(self) -> None:
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        self.assertTrue(clean, f"standalone did not shut down cleanly\n{log}")
        self.assertNotIn("Traceback", log)
        shutil.rmtree(self.server.acl_conf_dir, ignore_errors=True)  # type: ignore[attr-defined]
        for secret in (USER_SK, ADMIN_SK, "wrong-secret-9"):
            self.assertNotIn(secret, log)

    def wait_route(self, topic: str) -> None:
        deadline = time.time() + 10
        while time.time() < deadline:
            route = raw_call(self.server.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
            if route.code == ResponseCode.SUCCESS:
                return
            time.sleep(0.05)
        self.fail(f"no route for {topic}")

    def stored_count(self, topic: str) -> int:
        return sum(max(0, max_offset(self.server, topic, q)) for q in range(4))

    def assertRefused(self, result: dict, message: str) -> None:
        self.assertFalse(result["ok"], result)
        self.assertEqual(result["code"], ResponseCode.SYSTEM_ERROR, result)
        self.assertTrue(result["remark"].startswith(ACL_EXC + message), result)


class JavaClientAclTest(AclCase):
    def test_java_client_right_and_wrong_cases(self) -> None:
        b = self.server.broker
        out = run_java(
            self.server,
            f"{USER},{USER_SK},send,TopicA,2",
            f"{USER},wrong-secret-9,send,TopicA,1",
            f"Nobody1234,{USER_SK},send,TopicA,1",
            "-,-,send,TopicA,1",
            f"{USER},{USER_SK},send,TopicR,1",
            f"{USER},{USER_SK},send,TopicB,1",
            f"{USER},{USER_SK},pull,TopicA,GroupA",
            f"{USER},{USER_SK},pull,TopicA,GroupD",
            f"{USER},{USER_SK},createTopic,{b},TopicC",
            f"{ADMIN},{ADMIN_SK},createTopic,{b},TopicC2",
        )
        self.assertEqual([r["ok"] for r in out[:2]], [True, True], out)
        self.assertRefused(out[2], f"Check signature failed for accessKey={USER}")
        self.assertRefused(out[3], "No acl config for Nobody1234")
        self.assertRefused(out[4], "No accessKey is configured")
        self.assertRefused(out[5], "No default permission for topic:TopicR")
        self.assertRefused(out[6], "No default permission for topic:TopicB")
        self.assertEqual(out[7], {"op": "pull", "ok": True, "count": 2})
        self.assertRefused(out[8], "No default permission for group:GroupD")
        self.assertFalse(out[9]["ok"])
        self.assertIn(f"Need admin permission for request code=17, but accessKey={USER} is not", out[9]["remark"])
        self.assertTrue(out[10]["ok"], out[10])
        # nothing stored by the refused requests
        self.assertEqual(self.stored_count("TopicA"), 2)
        self.assertEqual(self.stored_count("TopicR"), 0)
        names = topic_names(self.server)
        self.assertNotIn("TopicB", names)
        self.assertNotIn("TopicC", names)
        self.assertIn("TopicC2", names)


class PythonClientAclTest(AclCase):
    def test_python_client_signs(self) -> None:
        out = run_python(
            self.server,
            f"{USER},{USER_SK},send,TopicA,1",
            f"{USER},wrong-secret-9,send,TopicA,1",
            "-,-,send,TopicA,1",
            f"{USER},{USER_SK},pull,TopicA,GroupA",
            f"{USER},{USER_SK},pull,TopicA,GroupD",
        )
        self.assertTrue(out[0]["ok"], out)
        self.assertRefused(out[1], f"Check signature failed for accessKey={USER}")
        self.assertRefused(out[2], "No accessKey is configured")
        self.assertEqual(out[3], {"op": "pull", "ok": True, "count": 1})
        self.assertRefused(out[4], "No default permission for group:GroupD")
        self.assertEqual(self.stored_count("TopicA"), 1)


class WhiteListAclTest(AclCase):
    def test_global_white_address_needs_no_credentials(self) -> None:
        b = self.server.broker
        ok = raw_call(b, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields("TopicW")), "127.0.0.2")
        self.assertEqual(ok.code, ResponseCode.SUCCESS, ok.remark)
        refused = raw_call(b, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields("TopicW2")))
        self.assertEqual(refused.code, ResponseCode.SYSTEM_ERROR)
        self.assertTrue(refused.remark.startswith(ACL_EXC + "No accessKey is configured"), refused.remark)
        names = topic_names(self.server)
        self.assertIn("TopicW", names)
        self.assertNotIn("TopicW2", names)

    def test_account_white_address_is_bound_to_the_address(self) -> None:
        b = self.server.broker
        bad = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields("TopicW3"), ak=WHITE, sk="not-its-secret")
        ok = raw_call(b, bad, "127.0.0.3")
        self.assertEqual(ok.code, ResponseCode.SUCCESS, ok.remark)
        replay = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields("TopicW4"), ak=WHITE, sk="not-its-secret")
        refused = raw_call(b, replay, "127.0.0.1")
        self.assertEqual(refused.code, ResponseCode.SYSTEM_ERROR)
        self.assertTrue(refused.remark.startswith(ACL_EXC + f"Check signature failed for accessKey={WHITE}"), refused.remark)
        names = topic_names(self.server)
        self.assertIn("TopicW3", names)
        self.assertNotIn("TopicW4", names)

    def test_unsigned_or_tampered_frames(self) -> None:
        b = self.server.broker
        good = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields("TopicT"))
        good.ext_fields["topic"] = "TopicT2"  # changed after signing
        refused = raw_call(b, good)
        self.assertTrue(refused.remark.startswith(ACL_EXC + f"Check signature failed for accessKey={ADMIN}"), refused.remark)
        bare = raw_call(b, RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG))  # no ext fields at all
        self.assertTrue(bare.remark.startswith(ACL_EXC + "No accessKey is configured"), bare.remark)
        self.assertNotIn("TopicT2", topic_names(self.server))


class PopAclTest(AclCase):
    def test_pop_and_ack_need_sub_on_topic_and_group(self) -> None:
        """rmqtx asks a 5.x pop for what a pull needs (Apache's ACL 1.0 checks only the signature)."""
        b = self.server.broker

        def pop(topic: str, group: str) -> RemotingCommand:
            fields = {"consumerGroup": group, "topic": topic, "queueId": -1, "maxMsgNums": 1, "invisibleTime": 60000,
                      "pollTime": 0, "bornTime": int(time.time() * 1000), "initMode": 0}
            return raw_call(b, signed(RequestCode.POP_MESSAGE, fields, ak=USER, sk=USER_SK))

        self.assertEqual(pop("TopicR", "GroupA").code, ResponseCode.POLLING_TIMEOUT)  # allowed, nothing there
        denied_topic = pop("TopicDenied", "GroupA")
        self.assertTrue(denied_topic.remark.startswith(ACL_EXC + "No default permission for topic:TopicDenied"), denied_topic.remark)
        denied_group = pop("TopicR", "GroupD")
        self.assertIn("group:GroupD", denied_group.remark)
        ack = {"consumerGroup": "GroupD", "topic": "%RETRY%GroupD_TopicR", "queueId": 0, "extraInfo": "0 1 1 0 1 b 0 0", "offset": 0}
        refused = raw_call(b, signed(RequestCode.ACK_MESSAGE, ack, ak=USER, sk=USER_SK))
        self.assertIn("group:GroupD", refused.remark)
        # a recall (5.3) writes to its topic: PUB, as 5.3's ACL 2.0 asks; with it, the broker's own answer
        recall = {"topic": "TopicR", "recallHandle": "x", "producerGroup": "PG"}
        no_pub = raw_call(b, signed(RequestCode.RECALL_MESSAGE, recall, ak=USER, sk=USER_SK))
        self.assertEqual(no_pub.code, ResponseCode.SYSTEM_ERROR)
        self.assertTrue(no_pub.remark.startswith(ACL_EXC + "No default permission for topic:TopicR"), no_pub.remark)
        allowed = raw_call(b, signed(RequestCode.RECALL_MESSAGE, dict(recall, topic="TopicA"), ak=USER, sk=USER_SK))
        self.assertEqual((allowed.code, allowed.remark), (ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden"))


class AclFileTest(AclCase):
    def test_reload_on_change(self) -> None:
        path = self.server.acl_path  # type: ignore[attr-defined]
        newcomer = signed(RequestCode.GET_ALL_TOPIC_CONFIG, {}, ak="Newcomer12", sk="newcomer-secret")
        self.assertTrue(raw_call(self.server.broker, newcomer).remark.startswith(ACL_EXC + "No acl config for Newcomer12"))
        doc = yaml.safe_load(path.read_text())
        doc["accounts"].append({"accessKey": "Newcomer12", "secretKey": "newcomer-secret", "admin": True})
        path.write_text(yaml.safe_dump(doc))
        deadline = time.time() + 15
        while time.time() < deadline:
            attempt = signed(RequestCode.GET_ALL_TOPIC_CONFIG, {}, ak="Newcomer12", sk="newcomer-secret")
            if raw_call(self.server.broker, attempt).code == ResponseCode.SUCCESS:
                break
            time.sleep(0.1)
        else:
            self.fail("plain_acl.yml change never took effect")
        path.write_text('accounts:\n- accessKey: Broken1234\n  secretKey: "broken-secret-7\n')  # keeps the last good table
        deadline = time.time() + 5
        while time.time() < deadline and "ACL reload of" not in self.server.log():
            time.sleep(0.1)
        self.assertIn("ACL reload of", self.server.log())
        attempt = signed(RequestCode.GET_ALL_TOPIC_CONFIG, {}, ak="Newcomer12", sk="newcomer-secret")
        self.assertEqual(raw_call(self.server.broker, attempt).code, ResponseCode.SUCCESS)
        self.assertIn("plain_acl.yml is not valid YAML at line", self.server.log())
        self.assertNotIn("broken-secret-7", self.server.log())  # the YAML error's quote of the line stays out

    def test_admin_codes_rewrite_the_file(self) -> None:
        b = self.server.broker
        path = self.server.acl_path  # type: ignore[attr-defined]
        fields = {"accessKey": "Created123", "secretKey": "created-secret", "admin": "false",
                  "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB", "topicPerms": "TopicA=PUB|SUB,TopicX=DENY",
                  "groupPerms": "GroupA=SUB", "whiteRemoteAddress": ""}
        resp = raw_call(b, signed(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields))
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        doc = yaml.safe_load(path.read_text())
        created = [a for a in doc["accounts"] if a["accessKey"] == "Created123"]
        self.assertEqual(created[0]["topicPerms"], ["TopicA=PUB|SUB", "TopicX=DENY"])
        self.assertEqual(doc["dataVersion"][0]["counter"], 1)
        use = raw_call(b, signed(RequestCode.GET_ALL_TOPIC_CONFIG, {}, ak="Created123", sk="created-secret"))
        self.assertEqual(use.code, ResponseCode.SUCCESS, use.remark)
        short = raw_call(b, signed(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "abc", "secretKey": "x"}))
        self.assertEqual(short.code, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED)
        bad_perm = dict(fields, topicPerms="TopicA=EVERYTHING")
        self.assertEqual(raw_call(b, signed(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, bad_perm)).code,
                         ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED)

        white = raw_call(b, signed(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.1.1.*,127.0.0.5"}))
        self.assertEqual(white.code, ResponseCode.SUCCESS, white.remark)
        self.assertEqual(yaml.safe_load(path.read_text())["globalWhiteRemoteAddresses"], ["10.1.1.*", "127.0.0.5"])
        anon = raw_call(b, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), "127.0.0.5")
        self.assertEqual(anon.code, ResponseCode.SUCCESS, anon.remark)

        info = raw_call(b, signed(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}))
        self.assertEqual(info.code, ResponseCode.SUCCESS)
        self.assertEqual(info.ext_fields["brokerName"], "broker-a")
        self.assertIn('"counter":2', info.ext_fields["version"])

        gone = raw_call(b, signed(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "Created123"}))
        self.assertEqual(gone.code, ResponseCode.SUCCESS, gone.remark)
        self.assertNotIn("Created123", path.read_text())
        again = raw_call(b, signed(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "Created123"}))
        self.assertEqual(again.code, ResponseCode.DELETE_ACL_CONFIG_FAILED)
        refused = raw_call(b, signed(RequestCode.GET_ALL_TOPIC_CONFIG, {}, ak="Created123", sk="created-secret"))
        self.assertTrue(refused.remark.startswith(ACL_EXC + "No acl config for Created123"), refused.remark)
        self.assertNotIn("created-secret", self.server.log())


class AdminToolAclTest(AclCase):
    def test_rmqadmin_signs_with_ak_sk(self) -> None:
        import subprocess
        import sys

        from testkit.standalone import REPO

        def rmqadmin(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "rmqtx.tools.admin", "updateTopic", "-n", self.server.namesrv,
                                   "-b", self.server.broker, *args], capture_output=True, text=True, timeout=60, cwd=REPO)

        ok = rmqadmin("-t", "TopicK", "--ak", ADMIN, "--sk", ADMIN_SK)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertNotIn(ADMIN_SK, ok.stdout + ok.stderr)
        anonymous = rmqadmin("-t", "TopicK2")
        self.assertEqual(anonymous.returncode, 1)
        self.assertIn("No accessKey is configured", anonymous.stderr)
        not_admin = rmqadmin("-t", "TopicK3", "--ak", USER, "--sk", USER_SK)
        self.assertIn("Need admin permission for request code=17", not_admin.stderr)
        names = topic_names(self.server)
        self.assertIn("TopicK", names)
        self.assertNotIn("TopicK2", names)
        self.assertNotIn("TopicK3", names)


class JavaMqadminAclTest(AclCase):
    def test_mqadmin_acl_commands(self) -> None:
        from tests.security.acl_support import mqadmin_home, run_mqadmin

        b = self.server.broker
        path = self.server.acl_path  # type: ignore[attr-defined]
        home = mqadmin_home(ADMIN, ADMIN_SK)
        stranger = mqadmin_home("Stranger12", "stranger-secret")
        try:
            made = run_mqadmin(self.server, home, "updateAclConfig", "-b", b, "-a", "MqAdminMade1", "-s", "mqadmin-secret",
                               "-t", "TopicA=PUB", "-g", "GroupA=SUB", "-i", "PUB")
            self.assertIn("success", made.stdout, made.stdout + made.stderr)
            account = [a for a in yaml.safe_load(path.read_text())["accounts"] if a["accessKey"] == "MqAdminMade1"][0]
            self.assertEqual((account["topicPerms"], account["defaultTopicPerm"]), (["TopicA=PUB"], "PUB"))
            # three independent commands side by side (each JVM idles seconds in its shutdown); none
            # touches what another checks (10.0.0.* does not white-list the stranger on 127.0.0.1)
            with ThreadPoolExecutor(3) as pool:
                version, white, refused = pool.map(lambda argv: run_mqadmin(self.server, *argv), [
                    (home, "clusterAclConfigVersion", "-c", "DefaultCluster"),
                    (home, "updateGlobalWhiteAddr", "-b", b, "-g", "10.0.0.*"),
                    (stranger, "deleteAccessConfig", "-b", b, "-a", "MqAdminMade1")])
            self.assertIn(str(path), version.stdout, version.stdout + version.stderr)
            self.assertIn("success", white.stdout, white.stdout + white.stderr)
            self.assertEqual(yaml.safe_load(path.read_text())["globalWhiteRemoteAddresses"], ["10.0.0.*"])
            self.assertNotIn("success", refused.stdout)
            self.assertIn("No acl config for Stranger12", refused.stdout + refused.stderr)
            self.assertIn("MqAdminMade1", path.read_text())
            deleted = run_mqadmin(self.server, home, "deleteAccessConfig", "-b", b, "-a", "MqAdminMade1")
            self.assertIn("success", deleted.stdout, deleted.stdout + deleted.stderr)
            self.assertNotIn("MqAdminMade1", path.read_text())
        finally:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(stranger, ignore_errors=True)


class QueryFlagAclTest(AclCase):
    """QUERY_MESSAGE carries _UNIQUE_KEY_QUERY beside its header; 4.9.8's check leaves it out of the signature."""

    def query(self) -> RemotingCommand:
        fields = {"topic": "TopicA", "key": "k1", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**63 - 1,
                  "_UNIQUE_KEY_QUERY": "false"}
        return RemotingCommand.request(RequestCode.QUERY_MESSAGE, fields)

    def test_signed_without_the_flag_passes(self) -> None:
        """rmqtx's client (and signer) leave the flag out, as the broker does."""
        from rmqtx.acl.signing import sign_request

        request = self.query()
        sign_request(request, USER, USER_SK)
        resp = raw_call(self.server.broker, request)
        self.assertEqual(resp.code, ResponseCode.QUERY_NOT_FOUND, resp.remark)

    def test_signed_with_the_flag_is_refused_as_java_refuses_it(self) -> None:
        """Apache 4.9.8's Java hook signs every ext field, the flag too: its broker refuses that, and so does rmqtx."""
        from rmqtx.acl.signing import ACCESS_KEY, SIGNATURE, signature, signed_content

        request = self.query()
        request.ext_fields[ACCESS_KEY] = USER
        request.ext_fields[SIGNATURE] = signature(signed_content(request.ext_fields, request.body), USER_SK)
        resp = raw_call(self.server.broker, request)
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertTrue(resp.remark.startswith(ACL_EXC + f"Check signature failed for accessKey={USER}"), resp.remark)
