"""Write a DataFrame to RocketMQ: df.write.format("rocketmq").option("namesrv", ...).option("topic", T).save().

Columns: body (binary or string, required); topic (else the `topic` option), tags, keys (string or
array of strings) and properties (map) are optional. Each task sends its rows with rmqtx's
Python producer in SEND_BATCH_MESSAGE batches (one topic per batch, at most `batchSize`
messages and ~1 MiB). Streams get at-least-once delivery: a retried micro-batch sends again.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import Row, StructType

if TYPE_CHECKING:
    from rmqtx.client.message import Message

log = logging.getLogger("rmqtx.spark")

BATCH_BYTES = 1 << 20
DEFAULT_PRODUCER_GROUP = "RMQTX_SPARK_WRITER"


@dataclass
class Sent(WriterCommitMessage):
    """How many messages one task sent."""

    count: int


@dataclass(frozen=True)
class SinkOptions:
    namesrv: str
    topic: str | None
    group: str
    batch_size: int

    @classmethod
    def parse(cls, o: Mapping[str, str], schema: StructType) -> "SinkOptions":
        names = set(schema.names)
        if "body" not in names:
            raise ValueError("the DataFrame to write needs a body column (binary or string)")
        namesrv = o.get("namesrv")
        if not namesrv:
            raise ValueError("give the NameServer address: option('namesrv', 'host:port')")
        topic = o.get("topic")
        if not topic and "topic" not in names:
            raise ValueError("give option('topic', ...) or a topic column")
        size = int(o.get("batchSize") or 32)
        if size <= 0:
            raise ValueError("batchSize must be positive")
        return cls(namesrv, topic, o.get("producerGroup") or DEFAULT_PRODUCER_GROUP, size)


def _message(row: Row, default_topic: str | None) -> Message:
    from rmqtx.client.message import Message

    d = row.asDict()
    topic = d.get("topic") or default_topic
    if not topic:
        raise ValueError("a row without a topic, and no option('topic', ...)")
    body = d["body"]
    if body is None:
        body = b""
    keys = d.get("keys")
    props = {str(k): str(v) for k, v in (d.get("properties") or {}).items() if v is not None}
    return Message(topic, body, d.get("tags") or None, keys or None, properties=props)


def send_rows(opts: SinkOptions, rows: Iterator) -> int:
    """Send every row; returns how many went out. Batches break on topic change, count or size."""
    from rmqtx.client.blocking import BlockingProducer

    sent = 0
    batch: list = []
    size = 0
    with BlockingProducer(opts.namesrv, opts.group) as producer:
        def flush() -> None:
            nonlocal batch, size, sent
            if batch:
                producer.send_batch(batch) if len(batch) > 1 else producer.send_message(batch[0])
                sent += len(batch)
                batch, size = [], 0

        for row in rows:
            msg = _message(row, opts.topic)
            if batch and (msg.topic != batch[0].topic or len(batch) >= opts.batch_size
                          or size + len(msg.body) > BATCH_BYTES):
                flush()
            batch.append(msg)
            size += len(msg.body)
        flush()
    return sent


class RocketMQWriter(DataSourceWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator) -> Sent:
        return Sent(send_rows(self.opts, iterator))

    def commit(self, messages: list) -> None:
        log.info("sent %d messages", sum(m.count for m in messages if m is not None))


class RocketMQStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator) -> Sent:
        return Sent(send_rows(self.opts, iterator))

    def commit(self, messages: list, batchId: int) -> None:
        log.info("batch %d: sent %d messages", batchId, sum(m.count for m in messages if m is not None))

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("batch %d failed after %d messages were sent", batchId,
                    sum(m.count for m in messages if m is not None))
