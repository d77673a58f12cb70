"""End to end: the Node client ``ali-ons`` against a real rmqtx standalone."""

from __future__ import annotations

import shutil
import subprocess
import unittest
from pathlib import Path

from testkit.standalone import REPO, ServerPerTest, run_client, wait_for

SCRIPT = str(Path(__file__).with_name("node_client.js"))
NODE = shutil.which("node")
MODULES = REPO / "interop" / "node" / "node_modules" / "ali-ons"


@unittest.skipUnless(NODE and MODULES.exists(), "node or interop/node/node_modules missing (tox installs them)")
class NodeClientTest(ServerPerTest, unittest.TestCase):
    def node(self, *args: str, timeout: float = 90) -> list[dict]:
        return run_client([NODE, SCRIPT, args[0], self.server.namesrv, *args[1:]], timeout)

    def test_send_and_push_consume_with_tags(self) -> None:
        self.server.create_topic("T_node")  # ali-ons does not auto-create topics (it fails on code 17)
        sent = self.node("produce", "T_node", "P_node", "9")
        self.assertEqual([e["status"] for e in sent], ["SEND_OK"] * 9)
        wanted = {f"node-{i}": (("TagA", "TagB", "TagC")[i % 3], [f"node-key-{i}"]) for i in range(9) if i % 3 != 2}
        events = self.node("consume", "T_node", "C_node", "TagA || TagB", str(len(wanted)), "40")
        # ali-ons hands keys over as the stored space-separated string
        got = {e["body"]: (e["tags"], e["keys"].split()) for e in events if e["kind"] == "recv"}
        self.assertEqual(got, wanted)


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(NODE and MODULES.exists(), "node or interop/node/node_modules missing (tox installs them)")
class NodeDeliveryTest(ServerPerTest, unittest.TestCase):
    """Issue 7 with ali-ons: delay levels, retry through a failing handler, DLQ after maxReconsumeTimes."""

    server_conf = {"messageDelayLevel": "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"}

    def node(self, *args: str, timeout: float = 90) -> list[dict]:
        return run_client([NODE, SCRIPT, args[0], self.server.namesrv, *args[1:]], timeout)

    def test_delay_levels(self) -> None:
        self.server.create_topic("T_node_delay")
        events = self.node("delayed", "T_node_delay", "C_node_delay")
        sent = {e["body"]: e["at"] for e in events if e["kind"] == "sent"}
        got = {e["body"]: e["at"] for e in events if e["kind"] == "recv"}
        self.assertEqual(set(got), {"level-1", "level-2"})
        self.assertGreaterEqual(got["level-1"] - sent["level-1"], 0.95)
        self.assertGreaterEqual(got["level-2"] - sent["level-2"], 1.95)

    def test_failing_handler_sees_message_again(self) -> None:
        self.server.create_topic("T_node_retry")
        self.node("produce", "T_node_retry", "P_node_retry", "3")
        events = self.node("failing", "T_node_retry", "C_node_retry", "first", "16", "3", "40")
        seen: dict[str, list[int]] = {}
        for e in events:
            if e["kind"] == "recv":
                seen.setdefault(e["body"], []).append(e["reconsume"])
        self.assertEqual(sorted(seen), ["node-0", "node-1", "node-2"])
        for body, reconsumes in seen.items():
            self.assertEqual(reconsumes[:2], [0, 1], body)

    def test_always_failing_ends_in_the_dlq(self) -> None:
        from rmqtx.remoting import RemotingCommand, RequestCode, ResponseCode
        from testkit.standalone import call

        self.server.create_topic("T_node_dlq")
        self.node("produce", "T_node_dlq", "P_node_dlq", "1")
        proc = subprocess.Popen([NODE, SCRIPT, "failing", self.server.namesrv, "T_node_dlq", "C_node_dlq", "always", "1", "99", "60"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def dlq_offset() -> str | None:
            resp = call(self.server.broker, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "%DLQ%C_node_dlq", "queueId": 0}))
            return resp.ext_fields["offset"] if resp.code == ResponseCode.SUCCESS else None

        try:
            wait_for(lambda: dlq_offset() == "1", 45, "the message in %DLQ%C_node_dlq")
        finally:
            proc.terminate()
            proc.wait(20)
        self.assertEqual(dlq_offset(), "1")


@unittest.skipUnless(NODE and MODULES.exists(), "node or interop/node/node_modules missing (tox installs them)")
class NodeDeadLetterTest(ServerPerTest, unittest.TestCase):
    """Issue 20 with ali-ons: the DLQ copy is stored within a second of the last failed delivery."""

    #: level 3 (the first retry) takes 3 s, so a second trip through the schedule topic would show
    server_conf = {"messageDelayLevel": "1s 2s 3s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"}

    def node(self, *args: str, timeout: float = 90) -> list[dict]:
        return run_client([NODE, SCRIPT, args[0], self.server.namesrv, *args[1:]], timeout)

    def test_dead_letter_is_stored_at_once(self) -> None:
        from rmqtx.remoting import RemotingCommand, RequestCode, ResponseCode
        from rmqtx.remoting.headers import QueryMessageRequestHeader
        from rmqtx.common.message import parse_properties
        from tests.broker.wire import decode_records
        from testkit.standalone import call

        self.server.create_topic("T_node_dead")
        self.node("produce", "T_node_dead", "P_node_dead", "1")
        events = self.node("failing", "T_node_dead", "C_node_dead", "always", "1", "99", "9")
        failed = [e for e in events if e["kind"] == "recv"]
        self.assertEqual([e["reconsume"] for e in failed], [0, 1])
        header = QueryMessageRequestHeader(topic="%DLQ%C_node_dead", key="node-key-0", maxNum=32, beginTimestamp=0,
                                           endTimestamp=2**63 - 1)
        found = call(self.server.broker, header.apply_to(RemotingCommand(RequestCode.QUERY_MESSAGE)))
        self.assertEqual(found.code, ResponseCode.SUCCESS, found.remark)
        (dead,) = decode_records(found.body)
        self.assertLess(dead.store_timestamp / 1000 - failed[-1]["at"], 1.0)
        props = parse_properties(dead.properties)
        self.assertEqual((props["DELAY"], props["WAIT"], props["RETRY_TOPIC"]), ("0", "false", "T_node_dead"))
        self.assertEqual((props["REAL_TOPIC"], props["TAGS"], props["KEYS"]), ("%RETRY%C_node_dead", "TagA", "node-key-0"))
        self.assertEqual(dead.reconsume_times, 2)
