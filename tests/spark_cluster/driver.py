"""A Spark driver process against a standalone cluster; prints one JSON line with what it saw.

    python -m tests.spark_cluster.driver batch,stream MASTER NAMESRV TOPIC OUT CHECKPOINT
    python -m tests.spark_cluster.driver stream MASTER NAMESRV TOPIC OUT CHECKPOINT

Modes run in order in one driver (one JVM start fewer than a driver per mode).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def session(master: str):
    from rmqtx.spark.session import build_session

    return build_session(master, app_name="rmqtx-cluster-test", conf={
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
        "spark.sql.shuffle.partitions": "2", "spark.pyspark.python": sys.executable,
        # jobs wait until both executors have registered (they register after the session starts)
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "spark.executorEnv.RMQTX_PURE_PYTHON": os.environ.get("RMQTX_PURE_PYTHON", ""),
    })


def executors(spark, want: int = 2, timeout: float = 120) -> int:
    """Executors registered with the driver (the driver not counted), once `want` have or on timeout.

    Executors register some seconds after the session starts; on a loaded machine one may still be
    on its way when the session is ready.
    """
    deadline = time.monotonic() + timeout
    while True:
        count = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        if count >= want or time.monotonic() > deadline:
            return count
        time.sleep(0.2)


def batch(spark, namesrv: str, topic: str) -> dict:
    from pyspark.sql import functions as F

    df = (spark.read.format("rocketmq").option("namesrv", namesrv).option("topics", topic)
          .option("messagesPerPartition", "25").load())
    where = F.udf(lambda: os.getcwd())  # an executor's Python workers run in its work directory
    rows = df.select("brokerName", "queueId", "queueOffset", "body", where().alias("cwd")).collect()
    return {"partitions": df.rdd.getNumPartitions(), "rows": len(rows),
            "keys": len({(r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows}),
            "bodies": sorted(r["body"].decode() for r in rows), "cwds": sorted({r["cwd"] for r in rows})}


def stream(spark, namesrv: str, topic: str, out: str, checkpoint: str) -> dict:
    df = (spark.readStream.format("rocketmq").option("namesrv", namesrv).option("topics", topic)
          .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "60").load())
    query = (df.select("brokerName", "queueId", "queueOffset", "body").writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    return {"batches": [p["numInputRows"] for p in query.recentProgress]}


def main(argv: list[str]) -> int:
    modes, master, namesrv, topic, out, checkpoint = argv
    spark = session(master)
    try:
        result = {"executors": executors(spark)}
        for mode in modes.split(","):
            result.update(batch(spark, namesrv, topic) if mode == "batch" else stream(spark, namesrv, topic, out, checkpoint))
    finally:
        spark.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
