"""The Apache RocketMQ 5.3.3 remoting push consumer in POP mode (client rebalance off, the group set to
POP with SET_MESSAGE_REQUEST_MODE as ``mqadmin setConsumeMode`` does): every message is consumed, the
refused one comes back from the pop retry topic after its new invisible time."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

import orjson

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from tests.e2e.harness import Standalone, call

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


class JavaPopConsumerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = Standalone({"reviveInterval": "200"}).start()
        self.addCleanup(self.server.close)

    def test_push_consumer_in_pop_mode(self) -> None:
        s = self.server
        s.create_topic("JPop", 4)
        body = orjson.dumps({"topic": "JPop", "consumerGroup": "JG", "mode": "POP", "popShareQueueNum": 0})
        r = call(s.broker, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, None, body=body))
        self.assertEqual(r.code, ResponseCode.SUCCESS)
        bodies = [f"m{i}" for i in range(12)] + ["fail-once"]
        for i, b in enumerate(bodies):
            s.send_to_queue("JPop", i % 4, b)
        proc = subprocess.run(
            ["java", "-Drocketmq.client.logUseSlf4j=false", "-cp", java_classpath(), str(HERE / "java" / "PopScenario.java"),
             s.namesrv, "JPop", "JG", str(len(bodies)), "90"],
            capture_output=True, text=True, timeout=180, cwd=tempfile.gettempdir(),
            env={**os.environ, "ROCKETMQ_HOME": tempfile.gettempdir()},
        )
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        self.assertEqual(proc.returncode, 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        consumed = [e for e in lines if "body" in e]
        self.assertEqual({e["body"] for e in consumed}, set(bodies))
        for e in consumed:
            self.assertEqual(e["topic"], "JPop")
            self.assertEqual(len(e["popCk"].split(" ")), 8, e)
        fail = [e for e in consumed if e["body"] == "fail-once"]
        self.assertEqual([(e["reconsumeTimes"], e["refused"]) for e in fail], [(0, True), (1, False)])
        self.assertEqual(fail[1]["popCk"].split(" ")[4], "1")  # it came back through %RETRY%JG_JPop
        self.assertEqual(sum(1 for e in consumed if e["body"] != "fail-once"), len(bodies) - 1, "a message came twice")


if __name__ == "__main__":
    unittest.main()
