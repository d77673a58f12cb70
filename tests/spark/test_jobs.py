"""`python -m rmqtx.spark` jobs print the right numbers for the Java clean store."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from rmqtx.spark.session import JavaNotFoundError, build_session

from .support import NO_SPARK, REPO, SparkTestCase, extract, requires_spark

if not NO_SPARK:
    from rmqtx.spark import jobs


@requires_spark
class JobsTest(SparkTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-spark-jobs-")
        cls.store = extract("store-java-4.9.8-clean.tar.gz", cls.tmp.name)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()
        super().tearDownClass()

    def run_job(self, *argv: str) -> list[list[str]]:
        """Run a job in this session; returns the printed table's rows split into cells."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(jobs.main(list(argv), spark=self.spark), 0)
        self.summary = out.getvalue().splitlines()[-1]
        return [[c.strip() for c in line.strip("|").split("|")] for line in out.getvalue().splitlines()
                if line.startswith("|")]

    def test_stats(self) -> None:
        header, *rows = self.run_job("stats", "--store", self.store)
        self.assertEqual(header, ["topic", "messages", "bytes", "firstStoreTime", "lastStoreTime", "topTags"])
        table = {r[0]: r for r in rows}
        self.assertEqual({t: int(r[1]) for t, r in table.items()},
                         {"S_A": 97, "S_B": 95, "SCHEDULE_TOPIC_XXXX": 1, "RMQ_SYS_TRANS_HALF_TOPIC": 2,
                          "RMQ_SYS_TRANS_OP_HALF_TOPIC": 2})
        self.assertEqual(table["S_A"][2], "636002")
        self.assertEqual(table["S_A"][3:5], ["2026-11-21 12:40:01.279", "2026-11-21 12:40:02.338"])
        self.assertEqual(table["S_A"][5], "TagA:20, TagB:20, TagC:20")
        self.assertEqual(table["SCHEDULE_TOPIC_XXXX"][5], "TagDelay:1")
        total = sum(int(r[2]) for r in rows)
        self.assertRegex(self.summary, rf"^stats: 5 topics, 197 messages, {total / 1024 / 1024:.1f} MiB stored \(\d+\.\d s\)$")

    def test_stats_for_one_topic(self) -> None:
        _, *rows = self.run_job("stats", "--store", self.store, "--topics", "S_B")
        self.assertEqual([r[:2] for r in rows], [["S_B", "95"]])

    def test_lag(self) -> None:
        header, *rows = self.run_job("lag", "--store", self.store)
        self.assertEqual(header, ["group", "topic", "queueId", "committed", "maxOffset", "lag"])
        self.assertEqual(rows, [["C_store", "%RETRY%C_store", "0", "0", "0", "0"],
                                ["C_store", "S_A", "0", "48", "48", "0"],
                                ["C_store", "S_A", "1", "49", "49", "0"]])
        self.assertRegex(self.summary, r"^lag: 1 groups, 3 queues, total lag 0 messages \(\d+\.\d s\)$")

    def test_lag_after_consumer_fell_behind(self) -> None:
        path = os.path.join(self.store, "config", "consumerOffset.json")
        with open(path) as fh:
            original = fh.read()
        try:
            with open(path, "w") as fh:
                fh.write('{"offsetTable":{"S_B@G_late":{0:40,1:0}}}')
            rows = self.run_job("lag", "--store", self.store)[1:]
        finally:
            with open(path, "w") as fh:
                fh.write(original)
        self.assertEqual(rows, [["G_late", "S_B", "0", "40", "46", "6"], ["G_late", "S_B", "1", "0", "49", "49"]])
        self.assertRegex(self.summary, r"^lag: 1 groups, 2 queues, total lag 55 messages ")

    def test_export_parquet_by_topic_and_date(self) -> None:
        out = os.path.join(self.tmp.name, "parquet")
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            jobs.main(["export", "--store", self.store, "--out", out], spark=self.spark)
        self.assertRegex(buf.getvalue().splitlines()[-1], rf"^export: exported 197 messages to {out} \(\d+\.\d s\)$")
        self.assertTrue(os.path.isdir(os.path.join(out, "topic=S_A", "date=2026-11-21")))
        df = self.spark.read.parquet(out)
        self.assertEqual(df.where("topic = 'S_A'").count(), 97)
        self.assertEqual(df.where("msgId = '7F000001000051AF0000000000000000'").first()["body"], b"S_A q0 #0")

    def test_cli_help_without_spark(self) -> None:
        res = subprocess.run([sys.executable, "-m", "rmqtx.spark", "--help"], cwd=REPO, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        for job in ("export", "stats", "lag"):
            self.assertIn(job, res.stdout)


class NoJavaTest(unittest.TestCase):
    def test_clear_message_without_java(self) -> None:
        with mock.patch.dict(os.environ, {"JAVA_HOME": "/nonexistent/jdk"}):
            with self.assertRaises(JavaNotFoundError) as ctx:
                build_session()
        self.assertIn("scripts/ensure-java.sh", str(ctx.exception))
        self.assertIn("/nonexistent/jdk", str(ctx.exception))
