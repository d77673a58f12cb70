"""Example pipeline: stream a topic from live brokers, count messages and bytes per tag per minute, write Parquet.

    python -m rmqtx.spark.jobs.tag_minutes --namesrv 127.0.0.1:9876 --topics Orders \\
        --out /data/tag_minutes --checkpoint /data/tag_minutes.ckpt [--master spark://host:7077]

Each run reads what the brokers hold beyond the checkpoint (Trigger.AvailableNow) unless
--continuous is given. A minute is written once the watermark has passed it (append mode), so
every (minute, topic, tag) row appears exactly once across runs.
"""
from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

NO_TAG = ""


def per_tag_minute(messages: DataFrame, time_column: str = "storeTimestamp", watermark: str = "1 minute") -> DataFrame:
    """minute, topic, tag, messages, bytes: one row per closed one-minute window."""
    return (messages.withWatermark(time_column, watermark)
            .groupBy(F.window(time_column, "1 minute"), "topic", F.coalesce("tags", F.lit(NO_TAG)).alias("tag"))
            .agg(F.count("*").alias("messages"), F.sum("storeSize").alias("bytes"))
            .select(F.col("window.start").alias("minute"), "topic", "tag", "messages", "bytes"))


def start(spark: SparkSession, namesrv: str, topics: str, out: str, checkpoint: str, *,
          starting: str = "earliest", time_column: str = "storeTimestamp", watermark: str = "1 minute",
          available_now: bool = True, options: dict[str, str] | None = None) -> StreamingQuery:
    """Start the query; the caller waits for it (awaitTermination / processAllAvailable) and stops it."""
    source = (spark.readStream.format("rocketmq").option("namesrv", namesrv).option("topics", topics)
              .option("startingOffsets", starting).option("includeBody", "false").options(**(options or {})).load())
    writer = (per_tag_minute(source, time_column, watermark).writeStream.format("parquet").outputMode("append")
              .option("path", out).option("checkpointLocation", checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rmqtx.spark.jobs.tag_minutes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--namesrv", required=True, help="NameServer address(es), host:port[;host:port]")
    p.add_argument("--topics", required=True, help="comma list of topics")
    p.add_argument("--out", required=True, help="Parquet output directory")
    p.add_argument("--checkpoint", required=True, help="Spark checkpoint directory (offsets per queue)")
    p.add_argument("--master", default="local[*]")
    p.add_argument("--starting", default="earliest", help="startingOffsets of a new checkpoint")
    p.add_argument("--time-column", default="storeTimestamp", choices=("storeTimestamp", "bornTimestamp"))
    p.add_argument("--watermark", default="1 minute", help="how late a message may arrive")
    p.add_argument("--continuous", action="store_true", help="keep running instead of stopping when caught up")
    args = p.parse_args(argv)
    from ..session import build_session

    spark = build_session(args.master, app_name="rmqtx-tag-minutes")
    try:
        query = start(spark, args.namesrv, args.topics, args.out, args.checkpoint, starting=args.starting,
                      time_column=args.time_column, watermark=args.watermark, available_now=not args.continuous)
        query.awaitTermination()
        progress = query.recentProgress
        print(f"read {sum(p['numInputRows'] for p in progress)} messages in {len(progress)} batches")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
