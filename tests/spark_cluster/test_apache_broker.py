"""The network source and sink against an Apache RocketMQ 4.9.8 broker group next to an rmqtx one.

One rmqtx NameServer with broker group a (rmqtx) and b (the Apache 4.9.8 broker jar, built once from
the source release by testkit/java.py into ~/.cache/rmqtx-bench). Slow (a JVM broker):
run once per CI, under trial (tox's pytest env ignores tests/spark_cluster).
"""
from __future__ import annotations

import atexit
import os
import tempfile

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import call
from testkit.ha import Cluster as Servers
from testkit.ha import Sender, wait_until
from testkit.java import JavaBroker, java_classpaths
from tests.spark.support import NO_SPARK, SparkTestCase, requires_spark

if not NO_SPARK:
    from rmqtx.spark.wire import Cluster

TOPIC = "A_MIXED"


@requires_spark
class ApacheBrokerTest(SparkTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        java_classpaths()  # builds once on a fresh machine, cached after
        super().setUpClass()
        cls.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-spark-apache-")
        cls.servers = Servers()
        atexit.register(cls.servers.close)  # trial runs no tearDownClass
        conf = {"brokerClusterName": "SparkCluster", "enablePropertyFilter": "true"}
        cls.servers.broker("broker-a", brokerName="broker-a", **conf).start()
        java = JavaBroker(cls.servers.root, "broker-b", cls.servers.namesrv.addr, {"brokerName": "broker-b", **conf})
        cls.servers.procs.append(java)
        java.start(timeout=120)
        cls.addrs = {p.name: p.addr for p in cls.servers.procs[1:]}
        cls.namesrv = cls.servers.namesrv.addr
        fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        for addr in cls.addrs.values():
            assert call(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)).code == ResponseCode.SUCCESS
        wait_until(lambda: {q.broker for q in Cluster(cls.namesrv).queues(TOPIC)} == {"broker-a", "broker-b"}, 60,
                   "both groups in the route")
        cls.sent = cls.send(0, 80)

    @classmethod
    def send(cls, first: int, count: int) -> list[dict]:
        out = []
        senders = {name: Sender(addr, "P_spark_apache") for name, addr in cls.addrs.items()}
        try:
            for i in range(first, first + count):
                name = ("broker-a", "broker-b")[i % 2]
                resp = senders[name].send(TOPIC, f"x-{i}".encode(), (i // 2) % 2, TAGS=f"Tag{i % 3}", n=str(i))
                assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
                out.append({"i": i, "broker": name, "body": f"x-{i}".encode(), "tag": f"Tag{i % 3}"})
        finally:
            for s in senders.values():
                s.close()
        return out

    @classmethod
    def tearDownClass(cls) -> None:
        cls.servers.close()
        cls.tmp.cleanup()
        super().tearDownClass()

    def read(self, **options):
        return (self.spark.read.format("rocketmq").option("namesrv", self.namesrv).option("topics", TOPIC)
                .options(**{k: str(v) for k, v in options.items()}).load())

    def test_batch_filters_and_group_offsets_on_both_brokers(self) -> None:
        def mine(df) -> list:  # the sink test may have added w-* messages to the topic already
            return [r for r in df.collect() if r["body"].startswith(b"x-")]

        rows = mine(self.read())
        by_broker = {b: sorted(r["body"] for r in rows if r["brokerName"] == b) for b in ("broker-a", "broker-b")}
        for b in by_broker:
            self.assertEqual(by_broker[b], sorted(s["body"] for s in self.sent if s["broker"] == b))
        java_row = next(r for r in rows if r["brokerName"] == "broker-b")
        self.assertEqual(java_row["storeHost"], self.addrs["broker-b"])
        self.assertEqual(java_row["properties"]["n"], java_row["body"].decode()[2:])
        tags = mine(self.read(filterExpression="Tag1"))
        self.assertEqual(sorted(r["body"] for r in tags), sorted(s["body"] for s in self.sent if s["tag"] == "Tag1"))
        sql = self.read(filterType="SQL92", filterExpression="n BETWEEN 10 AND 29").collect()
        self.assertEqual(sorted(r["body"] for r in sql), sorted(s["body"] for s in self.sent if 10 <= s["i"] <= 29))
        total = self.read(group="G_apache", commitOffsets="true").count()
        self.assertGreaterEqual(total, 80)
        with Cluster(self.namesrv) as c:
            queues = c.queues(TOPIC)
            committed = {q.key: c.committed_offset(q, "G_apache") for q in queues}
            newest = {q.key: c.max_offset(q) for q in queues}
        self.assertEqual(committed, newest)
        self.assertEqual(sum(newest.values()), total)

    def test_sink_and_stream_through_the_apache_broker(self) -> None:
        out = os.path.join(self.tmp.name, "out")
        ckpt = os.path.join(self.tmp.name, "ckpt")

        def run_stream() -> None:
            q = (self.spark.readStream.format("rocketmq").option("namesrv", self.namesrv).option("topics", TOPIC)
                 .option("startingOffsets", "earliest").load().select("brokerName", "body")
                 .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt).start())
            try:
                q.processAllAvailable()
            finally:
                q.stop()

        run_stream()
        extra = [(f"w-{i}".encode(), f"Tag{i % 3}") for i in range(60)]
        # batches of 4: each partition's producer sends several batches round the topic's 4 queues, so both
        # groups get some (with the default 32 a partition may be a single batch to one queue)
        self.spark.createDataFrame(extra, "body binary, tags string").write.format("rocketmq") \
            .option("namesrv", self.namesrv).option("topic", TOPIC).option("batchSize", "4").mode("append").save()
        run_stream()
        got = self.spark.read.parquet(out).collect()
        want = sorted([s["body"] for s in self.sent] + [b for b, _ in extra])
        self.assertTrue(set(want) <= {r["body"] for r in got})
        written = sorted(r["body"] for r in got if r["body"].startswith(b"w-"))
        self.assertEqual(written, sorted(b for b, _ in extra))  # each written row read exactly once
        self.assertEqual(len(got), len({(r["brokerName"], r["body"]) for r in got}))
        self.assertIn("broker-b", {r["brokerName"] for r in got if r["body"].startswith(b"w-")})
