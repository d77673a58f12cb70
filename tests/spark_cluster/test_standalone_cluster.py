"""Spark batch and streaming reads of a two-broker rmqtx cluster on a real standalone Spark cluster.

A master and two 1-core workers on loopback; every driver is its own process (`--master spark://`),
so the stream's second run is a driver restart that resumes from the checkpoint alone.
Slow (JVMs): run once per CI, under trial (tox's pytest env ignores tests/spark_cluster).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

from tests.spark.support import NO_SPARK, REPO, requires_spark

if not NO_SPARK:
    from tests.spark.brokers import TwoBrokers

    from .standalone import SparkStandalone


@requires_spark
class StandaloneClusterTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-spark-cluster-")
        self.brokers = TwoBrokers()
        self.addCleanup(self.tmp.cleanup)
        self.addCleanup(self.brokers.close)
        self.spark = SparkStandalone(workers=2).start()
        self.addCleanup(self.spark.stop)

    def driver(self, *args: str, timeout: float = 240) -> dict:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "tests.spark_cluster.driver", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        self.assertEqual(proc.returncode, 0, f"driver failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
        print(f"driver {args[0]}: {time.monotonic() - started:.1f} s", file=sys.stderr)
        return json.loads(lines[-1])

    def test_batch_and_resumed_stream_over_the_network(self) -> None:
        self.brokers.create_topic("C_NET", 2)
        sent = [s["body"].decode() for s in self.brokers.fill("C_NET", 100)]

        out, ckpt = os.path.join(self.tmp.name, "out"), os.path.join(self.tmp.name, "ckpt")
        seen = self.driver("batch,stream", self.spark.url, self.brokers.namesrv, "C_NET", out, ckpt)
        self.assertEqual(seen["executors"], 2)
        self.assertEqual(seen["partitions"], 4)  # 25 messages per queue, 2 queues on each of 2 groups
        self.assertEqual((seen["rows"], seen["keys"]), (100, 100))
        self.assertEqual(seen["bodies"], sorted(sent))
        self.assertEqual(len(seen["cwds"]), 2, seen["cwds"])  # tasks ran on both workers' executors
        self.assertEqual(seen["batches"], [60, 40])  # the stream's first run: maxMessagesPerTrigger=60
        sent += [s["body"].decode() for s in self.brokers.fill("C_NET", 70, start=100)]
        second = self.driver("stream", self.spark.url, self.brokers.namesrv, "C_NET", out, ckpt)  # driver restart
        self.assertEqual(second["batches"], [60, 10])
        import pyarrow.parquet as pq

        table = pq.read_table(out)
        self.assertEqual(sorted(b.decode() for b in table.column("body").to_pylist()), sorted(sent))
