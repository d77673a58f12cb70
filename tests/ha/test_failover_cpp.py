"""The Apache C++ client (PyPI ``rocketmq``) push consumer reads from the slave while the master is
down and goes on with what is sent to the master after its restart, losing nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import unittest

from rmqtx.remoting.codes import ResponseCode
from testkit.standalone import REPO
from testkit.ha import Cluster, Sender, wait_until

try:
    import rocketmq.client  # noqa: F401
except (ImportError, OSError):  # the wheel bundles librocketmq; a missing one is a machine problem
    rocketmq = None

TOPIC = "T_failover_cpp"


@unittest.skipIf(rocketmq is None, "the C++ client (pip rocketmq==0.4.4) is not installed")
class CppConsumerFailoverTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = Cluster()
        self.consumer: subprocess.Popen | None = None
        self.lines: list[dict] = []

    def tearDown(self) -> None:
        if self.consumer is not None and self.consumer.poll() is None:
            self.consumer.kill()
            self.consumer.wait(10)
        self.assertEqual(self.cluster.close(), [])

    def _send(self, broker, prefix: str, count: int) -> set[str]:
        sender = Sender(broker.addr)
        sent = set()
        for i in range(count):
            body = f"{prefix}-{i}"
            resp = sender.send(TOPIC, body.encode(), i % 4)
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
            sent.add(body)
        sender.close()
        return sent

    def _bodies(self) -> set[str]:
        return {line["body"] for line in list(self.lines) if line.get("kind") == "recv"}

    def test_push_consumer_fails_over_and_back(self) -> None:
        master = self.cluster.broker("master", brokerRole="SYNC_MASTER").start()
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1).start()
        wait_until(lambda: "requests offset" in master.log(), 20, "the slave's first report")
        first = self._send(master, "before", 100)
        wait_until(lambda: TOPIC.encode() in (slave.store / "config" / "topics.json").read_bytes(), 30,
                   "the topic on the slave")
        master.kill9()
        namesrv = self.cluster.namesrv
        wait_until(lambda: namesrv.broker_addrs() == {1: slave.addr}, 20, "the NameServer to drop the master")
        self.consumer = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "e2e" / "cpp_client.py"), "push", namesrv.addr, TOPIC, "C_cpp_failover",
             "*", "CLUSTERING", "200", "55"], cwd=REPO, stdout=subprocess.PIPE, text=True)

        def read() -> None:
            assert self.consumer is not None and self.consumer.stdout is not None
            for line in self.consumer.stdout:
                if line.startswith("{"):
                    self.lines.append(json.loads(line))
        threading.Thread(target=read, daemon=True).start()
        wait_until(lambda: self._bodies() >= first, 40, "every acked message read from the slave")
        master.start()
        wait_until(lambda: namesrv.broker_addrs() == {0: master.addr, 1: slave.addr}, 30, "the master back in the route")
        wait_until(lambda: master.log_count("requests offset") >= 2, 30, "the slave to reconnect")
        second = self._send(master, "after", 100)
        wait_until(lambda: self._bodies() >= first | second, 45, "the messages sent after the restart")
        self.assertEqual(self._bodies(), first | second)


if __name__ == "__main__":
    unittest.main()
