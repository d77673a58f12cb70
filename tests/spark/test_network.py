"""The `rocketmq` source and sink over the network against two live rmqtx broker groups (local Spark)."""
from __future__ import annotations

import atexit
import json
import os
import tempfile
import time

from rmqtx.remoting.codes import ResponseCode

from .support import NO_SPARK, SparkTestCase, requires_spark

if not NO_SPARK:
    from pyspark.sql import functions as F

    from rmqtx.spark.wire import Cluster

    from .brokers import TwoBrokers


def now_ms() -> int:
    return int(time.time() * 1000)


def millis_of(dt) -> int:
    """Epoch ms of a collected timestamp (PySpark hands them out as naive local times)."""
    return round(dt.timestamp() * 1000)


def wait_past(ms: int) -> None:
    """Until the clock has passed ms (store times after this are later than ms)."""
    while now_ms() <= ms:
        time.sleep(0.001)


@requires_spark
class NetworkTest(SparkTestCase):
    """One NameServer and broker groups a and b for the class; each test uses its own topics."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.brokers = TwoBrokers()
        atexit.register(cls.brokers.close)  # trial runs no tearDownClass
        cls.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-spark-net-")

    @classmethod
    def tearDownClass(cls) -> None:
        bad = cls.brokers.close()
        cls.tmp.cleanup()
        super().tearDownClass()
        assert not bad, f"not shut down cleanly: {bad}"

    def read(self, topics: str, **options):
        reader = self.spark.read.format("rocketmq").option("namesrv", self.brokers.namesrv).option("topics", topics)
        return reader.options(**{k: str(v) for k, v in options.items()}).load()

    def topic(self, name: str, count: int, queues: int = 2, **kw) -> list[dict]:
        self.brokers.create_topic(name, queues)
        return self.brokers.fill(name, count, queues, **kw) if count else []

    @staticmethod
    def bodies(df) -> list[bytes]:
        return sorted(r["body"] for r in df.select("body").collect())

    # ---- batch ---------------------------------------------------------------------------------

    def test_reads_every_message_of_both_groups_field_for_field(self) -> None:
        sent = self.topic("N_ALL", 120)
        df = self.read("N_ALL")
        self.assertEqual(df.rdd.getNumPartitions(), 4)  # 2 queues x 2 broker groups
        rows = df.collect()
        self.assertEqual(len(rows), 120)
        got = {(r["brokerName"], r["queueId"], r["queueOffset"]): r for r in rows}
        self.assertEqual(len(got), 120)
        for s in sent:
            r = got[(s["broker"], s["queueId"], s["queueOffset"])]
            self.assertEqual(r["body"], s["body"])
            self.assertEqual((r["topic"], r["tags"], r["keys"], r["uniqKey"]),
                             ("N_ALL", s["tags"], [f"k{s['i']}"], f"N_ALL-m-{s['i']}"))
            self.assertEqual(r["properties"]["n"], str(s["i"]))
            self.assertEqual(r["storeHost"], self.brokers.brokers[s["broker"]].addr)
        # the same rows when each queue's range is cut into many partitions
        small = self.read("N_ALL", messagesPerPartition=7)
        self.assertEqual(small.rdd.getNumPartitions(), 4 * 5)  # 30 per queue -> 5 ranges of <= 7
        self.assertEqual(sorted(tuple(r) for r in small.drop("bornHost").collect()),
                         sorted(tuple(r) for r in df.drop("bornHost").collect()))

    def test_rows_match_the_file_mode_reading_the_brokers_store(self) -> None:
        self.topic("N_FILE", 40)
        net = self.read("N_FILE").where(F.col("brokerName") == "broker-a").drop("brokerName")
        store = str(self.brokers.brokers["broker-a"].store)
        files = self.spark.read.format("rocketmq").option("topics", "N_FILE").load(store)
        self.assertEqual(net.schema, files.schema)
        self.assertEqual(sorted(tuple(r) for r in net.collect()), sorted(tuple(r) for r in files.collect()))

    def test_starting_and_ending_offsets(self) -> None:
        sent = self.topic("N_OFF", 80)
        a0 = {"N_OFF": {"broker-a/0": 5, "broker-a/1": -1, "broker-b/0": -2, "broker-b/1": 18}}
        df = self.read("N_OFF", startingOffsets=json.dumps(a0),
                       endingOffsets=json.dumps({"N_OFF": {"broker-a/0": 10, "broker-b/0": 3}}))
        got = sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in df.collect())
        want = sorted([("broker-a", 0, o) for o in range(5, 10)] + [("broker-b", 0, o) for o in range(3)]
                      + [("broker-b", 1, o) for o in range(18, 20)])
        self.assertEqual(got, want)
        self.assertEqual(self.read("N_OFF", startingOffsets="latest").count(), 0)
        self.assertEqual(self.read("N_OFF", startingOffsets="earliest", endingOffsets="latest").count(), len(sent))
        with self.assertRaises(Exception) as ctx:
            self.read("N_OFF", startingOffsets="sometime").count()
        self.assertIn("earliest, latest, group or JSON", str(ctx.exception))

    def test_starting_and_ending_timestamps(self) -> None:
        first = self.topic("N_TIME", 30)
        mid = now_ms() + 2
        wait_past(mid)
        second = self.brokers.fill("N_TIME", 30, start=30)
        end = now_ms() + 2
        wait_past(end)
        self.brokers.fill("N_TIME", 10, start=60)
        df = self.read("N_TIME", startingTimestamp=mid, endingTimestamp=end)
        self.assertEqual(self.bodies(df), sorted(s["body"] for s in second))
        before = self.read("N_TIME", endingTimestamp=mid)
        self.assertEqual(self.bodies(before), sorted(s["body"] for s in first))

    def test_tag_and_sql92_filters_run_on_the_broker(self) -> None:
        sent = self.topic("N_FILT", 90)
        tags = self.read("N_FILT", filterExpression="Tag0 || Tag2")
        self.assertEqual(self.bodies(tags), sorted(s["body"] for s in sent if s["tags"] in ("Tag0", "Tag2")))
        sql = self.read("N_FILT", filterType="SQL92", filterExpression="n >= 20 AND n < 35 AND TAGS <> 'Tag1'")
        self.assertEqual(self.bodies(sql), sorted(s["body"] for s in sent if 20 <= s["n"] < 35 and s["tags"] != "Tag1"))
        with self.assertRaises(Exception) as ctx:
            self.read("N_FILT", filterType="SQL92", filterExpression="n >>> 3").count()
        self.assertIn(f"code {int(ResponseCode.SUBSCRIPTION_PARSE_FAILED)}", str(ctx.exception))

    def test_consumer_group_offsets_read_and_committed(self) -> None:
        self.topic("N_GRP", 40)
        self.assertEqual(self.read("N_GRP", group="G_spark").count(), 40)  # no committed offsets: earliest
        # commitOffsets defaults to false; a group without offsets reads as 0 while offset 0 is in memory (Java's rule)
        self.assertEqual(set(self.committed("N_GRP", "G_spark").values()), {0})
        self.assertEqual(self.read("N_GRP", group="G_spark", commitOffsets="true").count(), 40)
        self.assertEqual(self.committed("N_GRP", "G_spark"),
                         {"broker-a/0": 10, "broker-a/1": 10, "broker-b/0": 10, "broker-b/1": 10})
        late = self.brokers.fill("N_GRP", 8, start=40)
        df = self.read("N_GRP", group="G_spark", commitOffsets="true")
        self.assertEqual(self.bodies(df), sorted(s["body"] for s in late))
        self.assertEqual(self.read("N_GRP", group="G_spark").count(), 0)

    def committed(self, topic: str, group: str) -> dict[str, int]:
        with Cluster(self.brokers.namesrv) as c:
            out = {q.key: c.committed_offset(q, group) for q in c.queues(topic)}
        return {k: v for k, v in out.items() if v is not None}

    def test_missing_options_and_unknown_topics(self) -> None:
        with self.assertRaises(Exception) as ctx:
            self.spark.read.format("rocketmq").option("namesrv", self.brokers.namesrv).load().count()
        self.assertIn("topics", str(ctx.exception))
        self.assertEqual(self.read("N_NO_SUCH_TOPIC").count(), 0)
        with self.assertRaises(Exception) as ctx:
            self.read("N_ALL", filterType="XPATH").count()
        self.assertIn("filterType must be TAG or SQL92", str(ctx.exception))

    # ---- the example pipeline ----------------------------------------------------------------------

    def test_tag_minutes_pipeline_writes_each_closed_minute_once(self) -> None:
        from rmqtx.spark.jobs import tag_minutes

        self.topic("N_PIPE", 0)
        t0 = (now_ms() // 60_000 - 10) * 60_000  # ten minutes ago, on a minute boundary
        want: dict[tuple[int, str], int] = {}
        for i in range(36):
            minute, tag = i % 3, ("A", "B", None)[(i // 3) % 3]
            props = {"TAGS": tag} if tag else {}
            self.brokers.send_born(("broker-a", "broker-b")[i % 2], "N_PIPE", i % 2, b"x" * i,
                                   t0 + minute * 60_000 + i * 100, **props)
            want[(minute, tag or "")] = want.get((minute, tag or ""), 0) + 1
        self.brokers.send_born("broker-a", "N_PIPE", 0, b"closer", t0 + 5 * 60_000, TAGS="A")  # moves the watermark
        out = os.path.join(self.tmp.name, "tag-minutes")
        query = tag_minutes.start(self.spark, self.brokers.namesrv, "N_PIPE", out, out + ".ckpt",
                                  time_column="bornTimestamp", watermark="10 seconds", available_now=False)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        rows = self.spark.read.parquet(out).collect()
        got = {((millis_of(r["minute"]) - t0) // 60_000, r["tag"]): r["messages"] for r in rows}
        self.assertEqual(got, want)  # minute 5 (the closer) is still open, so not written
        self.assertEqual(len(rows), len(want))

    # ---- sink ----------------------------------------------------------------------------------

    def test_dataframe_written_to_a_topic_in_batches(self) -> None:
        self.topic("N_SINK", 0)
        rows = [(f"w-{i}".encode(), f"T{i % 2}", f"key{i}", {"i": str(i)}) for i in range(150)]
        df = self.spark.createDataFrame(rows, "body binary, tags string, keys string, properties map<string,string>")
        df.repartition(3).write.format("rocketmq").option("namesrv", self.brokers.namesrv) \
            .option("topic", "N_SINK").option("batchSize", 16).mode("append").save()
        back = self.read("N_SINK").collect()
        self.assertEqual(sorted(r["body"] for r in back), sorted(r[0] for r in rows))
        for r in back:
            i = int(r["properties"]["i"])
            self.assertEqual((r["tags"], r["keys"]), (f"T{i % 2}", [f"key{i}"]))
        self.assertEqual({r["brokerName"] for r in back}, {"broker-a", "broker-b"})

    def test_stream_copied_from_one_topic_to_another(self) -> None:
        sent = self.topic("N_COPY_IN", 40)
        self.topic("N_COPY_OUT", 0)
        src = self.spark.readStream.format("rocketmq").option("namesrv", self.brokers.namesrv) \
            .option("topics", "N_COPY_IN").option("startingOffsets", "earliest").load()
        query = src.select("body", "tags", F.concat(F.lit("copy-"), "uniqKey").alias("keys")) \
            .writeStream.format("rocketmq").option("namesrv", self.brokers.namesrv).option("topic", "N_COPY_OUT") \
            .option("checkpointLocation", os.path.join(self.tmp.name, "copy-ckpt")).start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        copied = self.read("N_COPY_OUT").collect()
        self.assertEqual(sorted(r["body"] for r in copied), sorted(s["body"] for s in sent))
        self.assertEqual(sorted((r["tags"], r["keys"][0]) for r in copied),
                         sorted((s["tags"], f"copy-N_COPY_IN-m-{s['i']}") for s in sent))

    # ---- streaming -----------------------------------------------------------------------------

    def stream_once(self, topic: str, out: str, checkpoint: str, **options) -> None:
        """Run the stream until it has read everything there is now, then stop it (a driver going away)."""
        reader = self.spark.readStream.format("rocketmq").option("namesrv", self.brokers.namesrv) \
            .option("topics", topic).option("startingOffsets", "earliest")
        df = reader.options(**{k: str(v) for k, v in options.items()}).load()
        query = df.select("brokerName", "queueId", "queueOffset", "body").writeStream.format("parquet") \
            .option("path", out).option("checkpointLocation", checkpoint).start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        self.assertIsNone(query.exception())

    def test_stream_resumes_exactly_once_from_its_checkpoint(self) -> None:
        sent = self.topic("N_STREAM", 60)
        out = os.path.join(self.tmp.name, "stream-out")
        checkpoint = os.path.join(self.tmp.name, "stream-ckpt")
        opts = {"maxMessagesPerTrigger": 40, "group": "G_stream", "commitOffsets": "true"}
        self.stream_once("N_STREAM", out, checkpoint, **opts)
        self.assertEqual(self.spark.read.parquet(out).count(), 60)
        sent += self.brokers.fill("N_STREAM", 50, start=60)
        self.stream_once("N_STREAM", out, checkpoint, **opts)
        got = self.spark.read.parquet(out)
        self.assertEqual(self.bodies(got), sorted(s["body"] for s in sent))  # each exactly once
        self.assertEqual(got.select("brokerName", "queueId", "queueOffset").distinct().count(), 110)
        logged = sorted(int(f) for f in os.listdir(os.path.join(checkpoint, "offsets")) if f.isdigit())
        self.assertEqual(logged, [0, 1, 2, 3])  # maxMessagesPerTrigger: 40 + 20, then 40 + 10
        # Spark commits a batch's end offsets to the source when it plans the next batch
        with open(os.path.join(checkpoint, "offsets", str(logged[-2]))) as fh:
            planned = json.loads(fh.read().splitlines()[-1])["N_STREAM"]
        self.assertEqual(sum(planned.values()), 100)
        self.assertEqual(self.committed("N_STREAM", "G_stream"), planned)
