"""PySpark Python data sources over a RocketMQ store directory.

`rocketmq` with option namesrv reads live brokers over the network, in batch and as a stream,
and writes DataFrames to a topic (see network.py and sink.py). Without it, it reads a store
directory: one row per message, read from the commit log (partitions = byte ranges of commit log
files, cut at record boundaries) or, with `topics`, through those topics' consume queues
(partitions = consume queue files). Options: topics (comma list), startTime/endTime (store time,
epoch ms or ISO 8601, [start, end)), includeBody (true), verifyCrc (false | drop | flag: adds
crcValid), splitSize (bytes per commit log partition, 128 MiB).
`rocketmq_consumequeue`: one row per consume queue unit (option topics).
The store must be readable at the same path by the driver (planning) and the executors.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter,
                                    DataSourceWriter, InputPartition)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, IntegerType, LongType, MapType,
                               StringType, StructField, StructType, TimestampType)

from . import scan as S
from .options import parse_bool, parse_crc, parse_time, store_root, topic_list

log = logging.getLogger("rmqtx.spark")

DEFAULT_SPLIT = 128 << 20

MESSAGE_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("queueId", IntegerType()),
    StructField("queueOffset", LongType()),
    StructField("commitLogOffset", LongType()),
    StructField("storeSize", IntegerType()),
    StructField("bodyCRC", IntegerType()),
    StructField("flag", IntegerType()),
    StructField("sysFlag", IntegerType()),
    StructField("bornTimestamp", TimestampType()),
    StructField("storeTimestamp", TimestampType()),
    StructField("bornHost", StringType()),
    StructField("storeHost", StringType()),
    StructField("reconsumeTimes", IntegerType()),
    StructField("preparedTransactionOffset", LongType()),
    StructField("tags", StringType()),
    StructField("keys", ArrayType(StringType())),
    StructField("properties", MapType(StringType(), StringType())),
    StructField("msgId", StringType()),
    StructField("uniqKey", StringType()),
    StructField("body", BinaryType()),
])
CRC_FIELD = StructField("crcValid", BooleanType())

QUEUE_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("queueId", IntegerType()),
    StructField("queueOffset", LongType()),
    StructField("commitLogOffset", LongType()),
    StructField("size", IntegerType()),
    StructField("tagsCode", LongType()),
])


def queue_files(root: str, topics: list[str] | None) -> list[tuple[str, int, int, str]]:
    """(topic, queueId, first queue offset, path) of every consume queue file, in queue order."""
    cq_dir = os.path.join(root, "consumequeue")
    names = topics if topics is not None else sorted(os.listdir(cq_dir)) if os.path.isdir(cq_dir) else []
    out = []
    for topic in names:
        tdir = os.path.join(cq_dir, topic)
        if not os.path.isdir(tdir):
            log.warning("topic %s has no consume queue in %s", topic, root)
            continue
        for qid in sorted((q for q in os.listdir(tdir) if q.isdigit()), key=int):
            qdir = os.path.join(tdir, qid)
            for name in sorted(n for n in os.listdir(qdir) if n.isdigit()):
                out.append((topic, int(qid), int(name) // S.CQ_UNIT.itemsize, os.path.join(qdir, name)))
    return out


@dataclass
class LogRange(InputPartition):
    """Records starting in [start, stop) of one commit log file (start is a record boundary)."""

    file: S.LogFile
    start: int
    stop: int
    last: bool


@dataclass
class QueueFile(InputPartition):
    """The records one consume queue file points at."""

    topic: str
    queue_id: int
    first_offset: int
    path: str


def _prune(first_ts: list[int | None], opts: S.ScanOptions) -> list[bool]:
    """Which pieces may hold records in the time window, store times rising along the pieces.

    A piece's records are stored at or after its first record and at or before the next piece's
    first record, so a piece starting at/after end_ms or followed by one starting before
    start_ms cannot match.
    """
    keep = []
    for i, ts in enumerate(first_ts):
        nxt = first_ts[i + 1] if i + 1 < len(first_ts) else None
        keep.append(not (ts is not None and opts.end_ms is not None and ts >= opts.end_ms)
                    and not (nxt is not None and opts.start_ms is not None and nxt < opts.start_ms))
    return keep


class MessageReader(DataSourceReader):
    """Plans and reads message partitions; every batch comes out as one Arrow RecordBatch."""

    def __init__(self, root: str, schema: StructType, opts: S.ScanOptions, topics: list[str] | None,
                 split: int) -> None:
        self.root = root
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.opts = opts
        self.topics = topics
        self.split = split

    def partitions(self) -> list[InputPartition]:
        return self._queue_partitions() if self.topics else self._log_partitions()

    def _log_partitions(self) -> list[InputPartition]:
        pieces: list[tuple[int, S.LogFile, int]] = []
        stamps: list[int | None] = []
        files = S.commit_log_files(self.root)
        last_data = -1
        for i, f in enumerate(files):
            mapped = S.open_map(f.path)
            if mapped is None:
                continue
            mm = mapped[0]
            for a in range(0, f.size, self.split):
                s = S.find_record_start(mm, a, min(a + self.split, f.size), f.base)
                if s is not None:
                    last_data = i if s == 0 else last_data
                    pieces.append((i, f, s))
                    stamps.append(S.store_timestamp_at(mm, s))
        out: list[InputPartition] = []
        for k, ((i, f, s), keep) in enumerate(zip(pieces, _prune(stamps, self.opts))):
            stop = pieces[k + 1][2] if k + 1 < len(pieces) and pieces[k + 1][0] == i else f.size
            if keep:
                out.append(LogRange(f, s, stop, i >= last_data))
        return out

    def _queue_partitions(self) -> list[InputPartition]:
        files = S.commit_log_files(self.root)
        bases = [f.base for f in files]
        maps: dict[int, object] = {}
        by_queue: dict[tuple[str, int], list[tuple[QueueFile, int | None]]] = {}
        for topic, qid, first, path in queue_files(self.root, self.topics):
            by_queue.setdefault((topic, qid), []).append(
                (QueueFile(topic, qid, first, path), self._first_ts(path, files, bases, maps)))
        out: list[InputPartition] = []
        for parts in by_queue.values():
            out += [p for (p, _), keep in zip(parts, _prune([ts for _, ts in parts], self.opts)) if keep]
        return out

    @staticmethod
    def _first_ts(path: str, files: list[S.LogFile], bases: list[int], maps: dict) -> int | None:
        """Store time of the first record a consume queue file names (None when unknown)."""
        units = np.fromfile(path, S.CQ_UNIT, count=1)
        if not len(units) or units["size"][0] in (0, S.CQ_BLANK_SIZE):
            return None
        off = int(units["offset"][0])
        i = int(np.searchsorted(bases, off, side="right")) - 1
        if i < 0:
            return None
        if i not in maps:
            maps[i] = S.open_map(files[i].path)
        mapped = maps[i]
        pos = off - files[i].base
        if mapped is None or not S.is_record_at(mapped[0], pos, files[i].base):
            return None
        return S.store_timestamp_at(mapped[0], pos)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, QueueFile):
            cols = S.scan_queue_file(partition.path, S.commit_log_files(self.root), self.opts)
        elif isinstance(partition, LogRange):
            cols = S.scan_range(partition.file, partition.start, partition.stop, partition.last, self.opts)
        else:
            return  # Spark's stand-in partition when planning found none
        for c in cols:
            yield pa.RecordBatch.from_arrays([c[f.name].cast(f.type) for f in self.arrow_schema],
                                             schema=self.arrow_schema)


class RocketMQDataSource(DataSource):
    """spark.read.format("rocketmq").load(store): one row per message in the store."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        if self.options.get("namesrv"):
            from .network import network_schema

            return network_schema(MESSAGE_SCHEMA)
        if parse_crc(self.options.get("verifyCrc")) == "flag":
            return StructType(MESSAGE_SCHEMA.fields + [CRC_FIELD])
        return MESSAGE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        o = self.options
        if o.get("namesrv"):
            from .network import NetOptions, NetworkReader

            return NetworkReader(NetOptions.parse(o), schema)
        opts = S.ScanOptions(parse_time(o.get("startTime")), parse_time(o.get("endTime")),
                             parse_bool(o.get("includeBody"), True), parse_crc(o.get("verifyCrc")))
        split = int(o.get("splitSize") or DEFAULT_SPLIT)
        if split <= 0:
            raise ValueError(f"splitSize must be a positive number of bytes, not {split}")
        return MessageReader(store_root(self.options), schema, opts,
                             topic_list(self.options.get("topics")) or None, split)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Micro-batches over the network (option namesrv); store directories are batch only."""
        from .network import NetOptions, NetworkStreamReader

        if not self.options.get("namesrv"):
            raise ValueError("streaming reads go through the brokers: give option('namesrv', 'host:port')")
        return NetworkStreamReader(NetOptions.parse(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import RocketMQWriter, SinkOptions

        return RocketMQWriter(SinkOptions.parse(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import RocketMQStreamWriter, SinkOptions

        return RocketMQStreamWriter(SinkOptions.parse(self.options, schema))


class QueueReader(DataSourceReader):
    """One partition per consume queue file; units decoded with one numpy read."""

    def __init__(self, root: str, topics: list[str] | None, schema: StructType) -> None:
        self.root = root
        self.topics = topics
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        return [QueueFile(*q) for q in queue_files(self.root, self.topics)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueFile):
            return  # Spark's stand-in partition when planning found none
        units = S.read_queue_units(partition.path)
        offsets = partition.first_offset + np.arange(len(units), dtype=np.int64)
        real = units["size"] != S.CQ_BLANK_SIZE
        units, offsets = units[real], offsets[real]
        n = len(units)
        if n:
            yield pa.RecordBatch.from_arrays([
                pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), [partition.topic]).cast(pa.string()),
                pa.array(np.full(n, partition.queue_id, np.int32)),
                pa.array(offsets),
                pa.array(units["offset"].astype(np.int64)),
                pa.array(units["size"].astype(np.int32)),
                pa.array(units["tagsCode"].astype(np.int64)),
            ], schema=self.arrow_schema)


class ConsumeQueueDataSource(DataSource):
    """spark.read.format("rocketmq_consumequeue").load(store): one row per consume queue unit."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq_consumequeue"

    def schema(self) -> StructType:
        return QUEUE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return QueueReader(store_root(self.options), topic_list(self.options.get("topics")) or None, schema)
