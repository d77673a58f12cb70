"""The Apache RocketMQ 5.3.3 remoting client's own POP calls against rmqtx (its push consumer in POP mode
is the interop matrix's ``pop`` cell of the java5 column)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from testkit.standalone import Standalone

HERE = Path(__file__).resolve().parent
_classpath: str | None = None


def java_classpath() -> str:
    """rocketmq-client 5.3.3 and its dependencies, resolved by Maven from tests/pop/java/pom.xml (once)."""
    global _classpath
    if _classpath is None:
        out = Path(tempfile.mkdtemp(prefix="rmqtx-pop-cp-")) / "cp.txt"
        subprocess.run(["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
                       cwd=HERE / "java", check=True, timeout=600, capture_output=True)
        _classpath = out.read_text().strip()
    return _classpath


class JavaPopApiTest(unittest.TestCase):
    """The 5.3.3 client's own pop, ack, batch ack and change-invisible calls parse rmqtx's answers."""

    def setUp(self) -> None:
        self.server = Standalone({"reviveInterval": "100"}).start()
        self.addCleanup(self.server.close)

    def test_client_api_orderly_and_unordered(self) -> None:
        s = self.server
        s.create_topic("ApiT", 1)
        proc = subprocess.run(
            ["java", "-Drocketmq.client.logUseSlf4j=false", "-cp", java_classpath(), str(HERE / "java" / "PopApi.java"),
             s.namesrv, s.broker, "broker-a", "ApiT", "AG"],
            capture_output=True, text=True, timeout=180, cwd=tempfile.gettempdir(),
            env={**os.environ, "ROCKETMQ_HOME": tempfile.gettempdir()},
        )
        self.assertEqual(proc.returncode, 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        steps: dict[str, list[dict]] = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                steps.setdefault(event["step"], []).append(event)

        def bodies(step: str, i: int = 0) -> list[tuple[str, int]]:
            return [(m["body"], m["reconsumeTimes"]) for m in steps[step][i]["msgs"]]

        self.assertEqual(bodies("order-first"), [("o0", 0), ("o1", 0)])
        self.assertEqual(steps["order-first"][0]["msgs"][0]["popCk"].split(" ")[3], "999")
        self.assertEqual(steps["order-locked"][0]["status"], "POLLING_NOT_FOUND")
        self.assertEqual(bodies("order-again"), [("o0", 1), ("o1", 1)])  # orderCountInfo read by the client
        self.assertEqual([e["ack"] for e in steps["order-ack"]], ["OK", "OK"])
        self.assertEqual(bodies("order-next"), [("o2", 0)])
        self.assertEqual(len(bodies("unordered-first")), 6)
        self.assertEqual(steps["batch-ack"][0]["ack"], "OK")
        changed = steps["change-invisible"][0]
        self.assertEqual(changed["ack"], "OK")
        self.assertEqual(changed["extraInfo"].split(" ")[2], "1000")
        back = [m for e in steps["unordered-back"] for m in e["msgs"]]
        self.assertEqual(sorted((m["body"], m["reconsumeTimes"]) for m in back), [("u0", 1), ("u1", 1), ("u2", 1)])
        self.assertTrue(all(m["popCk"].split(" ")[4] == "1" for m in back))
        self.assertEqual([e["ack"] for e in steps["retry-ack"]], ["OK"] * 3)
        self.assertEqual(steps["unordered-after"][0]["msgs"], [], "batch-acked or acked messages came back")
