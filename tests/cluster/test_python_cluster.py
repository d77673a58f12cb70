"""Two NameServers and two rmqtx broker groups, driven by rmqtx's Python client; rmqadmin's views of
the cluster (clusterList, topicRoute, topicStatus) through both NameServers."""

from __future__ import annotations

import json
import re
import unittest

from tests.cluster.harness import CLUSTER, QUEUES, TOPIC, TwoGroups, python_client, rmqadmin, rows, stored
from tests.cluster.scenario import FailoverScenario
from testkit.ha import wait_until

PAUSE_MS = "10"


class PythonClientClusterTest(FailoverScenario, unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = TwoGroups()
        self.addCleanup(lambda: self.assertEqual(self.cluster.close(), []))

    def producer_argv(self, cluster: TwoGroups, prefix: str) -> list[str]:
        return python_client("produce", cluster.namesrv, TOPIC, "2", prefix, PAUSE_MS)

    def consumer_argv(self, cluster: TwoGroups, group: str) -> list[str]:
        return python_client("consume", cluster.namesrv, ",".join(self.topics), group)

    def create_topic(self, cluster: TwoGroups, brokers: dict[str, str], topic: str) -> None:
        """rmqadmin updateTopic -c: on every master of the cluster, found through the NameServers."""
        out = rmqadmin(cluster.namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", str(QUEUES), "-w", str(QUEUES))
        self.assertEqual(sorted(line for line in out.splitlines() if line.startswith("create topic to")),
                         sorted(f"create topic to {addr} success." for addr in brokers.values()))

    def test_failover_and_admin_views(self) -> None:
        a = self.cluster.rmqtx_broker("a").start()
        b = self.cluster.rmqtx_broker("b").start()
        ns1 = self.cluster.namesrvs[0]
        # NameServer ns1 dies with group b and stays down until the end: clients that asked it move to
        # ns2, which alone sees b leave and come back; brokers keep registering with ns2
        run = self.failover(self.cluster, a, b, restart_b=b.start, while_down=lambda run: ns1.kill9())
        self.assertCountEqual(run.shares[0], [{f"a:{q}" for q in range(QUEUES)}, {f"b:{q}" for q in range(QUEUES)}])
        self.assertEqual(sorted(map(len, run.shares[1])), [2, 2])
        # ns1 back, empty: both groups register with it again (failed registrations are retried)
        ns1.start()
        wait_until(ns1.ready, 30, "ns1 to restart")
        self.cluster.wait_registered({"a": a.addr, "b": b.addr}, timeout=40)
        self.cluster.wait_route(TOPIC, {"a", "b"})

        # rmqadmin, through either NameServer and through both, lists both groups
        for namesrv in [*(ns.addr for ns in self.cluster.namesrvs), self.cluster.namesrv]:
            listed = {(r[0], r[1], r[2], r[3]) for r in rows(rmqadmin(namesrv, "clusterList"))}
            self.assertEqual(listed, {(CLUSTER, "a", "0", a.addr), (CLUSTER, "b", "0", b.addr)})
        route = json.loads(re.sub(r"\{(\d+):", r'{"\1":', rmqadmin(self.cluster.namesrv, "topicRoute", "-t", TOPIC)))
        self.assertEqual(sorted((q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]),
                         [("a", QUEUES, QUEUES, 6), ("b", QUEUES, QUEUES, 6)])
        self.assertEqual({d["brokerName"]: d["brokerAddrs"]["0"] for d in route["brokerDatas"]}, {"a": a.addr, "b": b.addr})
        status = {(r[0], int(r[1])): (int(r[2]), int(r[3])) for r in rows(rmqadmin(self.cluster.namesrv, "topicStatus", "-t", TOPIC))}
        self.assertEqual(status, {k: (0, v) for k, v in stored(run.brokers, TOPIC).items()})

    def test_losing_group_a(self) -> None:
        """The same with the roles swapped: group a dies (kill -9) and comes back, b carries on."""
        a = self.cluster.rmqtx_broker("a").start()
        b = self.cluster.rmqtx_broker("b").start()
        run = self.failover(self.cluster, b, a, restart_b=a.start, names=("b", "a"))
        self.assertCountEqual(run.shares[0], [{f"a:{q}" for q in range(QUEUES)}, {f"b:{q}" for q in range(QUEUES)}])
        self.assertEqual(sorted(map(len, run.shares[1])), [2, 2])
        self.assertTrue(all(name.startswith("b:") for share in run.shares[1] for name in share), run.shares[1])


if __name__ == "__main__":
    unittest.main()
