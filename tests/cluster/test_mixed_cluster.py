"""A mixed cluster: rmqtx NameServers, an rmqtx broker group ``a`` and an Apache RocketMQ 4.9.8 broker
group ``b`` (the Java broker of ``testkit/java.py``'s 4.9.8 build, as in tests/ha/test_mixed_java.py).
The Java client sends and consumes across both, through a kill -9 and restart of the Java group.

Trial-only in CI (JVMs and a build of 4.9.8): the pytest env ignores this file.
"""

from __future__ import annotations

import unittest

from tests.cluster import java_client
from tests.cluster.harness import CLUSTER, QUEUES, TOPIC, TwoGroups, rmqadmin, rows, stored
from tests.cluster.scenario import FailoverScenario
from testkit.java import JavaBroker


class MixedClusterTest(java_client.JavaClients, FailoverScenario, unittest.TestCase):
    topics = [TOPIC]

    def setUp(self) -> None:
        self.cps = java_client.classpaths()
        self.cluster = TwoGroups()
        self.addCleanup(lambda: self.assertEqual(self.cluster.close(), []))

    def test_rmqtx_group_and_java_group(self) -> None:
        a = self.cluster.rmqtx_broker("a").start()
        b = JavaBroker(self.cluster.root, "java-b", self.cluster.namesrv,
                       {"brokerName": "b", "brokerClusterName": CLUSTER, "mappedFileSizeCommitLog": str(4 * 1024 * 1024)})
        self.cluster.procs.append(b)
        b.start()
        run = self.failover(self.cluster, a, b, restart_b=b.start)
        self.assertCountEqual(run.shares[0], [{f"a:{q}" for q in range(QUEUES)}, {f"b:{q}" for q in range(QUEUES)}])
        print(f"\nrmqtx a + Java b: {len(run.produced.acked)} acked "
              f"(a {sum(1 for v in run.produced.acked.values() if v[0] == 'a')}, "
              f"b {sum(1 for v in run.produced.acked.values() if v[0] == 'b')}), {len(run.produced.failed)} failed; "
              f"{len(run.backlog)} acked on the Java group unconsumed at its kill, all consumed after its restart")

        # rmqadmin reads both kinds of broker through either NameServer
        listed = {(r[0], r[1], r[3], r[4]) for r in rows(rmqadmin(self.cluster.namesrv, "clusterList"))}
        self.assertEqual(listed, {(CLUSTER, "a", a.addr, "V4_9_8"), (CLUSTER, "b", b.addr, "V4_9_8")})
        status = {(r[0], int(r[1])): int(r[3]) for r in rows(rmqadmin(self.cluster.namesrvs[1].addr, "topicStatus", "-t", TOPIC))}
        self.assertEqual(status, stored(run.brokers, TOPIC))


if __name__ == "__main__":
    unittest.main()
