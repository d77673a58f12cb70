"""End to end: the Node client ``ali-ons`` against a real rmqtx standalone."""

from __future__ import annotations

import shutil
import unittest
from pathlib import Path

from tests.e2e.harness import REPO, ServerPerTest, run_client

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
