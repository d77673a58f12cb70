"""Spark's `rocketmq` network source against the broker's own consume rate and the file-mode scan, in one run.

Starts `twistd rmqstandalone` (temp store, free ports), fills a topic of 4 queues with --count
messages of --size bytes (batch sends), then prints, for the same messages:
  - pull consumer    : rmqtx's PullConsumer draining every queue, 32 per pull, one at a time (a consumer's view)
  - wire pull        : the Spark source's blocking client, pipelined pulls, records not decoded (the ceiling)
  - spark network    : spark.read.format("rocketmq").option("namesrv", ...) count + sums, --master
  - spark file scan  : the same data read from the broker's store directory (file mode)

Run: python benchmarks/spark_net.py [--count 200000] [--size 1000] [--master local[2]]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.standalone import Standalone  # noqa: E402

TOPIC = "SparkNetBench"
QUEUES = 4
MB = 1e6


def fill(server: Standalone, count: int, size: int) -> float:
    """Send count messages in batches of 64; returns seconds."""
    from rmqtx.client.blocking import BlockingProducer
    from rmqtx.client.message import Message

    body = os.urandom(size // 2).hex().encode()[:size]
    started = time.perf_counter()
    with BlockingProducer(server.namesrv, "P_spark_net_bench") as producer:
        for a in range(0, count, 64):  # the producer turns round the queues
            producer.send_batch([Message(TOPIC, body, f"Tag{i % 8}", f"k{i}") for i in range(a, min(a + 64, count))])
    return time.perf_counter() - started


def pull_consumer(server: Standalone) -> tuple[int, int, float]:
    """Messages, body bytes and seconds for rmqtx's PullConsumer draining every queue."""
    from rmqtx.client.blocking import BlockingPullConsumer
    from rmqtx.client.message import PullStatus

    n = size = 0
    with BlockingPullConsumer(server.namesrv, "C_spark_net_bench") as consumer:
        queues = consumer.queues(TOPIC)
        started = time.perf_counter()
        for mq in queues:
            offset = consumer.min_offset(mq)
            while True:
                res = consumer.pull(mq, offset, 32)
                if res.status is not PullStatus.FOUND:
                    break
                n += len(res.messages)
                size += sum(len(m.body) for m in res.messages)
                offset = res.next_begin_offset
        return n, size, time.perf_counter() - started


def wire_pull(server: Standalone) -> tuple[int, float]:
    """Stored bytes and seconds for the Spark source's client pulling every queue (no decoding)."""
    from rmqtx.common.subscription import SubscriptionData
    from rmqtx.spark.wire import Cluster

    total = 0
    with Cluster(server.namesrv) as cluster:
        queues = cluster.queues(TOPIC)
        started = time.perf_counter()
        for q in queues:
            sub = SubscriptionData.build(TOPIC, "*")
            for body in cluster.pull_range(q, "C_spark_net_wire", sub, cluster.min_offset(q), cluster.max_offset(q)):
                total += len(body)
        return total, time.perf_counter() - started


def best(repeat: int, fn):
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        runs.append((time.perf_counter() - t, result))
    return min(runs, key=lambda r: r[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    server = Standalone({"mappedFileSizeCommitLog": str(256 << 20)}).start()
    try:
        server.create_topic(TOPIC, QUEUES)
        secs = fill(server, args.count, args.size)
        print(f"filled {args.count} x {args.size} B in {secs:.1f} s ({args.count / secs:.0f} msg/s batch sends)")
        n, size, secs = pull_consumer(server)
        print(f"pull consumer    : {n / secs:10.0f} msg/s {size / MB / secs:8.1f} MB/s body  ({n} messages, {secs:.2f} s)")
        total, secs = wire_pull(server)
        print(f"wire pull        : {args.count / secs:10.0f} msg/s {total / MB / secs:8.1f} MB/s stored  ({secs:.2f} s)")

        from pyspark.sql import functions as F

        from rmqtx.spark.session import build_session

        spark = build_session(args.master, app_name="rmqtx-spark-net-bench", conf={"spark.driver.memory": "2g"})
        cores = spark.sparkContext.defaultParallelism
        try:
            def run(df):
                return lambda: df.agg(F.count("*").alias("n"), F.sum("storeSize").alias("bytes"),
                                      F.sum(F.length("body")).alias("b")).first()

            net = spark.read.format("rocketmq").option("namesrv", server.namesrv).option("topics", TOPIC).load()
            secs, row = best(args.repeat, run(net))
            print(f"spark network    : {row['n'] / secs:10.0f} msg/s {row['bytes'] / MB / secs:8.1f} MB/s stored"
                  f"  ({row['n']} messages, {net.rdd.getNumPartitions()} partitions, {cores} cores, {secs:.2f} s)")
            files = spark.read.format("rocketmq").option("topics", TOPIC).load(str(server.root / "store"))
            secs, row = best(args.repeat, run(files))
            print(f"spark file scan  : {row['n'] / secs:10.0f} msg/s {row['bytes'] / MB / secs:8.1f} MB/s stored"
                  f"  ({row['n']} messages, {files.rdd.getNumPartitions()} partitions, {secs:.2f} s)")
        finally:
            spark.stop()
        print(f"load average     : {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    finally:
        server.close()


if __name__ == "__main__":
    main()
