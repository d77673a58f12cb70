"""Consumers (rmqtx Python client) read from the slave while the master is down, and from the master
again after its restart, without losing a message."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import unittest

from rmqtx.remoting.codes import ResponseCode
from testkit.standalone import REPO
from testkit.ha import Cluster, Sender, wait_until

TOPIC = "T_failover"


class ConsumerFailoverTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = Cluster()
        self.consumer: subprocess.Popen | None = None
        self.lines: list[dict] = []

    def tearDown(self) -> None:
        if self.consumer is not None and self.consumer.poll() is None:
            self.consumer.kill()
            self.consumer.wait(10)
        self.assertEqual(self.cluster.close(), [])

    def _start_consumer(self, seconds: float) -> None:
        self.consumer = subprocess.Popen([sys.executable, "-m", "tests.ha.consume_script", self.cluster.namesrv.addr, TOPIC,
                                          str(seconds)], cwd=REPO, stdout=subprocess.PIPE, text=True)

        def read() -> None:
            assert self.consumer is not None and self.consumer.stdout is not None
            for line in self.consumer.stdout:
                if line.startswith("{"):
                    self.lines.append(json.loads(line))
        threading.Thread(target=read, daemon=True).start()

    def _bodies(self) -> set[str]:
        return {line["body"] for line in list(self.lines) if "body" in line}

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

    def test_consume_from_slave_while_master_down_then_from_master(self) -> None:
        master = self.cluster.broker("master", brokerRole="SYNC_MASTER").start()
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1).start()
        wait_until(lambda: "requests offset" in master.log(), 20, "the slave's first report")
        # the slave copies the master's topic table within its sync period (3 s, then every 10 s)
        first = self._send(master, "before", 200)
        wait_until(lambda: TOPIC.encode() in (slave.store / "config" / "topics.json").read_bytes(), 30,
                   "the topic on the slave")
        master.kill9()
        namesrv = self.cluster.namesrv
        wait_until(lambda: namesrv.broker_addrs() == {1: slave.addr}, 20, "the NameServer to drop the master")
        self._start_consumer(50)
        wait_until(lambda: self._bodies() >= first, 30, "every acked message read from the slave")
        self.assertEqual(int(slave.runtime().get("msgGetTotalTodayNow", "0")) >= len(first), True)
        master.start()
        wait_until(lambda: namesrv.broker_addrs() == {0: master.addr, 1: slave.addr}, 30, "the master back in the route")
        wait_until(lambda: master.log_count("requests offset") >= 2, 30, "the slave to reconnect")
        second = self._send(master, "after", 200)
        wait_until(lambda: self._bodies() >= first | second, 30, "the messages sent after the restart")
        self.assertEqual(self._bodies(), first | second)
        # the slave suggests the master (slaveReadEnable off), so the consumer went back to it
        wait_until(lambda: int(master.runtime().get("msgGetTotalTodayNow", "0")) > 0, 10, "reads served by the master")


if __name__ == "__main__":
    unittest.main()
