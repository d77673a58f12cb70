"""The `rocketmq` data sources read Java-written and rmqtx-written stores field for field."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from datetime import datetime, timezone

from rmqtx.common.sysflag import SYSFLAG_COMPRESSED
from rmqtx.store import record as R

from .support import BASE_MS, NO_SPARK, SparkTestCase, extract, jsonl, requires_spark, write_store

if not NO_SPARK:
    from pyspark.sql import functions as F


def by_offset(df) -> dict[int, dict]:
    return {r["commitLogOffset"]: r.asDict() for r in df.collect()}


def millis(dt: datetime) -> int:
    """Epoch ms of a collected timestamp (PySpark hands them out as naive local times)."""
    return round(dt.timestamp() * 1000)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat()


@requires_spark
class DataSourceTest(SparkTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-spark-")
        cls.clean = extract("store-java-4.9.8-clean.tar.gz", os.path.join(cls.tmp.name, "clean"))
        cls.crash = extract("store-java-4.9.8-crash.tar.gz", os.path.join(cls.tmp.name, "crash"))
        cls.own = os.path.join(cls.tmp.name, "own")
        cls.put = write_store(cls.own)
        cls.clean_rows = by_offset(cls.read(cls.clean))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()
        super().tearDownClass()

    @classmethod
    def read(cls, store: str, fmt: str = "rocketmq", **options):
        return cls.spark.read.format(fmt).options(**{k: str(v) for k, v in options.items()}).load(store)

    # ---- Java 4.9.8 clean store ----------------------------------------------------------------

    def test_clean_store_matches_messages_jsonl(self) -> None:
        rows = self.clean_rows
        self.assertEqual(len(rows), 197)
        checked = 0
        for m in jsonl("messages.jsonl"):
            for sr in m["storedRecords"]:
                row = rows[sr["commitLogOffset"]]
                for k in ("topic", "queueId", "queueOffset", "storeSize", "sysFlag"):
                    self.assertEqual(row[k], sr[k], (m["seq"], k))
                self.assertEqual(row["tags"], m["tags"])
                self.assertEqual(row["keys"], (m["keys"] or "").split())
                for k, v in m["properties"].items():
                    if k != "WAIT":
                        self.assertEqual(row["properties"].get(k), v, (m["seq"], k))
                self.assertEqual(row["uniqKey"], m["properties"]["UNIQ_KEY"])
                if "body" in m:
                    self.assertEqual(row["body"].decode(), m["body"])
                else:
                    self.assertEqual(hashlib.sha256(row["body"]).hexdigest(), m["body_sha256"])
                checked += 1
            off = m["sendResult"].get("offsetMsgId")
            if off and "," not in off:
                self.assertEqual(rows[R.decode_offset_msg_id(off)[2]]["msgId"], off)
        self.assertEqual(checked, 195)

    def test_clean_store_fixed_fields(self) -> None:
        first = self.clean_rows[0]
        self.assertEqual((first["storeHost"], first["msgId"]), ("127.0.0.1:20911", "7F000001000051AF0000000000000000"))
        self.assertTrue(first["bornHost"].startswith("127.0.0.1:"))
        compressed = [r for r in self.clean_rows.values() if r["sysFlag"] & SYSFLAG_COMPRESSED]
        self.assertEqual(len(compressed), 1)
        self.assertEqual(len(compressed[0]["body"]), 204800)  # inflated; stored 13191 bytes
        for r in self.clean_rows.values():
            self.assertLessEqual(r["bornTimestamp"], r["storeTimestamp"])

    def test_counts_per_topic_match_consume_queues(self) -> None:
        cq = self.read(self.clean, "rocketmq_consumequeue")
        expected = {r["topic"]: r["count"] for r in cq.groupBy("topic").count().collect()}
        self.assertEqual(expected, {"S_A": 97, "S_B": 95, "SCHEDULE_TOPIC_XXXX": 1,
                                    "RMQ_SYS_TRANS_HALF_TOPIC": 2, "RMQ_SYS_TRANS_OP_HALF_TOPIC": 2})
        counts: dict[str, int] = {}
        for r in self.clean_rows.values():
            counts[r["topic"]] = counts.get(r["topic"], 0) + 1
        self.assertEqual(counts, expected)
        units = {(r["commitLogOffset"], r["topic"], r["queueId"], r["queueOffset"], r["size"]) for r in cq.collect()}
        self.assertEqual(units, {(o, r["topic"], r["queueId"], r["queueOffset"], r["storeSize"])
                                 for o, r in self.clean_rows.items()})

    def test_topics_option_reads_through_consume_queues(self) -> None:
        df = self.read(self.clean, topics="S_A, SCHEDULE_TOPIC_XXXX")
        self.assertEqual(df.rdd.getNumPartitions(), 3)  # S_A/0, S_A/1, SCHEDULE_TOPIC_XXXX/0
        rows = by_offset(df)
        self.assertEqual(rows, {o: r for o, r in self.clean_rows.items()
                                if r["topic"] in ("S_A", "SCHEDULE_TOPIC_XXXX")})

    def test_time_filters_prune_commit_log_files(self) -> None:
        self.assertEqual(self.read(self.clean).rdd.getNumPartitions(), 2)
        t = self.clean_rows[1048576]["storeTimestamp"]
        ms = millis(t)
        late = self.read(self.clean, startTime=ms + 1)
        self.assertEqual(late.rdd.getNumPartitions(), 1)
        self.assertEqual(set(by_offset(late)), {o for o, r in self.clean_rows.items() if r["storeTimestamp"] > t})
        early = self.read(self.clean, endTime=iso(ms))
        self.assertEqual(early.rdd.getNumPartitions(), 1)
        self.assertEqual(set(by_offset(early)), {o for o, r in self.clean_rows.items() if r["storeTimestamp"] < t})

    def test_unknown_topic_and_empty_store_read_nothing(self) -> None:
        self.assertEqual(self.read(self.clean, topics="NO_SUCH_TOPIC").count(), 0)
        self.assertEqual(self.read(self.clean, "rocketmq_consumequeue", topics="NO_SUCH_TOPIC").count(), 0)
        empty = os.path.join(self.tmp.name, "empty")
        os.makedirs(empty)
        self.assertEqual(self.read(empty).count(), 0)
        self.assertEqual(self.read(empty, "rocketmq_offsets").count(), 0)

    def test_include_body_false(self) -> None:
        df = self.read(self.clean, includeBody="false", topics="S_B")
        self.assertEqual(df.where(F.col("body").isNotNull()).count(), 0)
        self.assertEqual(df.count(), 95)

    def test_verify_crc_drops_or_flags_a_damaged_body(self) -> None:
        damaged = os.path.join(self.tmp.name, "damaged")
        shutil.copytree(self.clean, damaged)
        with open(os.path.join(damaged, "commitlog", "00000000000000000000"), "r+b") as fh:
            fh.seek(236 + 90)  # inside the body of the second record ("S_A q1 #0")
            fh.write(b"X")
        self.assertEqual(self.read(damaged).count(), 197)
        kept = by_offset(self.read(damaged, verifyCrc="drop"))
        self.assertEqual(set(self.clean_rows) - set(kept), {236})
        flagged = self.read(damaged, verifyCrc="flag").where(~F.col("crcValid")).collect()
        self.assertEqual([r["commitLogOffset"] for r in flagged], [236])

    # ---- Java 4.9.8 crash store (kill -9) ---------------------------------------------------

    def test_crash_store_has_every_acknowledged_message(self) -> None:
        rows = by_offset(self.read(self.crash))
        self.assertEqual(len(rows), 1504)
        for a in jsonl("crash-acked.jsonl"):
            row = rows[R.decode_offset_msg_id(a["offsetMsgId"])[2]]
            self.assertEqual((row["msgId"], row["uniqKey"], row["queueId"], row["queueOffset"]),
                             (a["offsetMsgId"], a["msgId"], a["queueId"], a["queueOffset"]))
            self.assertTrue(row["body"].startswith(b"crash-%06d-" % a["seq"]))
            self.assertEqual(row["tags"], f"TagC{a['queueId']}")
            self.assertEqual(row["keys"], [f"K-crash-{a['seq']}"])
        unacked = rows[1819849]
        self.assertEqual((unacked["queueId"], unacked["queueOffset"]), (1, 751))

    def test_crash_store_consume_queues_lag_the_commit_log(self) -> None:
        df = self.read(self.crash, topics="S_C")
        self.assertEqual(df.rdd.getNumPartitions(), 6)
        self.assertEqual(df.count(), 1498)  # 749 dispatched per queue; 6 records never reached a queue
        units = self.read(self.crash, "rocketmq_consumequeue").where("queueOffset = 600").collect()
        cut = max(r["commitLogOffset"] for r in units)
        t = by_offset(self.read(self.crash).where(F.col("commitLogOffset") == cut))[cut]["storeTimestamp"]
        ms = millis(t)
        late = self.read(self.crash, topics="S_C", startTime=ms + 1)
        # After the later of the two queues' unit 600 only each queue's third file can hold records.
        self.assertEqual(late.rdd.getNumPartitions(), 2)
        self.assertEqual(late.count(), df.where(F.col("storeTimestamp") > t).count())

    # ---- a store written by rmqtx's own MessageStore ----------------------------------------

    def test_own_store_reads_back(self) -> None:
        df = self.read(self.own)
        self.assertEqual(df.rdd.getNumPartitions(), 2)  # two 64 KiB commit log files
        rows = by_offset(df)
        self.assertEqual(len(rows), len(self.put))
        for p in self.put:
            row = rows[p["commitLogOffset"]]
            self.assertEqual(row["topic"], p["topic"])
            self.assertEqual((row["queueId"], row["queueOffset"], row["flag"]),
                             (p["queueId"], p["queueOffset"], p["flag"]))
            self.assertEqual(row["msgId"], p["msgId"])
            self.assertEqual(row["body"], p["body"])
            self.assertEqual(row["properties"], p["props"])
            self.assertEqual(row["tags"], p["props"].get("TAGS"))
            self.assertEqual(row["keys"], p["props"].get("KEYS", "").split())
            self.assertEqual(row["uniqKey"], p["props"].get("UNIQ_KEY"))
            self.assertEqual(row["bornHost"], p["bornHost"])
            self.assertEqual(row["reconsumeTimes"], p["reconsumeTimes"])
            self.assertEqual(millis(row["storeTimestamp"]), p["storeMs"])
        self.assertEqual(len(rows[self.put[17]["commitLogOffset"]]["msgId"]), 56)  # IPv6 store host
        self.assertEqual(rows[self.put[17]["commitLogOffset"]]["storeHost"], "[::2]:10911")

    def test_own_store_small_splits_give_the_same_rows(self) -> None:
        whole = by_offset(self.read(self.own))
        df = self.read(self.own, splitSize=4096)
        self.assertGreater(df.rdd.getNumPartitions(), 20)
        self.assertEqual(by_offset(df), whole)

    def test_own_store_time_window(self) -> None:
        start, end = BASE_MS + 100_000, BASE_MS + 250_000
        df = self.read(self.own, startTime=start, endTime=iso(end), splitSize=8192)
        self.assertLess(df.rdd.getNumPartitions(), self.read(self.own, splitSize=8192).rdd.getNumPartitions())
        self.assertEqual(sorted(by_offset(df)),
                         sorted(p["commitLogOffset"] for p in self.put if start <= p["storeMs"] < end))
        q = self.read(self.own, topics="R_B", startTime=start, endTime=end)
        self.assertEqual(sorted(by_offset(q)), sorted(p["commitLogOffset"] for p in self.put
                                                     if p["topic"] == "R_B" and start <= p["storeMs"] < end))
