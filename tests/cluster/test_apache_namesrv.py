"""rmqtx brokers under Apache's NameServers: a 4.9.8 one and a 5.4.0 one side by side, two rmqtx broker
groups registered with both, and the Apache 4.9.8 Java client finding them only through those
NameServers. A user replacing brokers one by one runs exactly this.

The failover scenario runs across both groups (kill -9 and restart of one); then rmqadmin's cluster
list read through each Apache NameServer, and a clean stop of a group unregisters it from both.
Trial-only in CI (JVMs and the 4.9.8 build): the pytest env ignores this file.
"""

from __future__ import annotations

import os
import unittest
from pathlib import Path

from testkit import java as java498
from testkit import procs
from testkit.ha import wait_until
from tests.cluster import java_client
from tests.cluster.harness import CLUSTER, QUEUES, TOPIC, Namesrv, TwoGroups, rmqadmin, rows, stored
from tests.cluster.scenario import FailoverScenario


class ApacheNamesrv(Namesrv):
    """Apache's ``NamesrvStartup`` in its own JVM, with a minimal ROCKETMQ_HOME."""

    def __init__(self, root: Path, name: str, classpath: str, version: str) -> None:
        super().__init__(root, name)
        self.classpath = classpath
        self.version = version

    def start(self) -> "ApacheNamesrv":
        home = self.root / f"{self.name}-home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        # 4.9.8 reads its logback file from ROCKETMQ_HOME/conf; 5.x carries its own in the jar
        (home / "conf" / "logback_namesrv.xml").write_text(java498.LOGBACK.format(log=self.root / f"{self.name}.rocketmq.log"))
        conf = self.root / f"{self.name}.conf"
        conf.write_text(f"listenPort={self.port}\nkvConfigPath={self.root / f'{self.name}-kvConfig.json'}\n")
        cmd = [java498.java_bin(), "-Xms128m", "-Xmx256m", "-XX:+UseSerialGC", f"-Duser.home={home}",
               f"-Drocketmq.home.dir={home}", "-cp", self.classpath, "org.apache.rocketmq.namesrv.NamesrvStartup",
               "-c", str(conf)]
        self.proc = procs.spawn(cmd, self.log_path, cwd=home, env={**os.environ, "ROCKETMQ_HOME": str(home)})
        return self

    def stop(self) -> bool:
        procs.stop(self.proc, grace=30)
        return True


class ApacheNamesrvs(TwoGroups):
    """TwoGroups whose NameServers are Apache 4.9.8's and Apache 5.4.0's."""

    def __init__(self, classpaths: dict[str, str]) -> None:
        self._classpaths = classpaths
        super().__init__()

    def make_namesrvs(self) -> list[Namesrv]:
        return [ApacheNamesrv(self.root, "apache-4.9.8", self._classpaths["namesrv"], "4.9.8").start(),
                ApacheNamesrv(self.root, "apache-5.4.0", self._classpaths["namesrv5"], "5.4.0").start()]


def apache5_classpath() -> str:
    from testkit.apache5 import ApacheUnavailable, classpath

    try:
        return classpath()
    except ApacheUnavailable as e:
        raise java_client.unavailable(str(e)) from None


class ApacheNamesrvTest(java_client.JavaClients, FailoverScenario, unittest.TestCase):
    topics = [TOPIC]

    def setUp(self) -> None:
        self.cps = java_client.classpaths()
        self.cluster = ApacheNamesrvs({**self.cps, "namesrv5": apache5_classpath()})
        self.addCleanup(lambda: self.assertEqual(self.cluster.close(), []))

    def test_rmqtx_groups_under_apache_4_9_8_and_5_4_0_namesrvs(self) -> None:
        a = self.cluster.rmqtx_broker("a").start()
        b = self.cluster.rmqtx_broker("b").start()
        run = self.failover(self.cluster, a, b, restart_b=b.start)
        self.assertCountEqual(run.shares[0], [{f"a:{q}" for q in range(QUEUES)}, {f"b:{q}" for q in range(QUEUES)}])
        print(f"\nrmqtx a + rmqtx b under Apache 4.9.8 and 5.4.0 NameServers: {len(run.produced.acked)} acked, "
              f"{len(run.produced.failed)} failed; {len(run.backlog)} acked on b at its kill, consumed after its restart")

        for ns in self.cluster.namesrvs:  # the cluster list and topic status, read through each Apache NameServer
            listed = {(r[0], r[1], r[3], r[4]) for r in rows(rmqadmin(ns.addr, "clusterList"))}
            self.assertEqual(listed, {(CLUSTER, "a", a.addr, "V4_9_8"), (CLUSTER, "b", b.addr, "V4_9_8")}, ns.name)
            status = {(r[0], int(r[1])): int(r[3]) for r in rows(rmqadmin(ns.addr, "topicStatus", "-t", TOPIC))}
            self.assertEqual(status, stored(run.brokers, TOPIC), ns.name)

        self.assertTrue(b.stop())  # a clean stop sends UNREGISTER_BROKER to both
        for ns in self.cluster.namesrvs:
            wait_until(lambda: ns.masters() == {"a": a.addr}, 10, f"{ns.name} to drop b", step=0.1)


if __name__ == "__main__":
    unittest.main()
