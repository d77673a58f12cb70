"""Spark `rocketmq` scan speed against raw reads of the same commit log files.

Builds (or reuses) a ~1 GiB store of 1 KB messages with rmqtx's MessageStore, then prints:
the `rocketmq` source's MB/s and messages/s, Spark `binaryFile` raw read MB/s, a plain Python
read MB/s, and (for reference) the Python decoder alone on one core without Spark.

Run: python benchmarks/spark_scan.py [--store DIR] [--gib 1] [--master local[*]] [--repeat 2]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

MB = 1e6
BODY = 1000
FILE_SIZE = 128 << 20


def build_store(root: str, gib: float) -> None:
    """Write 1 KB messages over 4 topics x 4 queues until the commit log holds `gib` GiB."""
    from rmqtx.store import MessageStore, MessageToStore, StoreConfig
    from rmqtx.common.message import properties_to_string

    shutil.rmtree(root, ignore_errors=True)
    store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=FILE_SIZE,
                                     message_index_enable=False))
    store.load()
    body = (os.urandom(BODY // 2).hex()).encode()
    target = int(gib * (1 << 30))
    i = 0
    started = time.perf_counter()
    try:
        while store.max_phy_offset < target:
            props = properties_to_string({"TAGS": f"Tag{i % 8}", "KEYS": f"key-{i}", "UNIQ_KEY": f"{i:032X}"})
            store.put_message(MessageToStore(topic=f"BENCH_{i % 4}", queue_id=(i >> 2) % 4, flag=0, body=body,
                                             properties=props, sys_flag=0, born_timestamp=int(time.time() * 1000),
                                             born_host=("10.0.0.7", 50000), store_host=("127.0.0.1", 10911)))
            i += 1
    finally:
        store.shutdown()
    print(f"built {i} messages in {time.perf_counter() - started:.1f} s under {root}")


def ensure_store(root: str, gib: float) -> None:
    marker = os.path.join(root, "bench.json")
    want = {"gib": gib, "body": BODY, "fileSize": FILE_SIZE}
    try:
        with open(marker) as fh:
            if json.load(fh) == want:
                print(f"reusing store {root}")
                return
    except (OSError, ValueError):
        pass
    build_store(root, gib)
    with open(marker, "w") as fh:
        json.dump(want, fh)


def data_files(root: str) -> list[str]:
    """Commit log files holding records (not the pre-allocated, all-zero next file)."""
    from rmqtx.spark import scan

    out = []
    for f in scan.commit_log_files(root):
        mapped = scan.open_map(f.path)
        if mapped is not None and scan.is_record_at(mapped[0], 0, f.base):
            out.append(f.path)
    return out


def best(repeat: int, fn):
    """(seconds, result) of the fastest of `repeat` runs."""
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        runs.append((time.perf_counter() - t, result))
    return min(runs, key=lambda r: r[0])


def python_read(paths: list[str]) -> int:
    buf = bytearray(8 << 20)
    total = 0
    for p in paths:
        with open(p, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
    return total


def python_decode(root: str) -> tuple[int, int]:
    """Records and bytes decoded by the partition reader code alone, one core, no Spark."""
    from rmqtx.spark import scan

    n = size = 0
    for f in scan.commit_log_files(root):
        for cols in scan.scan_range(f, 0, f.size, True, scan.ScanOptions()):
            n += len(cols["storeSize"])
            size += cols["storeSize"].to_numpy().sum()
    return n, int(size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=os.path.join(tempfile.gettempdir(), "rmqtx-spark-bench-store"))
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    ensure_store(args.store, args.gib)
    paths = data_files(args.store)

    from pyspark.sql import functions as F

    from rmqtx.spark.session import build_session

    spark = build_session(args.master, app_name="rmqtx-bench", conf={"spark.driver.memory": "4g"})
    cores = spark.sparkContext.defaultParallelism
    try:
        df = spark.read.format("rocketmq").load(args.store)
        query = df.agg(F.count("*").alias("n"), F.sum("storeSize").alias("bytes"), F.sum(F.length("body")).alias("b"))
        secs, row = best(args.repeat, lambda: query.first())
        print(f"spark rocketmq scan : {row['bytes'] / MB / secs:8.1f} MB/s  {row['n'] / secs:10.0f} msg/s"
              f"  ({row['n']} messages, {row['bytes'] / MB:.0f} MB, {df.rdd.getNumPartitions()} partitions,"
              f" {cores} cores, {secs:.2f} s)")
        raw = spark.read.format("binaryFile").load(paths).agg(F.sum(F.length("content")).alias("bytes"))
        secs, row = best(args.repeat, lambda: raw.first())
        print(f"spark binaryFile    : {row['bytes'] / MB / secs:8.1f} MB/s  ({len(paths)} files, {secs:.2f} s)")
    finally:
        spark.stop()
    secs, size = best(args.repeat, lambda: python_read(paths))
    print(f"python read         : {size / MB / secs:8.1f} MB/s  (1 thread, {secs:.2f} s)")
    secs, (n, size) = best(1, lambda: python_decode(args.store))
    print(f"python decode only  : {size / MB / secs:8.1f} MB/s  {n / secs:10.0f} msg/s  (1 core, no Spark)")


if __name__ == "__main__":
    main()
