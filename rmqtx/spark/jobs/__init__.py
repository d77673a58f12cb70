"""Batch jobs over a store: export to Parquet, per-topic stats, consumer lag (`python -m rmqtx.spark`).

Streaming pipelines over live brokers live next to them (tag_minutes: `python -m rmqtx.spark.jobs.tag_minutes`).
"""
from __future__ import annotations

import argparse
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rmqtx.common.progress import Progress, size_text

TOP_TAGS = 3


def messages(spark: SparkSession, store: str, topics: str | None = None, start: str | None = None,
             end: str | None = None, include_body: bool = True) -> DataFrame:
    """The `rocketmq` source with the CLI's filters applied as options (so partitions are pruned)."""
    reader = spark.read.format("rocketmq").option("includeBody", str(include_body).lower())
    for key, value in (("topics", topics), ("startTime", start), ("endTime", end)):
        if value:
            reader = reader.option(key, value)
    return reader.load(store)


def export(spark: SparkSession, store: str, out: str, mode: str = "overwrite", **filters: Any) -> int:  # filters: messages()' keywords
    """Write messages as Parquet under out/topic=T/date=YYYY-MM-DD (UTC store date); returns the count."""
    df = messages(spark, store, **filters).withColumn("date", F.to_date("storeTimestamp"))
    df.write.mode(mode).partitionBy("topic", "date").parquet(out)
    return spark.read.parquet(out).count()


def stats(spark: SparkSession, store: str, **filters: Any) -> DataFrame:
    """Per topic: messages, stored bytes, first and last store time, the most frequent tags."""
    by_tag = messages(spark, store, include_body=False, **filters).groupBy("topic", "tags").agg(
        F.count("*").alias("n"), F.sum("storeSize").alias("bytes"),
        F.min("storeTimestamp").alias("first"), F.max("storeTimestamp").alias("last"))
    tagged = F.when(F.col("tags").isNotNull(), F.struct((-F.col("n")).alias("rank"), "tags", "n"))
    ranked = F.slice(F.sort_array(F.collect_list(tagged)), 1, TOP_TAGS)
    return (by_tag.groupBy("topic")  # one scan: totals per topic from the small per-tag result
            .agg(F.sum("n").alias("messages"), F.sum("bytes").alias("bytes"),
                 F.min("first").alias("firstStoreTime"), F.max("last").alias("lastStoreTime"),
                 F.array_join(F.transform(ranked, lambda t: F.concat(t.tags, F.lit(":"), t.n)), ", ").alias("topTags"))
            .orderBy("topic"))


def lag(spark: SparkSession, store: str) -> DataFrame:
    """Per consumer group and queue: committed offset, the queue's max offset and the difference."""
    offsets = spark.read.format("rocketmq_offsets").load(store)
    tops = (spark.read.format("rocketmq_consumequeue").load(store)
            .groupBy("topic", "queueId").agg((F.max("queueOffset") + 1).alias("maxOffset")))
    return (offsets.join(tops, ["topic", "queueId"], "left")
            .select("group", "topic", "queueId", F.col("offset").alias("committed"),
                    F.coalesce("maxOffset", F.lit(0)).alias("maxOffset"))
            .withColumn("lag", F.col("maxOffset") - F.col("committed"))
            .orderBy("group", "topic", "queueId"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rmqtx.spark", description=__doc__)
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    sub = p.add_subparsers(dest="job", required=True)
    for name, text in (("export", "write messages as Parquet partitioned by topic and date"),
                       ("stats", "per-topic message counts, bytes, time range and top tags"),
                       ("lag", "per group and queue: committed offset, max offset, lag")):
        job = sub.add_parser(name, help=text)
        job.add_argument("--store", required=True, help="store root (the directory holding commitlog/)")
        if name != "lag":
            job.add_argument("--topics", help="comma list: read only these topics' consume queues")
            job.add_argument("--start-time", help="store time from (ms or ISO 8601, inclusive)")
            job.add_argument("--end-time", help="store time to (ms or ISO 8601, exclusive)")
        if name == "export":
            job.add_argument("--out", required=True, help="output directory")
            job.add_argument("--mode", default="overwrite", choices=("overwrite", "append", "errorifexists"))
    return p


def main(argv: list[str] | None = None, spark: SparkSession | None = None) -> int:
    """Run one job; a given session is reused and left running (tests), else one is built and stopped."""
    args = _parser().parse_args(argv)
    own = spark is None
    if spark is None:
        from ..session import build_session

        spark = build_session(args.master, app_name=f"rmqtx-{args.job}", progress=True)
    progress = Progress(args.job, say=print)  # Spark's console progress bar shows the stages on stderr
    try:
        if args.job == "lag":
            rows = lag(spark, args.store).cache()
            rows.show(1 << 20, truncate=False)
            total = rows.agg(F.countDistinct("group").alias("g"), F.count("*").alias("q"), F.sum("lag").alias("lag")).first()
            assert total is not None  # an aggregate always has its one row
            progress.done(f"{total['g']} groups, {total['q']} queues, total lag {total['lag'] or 0} messages")
            return 0
        filters = {"topics": args.topics, "start": args.start_time, "end": args.end_time}
        if args.job == "export":
            n = export(spark, args.store, args.out, args.mode, **filters)
            progress.done(f"exported {n} messages to {args.out}")
        else:
            rows = stats(spark, args.store, **filters).cache()
            rows.show(1 << 20, truncate=False)
            total = rows.agg(F.count("*").alias("t"), F.sum("messages").alias("m"), F.sum("bytes").alias("b")).first()
            assert total is not None
            progress.done(f"{total['t']} topics, {total['m'] or 0} messages, {size_text(total['b'] or 0)} stored")
        return 0
    finally:
        if own:
            spark.stop()
