"""Two NameServers and two rmqtx broker groups driven by the Apache RocketMQ 4.9.8 Java client: its
push consumer, a keyed producer (tests/cluster/java) and Apache's own benchmark Producer; Java mqadmin
lists both groups.

Trial-only in CI (JVMs and a build of 4.9.8): the pytest env ignores this file.
"""

from __future__ import annotations

import re
import unittest

from tests.admin.mqadmin_java import FAILURE_TEXT, MQAdmin
from tests.cluster import java_client
from tests.cluster.harness import CLUSTER, QUEUES, TOPIC, TwoGroups, rmqadmin, rows, stored
from tests.cluster.scenario import FailoverScenario, Run
from testkit.ha import wait_until
from tests.replay.cli import deliberate

BENCH_TOPIC = "T_cluster_bench"
BENCH_MESSAGES = 40000  # Apache's Producer -q: bounded, and still sending when b is killed (10000 ran out at 2.5k/s in CI)
BENCH_THREADS = 4
BENCH_MAIN = "org.apache.rocketmq.example.benchmark.Producer"
COMPLETE = re.compile(r"\[Complete\] Send Total: (\d+) .*Send Failed: (\d+) Response Failed: (\d+)")


class JavaClientClusterTest(java_client.JavaClients, FailoverScenario, unittest.TestCase):
    topics = [TOPIC, BENCH_TOPIC]

    def setUp(self) -> None:
        self.cps = java_client.classpaths()
        self.cluster = TwoGroups()
        self.addCleanup(lambda: self.assertEqual(self.cluster.close(), []))

    def bench_stored(self, run: Run, broker: str) -> int:
        return sum(stored({broker: run.brokers[broker]}, BENCH_TOPIC).values())

    def test_failover_with_the_java_client_and_benchmark_producer(self) -> None:
        a = self.cluster.rmqtx_broker("a").start()
        b = self.cluster.rmqtx_broker("b").start()
        seen: dict[str, int] = {}

        def while_up(run: Run) -> None:
            """Apache's benchmark Producer joins in; b dies once it has stored on both groups."""
            seen["bench"] = len(self.cluster.clients)
            self.cluster.start_client(self.java(BENCH_MAIN, "-n", self.cluster.namesrv, "-t", BENCH_TOPIC, "-w", str(BENCH_THREADS),
                                                "-s", "128", "-q", str(BENCH_MESSAGES), classpath=self.cps["example"]), "bench")
            wait_until(lambda: self.bench_stored(run, "a") >= 200 and self.bench_stored(run, "b") >= 200, 90,
                       "the benchmark Producer's messages on both groups", step=0.1)

        def while_down(run: Run) -> None:
            seen["a_at_kill"] = self.bench_stored(run, "a")
            bench = self.cluster.clients[seen["bench"]]
            wait_until(lambda: self.bench_stored(run, "a") >= seen["a_at_kill"] + 500, 60,
                       f"the benchmark Producer to go on sending to a (it printed {bench.snapshot().other[-3:]})", step=0.1)

        def before_checks(run: Run) -> None:
            bench = self.cluster.clients[seen["bench"]]
            self.assertEqual(bench.wait_exit(120), 0, bench.snapshot().other[-10:])
            done = [COMPLETE.search(line) for line in bench.snapshot().other]
            total, failed, response_failed = map(int, next(m for m in done if m).groups())
            # every send counted (Send Total leaves out the broker-refused ones); failures bounded by the
            # sends in flight when b died
            self.assertEqual(total + response_failed, BENCH_MESSAGES)
            self.assertLessEqual(failed + response_failed, BENCH_THREADS, bench.snapshot().other[-10:])
            acked = total - failed
            self.assertGreaterEqual(self.bench_stored(run, "a") + self.bench_stored(run, "b"), acked)
            seen["bench_failed"] = failed + response_failed

        run = self.failover(self.cluster, a, b, restart_b=b.start, while_up=while_up, while_down=while_down,
                            before_checks=before_checks)
        self.assertCountEqual(run.shares[0], [{f"a:{q}" for q in range(QUEUES)}, {f"b:{q}" for q in range(QUEUES)}])
        print(f"\nJava clients: keyed producer {len(run.produced.acked)} acked, {len(run.produced.failed)} failed; "
              f"benchmark Producer {BENCH_MESSAGES} sent, {seen['bench_failed']} failed; "
              f"{len(run.backlog)} acked on b unconsumed at its kill, all consumed after its restart")

        # Apache's mqadmin, given both NameServers, lists both groups, and prints the two-group route and
        # status exactly as rmqadmin does
        mqadmin = MQAdmin(self.cluster.namesrv)
        self.addCleanup(mqadmin.close)
        # once the consumers have committed every queue of both groups
        wait_until(lambda: "Diff Total: 0\n" in rmqadmin(self.cluster.namesrv, "consumerProgress", "-g", "C_cluster"), 60,
                   "the consumers' offsets committed up to the end on both groups", step=0.5)
        runs = mqadmin.run_all([("clusterList",), ("topicRoute", "-t", TOPIC), ("topicStatus", "-t", TOPIC),
                                ("consumerProgress", "-g", "C_cluster")])
        for out in runs:
            self.assertEqual(out.code, 0, str(out))
            self.assertIsNone(FAILURE_TEXT.search(out.text), str(out))
        cluster_list, route, status, progress = (r.out for r in runs)
        ours = rmqadmin(self.cluster.namesrv, "consumerProgress", "-g", "C_cluster")
        # the same rows (queues of both topics on both groups, and the retry topic) and Diff Total; Consume TPS moves
        self.assertEqual([line for line in progress.splitlines() if not line.startswith("Consume TPS")],
                         [line for line in ours.splitlines() if not line.startswith("Consume TPS")])
        self.assertEqual({r[1] for r in rows(progress) if r[0] == TOPIC}, {"a", "b"})
        listed = {tuple(line.split()[:5]) for line in cluster_list.splitlines() if line.strip() and not line.startswith("#")}
        self.assertEqual(listed, {(CLUSTER, "a", "0", a.addr, "V4_9_8"), (CLUSTER, "b", "0", b.addr, "V4_9_8")})
        ours, problems = deliberate("topicRoute", rmqadmin(self.cluster.namesrv, "topicRoute", "-t", TOPIC))
        self.assertEqual(problems, [])
        self.assertEqual(route, ours)  # rmqadmin's quoted broker ids (the replay's reviewed list) put back as mqadmin's
        self.assertEqual(status, rmqadmin(self.cluster.namesrv, "topicStatus", "-t", TOPIC))
        self.assertEqual({(r[0], int(r[1])): int(r[3]) for r in rows(status)}, stored(run.brokers, TOPIC))


if __name__ == "__main__":
    unittest.main()
