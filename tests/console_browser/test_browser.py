"""A real headless chromium (Debian's, driven by npm playwright-core) through every console page (trial-only).

Each page's screenshot is kept under build/console-screenshots (or $RMQTX_ARTIFACTS/console-screenshots);
RMQTX_UPDATE_DOCS=1 also refreshes docs/console.png from the groups page.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import unittest
from pathlib import Path

from tests.console.support import OnlineConsumer, commit_offset, get_json, post_json, send_back_to_dlq
from testkit.ports import free_port
from testkit.standalone import REPO, Standalone

HERE = Path(__file__).resolve().parent
PAGES = ("cluster", "topics", "groups", "messages", "dlq", "send")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def artifacts_dir() -> Path:
    root = Path(os.environ.get("RMQTX_ARTIFACTS") or REPO / "build")
    out = root / "console-screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise AssertionError("no chromium on PATH: run scripts/ensure-console.sh")
    return found


class ConsoleBrowserTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = Standalone({"consoleAdminEnable": "true", "brokerName": "broker-a"})
        port = free_port()
        self.server.plugin_args = ["--console-port", str(port)]  # the twistd flag turns the console on
        self.server.start()
        self.base = f"http://127.0.0.1:{port}"
        self.consumer: OnlineConsumer | None = None

    def tearDown(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        self.assertTrue(clean, f"standalone did not shut down cleanly\n{log}")

    def _seed(self) -> None:
        """A topic with messages (one keyed), a group with lag and a connection, one dead letter."""
        self.assertEqual(post_json(self.base, "topic", {"topic": "OrderEvents", "readQueueNums": 4, "writeQueueNums": 4})[0], 200)
        for i in range(12):
            self.server.send_to_queue("OrderEvents", i % 4, json.dumps({"order": 1000 + i, "state": "PAID"}))
        status, keyed = post_json(self.base, "send", {"topic": "OrderEvents", "keys": "order-42", "tags": "Paid", "queueId": 0,
                                                      "body": '{"order": 42, "state": "PAID"}'})
        self.assertEqual(status, 200, keyed)
        for qid, offset in ((0, 1), (1, 3), (2, 0), (3, 2)):
            commit_offset(self.server, "BillingService", "OrderEvents", qid, offset)
        self.consumer = OnlineConsumer(self.server, "BillingService", "OrderEvents", "10.0.0.7@billing-1")
        dead = get_json(self.base, "messages", by="offset", topic="OrderEvents", queueId=2, offset=0)[1]["messages"][0]
        send_back_to_dlq(self.server, "BillingService", dead["offsetMsgId"])

    def test_every_page_and_admin_actions_in_chromium(self) -> None:
        self._seed()
        out = artifacts_dir()
        for page in PAGES:
            (out / f"{page}.png").unlink(missing_ok=True)
        cfg = {"base": self.base, "out": str(out), "chromium": chromium_path(), "topic": "OrderEvents",
               "group": "BillingService", "key": "order-42", "newTopic": "MadeInBrowser"}
        proc = subprocess.run(["node", str(HERE / "drive.js"), json.dumps(cfg)], cwd=HERE, capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 0, f"{proc.stderr}\n{proc.stdout}\n{self.server.log()}")
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        self.assertEqual([x for x in lines if "pageError" in x], [])
        self.assertEqual(lines[-1], {"done": True})
        shown = {x["page"]: x for x in lines if "page" in x}
        self.assertEqual(sorted(shown), sorted(PAGES))
        for page in PAGES:
            data = (out / f"{page}.png").read_bytes()
            self.assertTrue(data.startswith(PNG_MAGIC) and len(data) > 10_000, page)

        self.assertIn("V4_9_8", shown["cluster"]["text"])
        self.assertIn(self.server.broker, shown["cluster"]["text"])
        self.assertIn("MadeInBrowser", shown["topics"]["text"])
        self.assertIn("10.0.0.7@billing-1", shown["groups"]["text"])
        self.assertIn("order-42", shown["messages"]["text"])
        self.assertIn('{"order": 42, "state": "PAID"}', shown["messages"]["text"])
        self.assertIn("resent to %RETRY%BillingService", shown["dlq"]["notice"])
        self.assertIn("sent: msgId", shown["send"]["notice"])

        # the admin actions reached the broker
        status, made = get_json(self.base, "topic", topic="MadeInBrowser")
        self.assertEqual((status, made["readQueueNums"], made["writeQueueNums"]), (200, 2, 2))
        retried = get_json(self.base, "messages", by="offset", topic="%RETRY%BillingService", queueId=0, offset=0)[1]["messages"]
        self.assertEqual([m["properties"]["RETRY_TOPIC"] for m in retried], ["OrderEvents"])
        sent_id = shown["send"]["notice"].split("msgId ", 1)[1].strip()
        found = get_json(self.base, "messages", by="id", id=sent_id, topic="OrderEvents")[1]["messages"]
        self.assertEqual([(m["bodyText"], m["tags"]) for m in found], [("sent from chromium", "FromBrowser")])
        if os.environ.get("RMQTX_UPDATE_DOCS") == "1":
            shutil.copyfile(out / "groups.png", REPO / "docs" / "console.png")


if __name__ == "__main__":
    unittest.main()
