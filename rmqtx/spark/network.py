"""The `rocketmq` source over the network: brokers' pull protocol, in batch and micro-batch streams.

spark.read.format("rocketmq").option("namesrv", "host:port").option("topics", "A,B").load()

Routes come from the NameServer, offset ranges from GET_MIN/MAX_OFFSET (or SEARCH_OFFSET_BY_TIMESTAMP,
or a consumer group's committed offsets); each Spark partition pulls one queue's offset range with a
blocking socket client and decodes the records into the file mode's columns (plus brokerName).
Offsets JSON names queues "brokerName/queueId": {"A": {"broker-a/0": 10, "broker-b/3": -2}}, with
-2 for earliest and -1 for latest, as Spark's Kafka source does.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from rmqtx.common.subscription import SQL92, TAG, SubscriptionData
from rmqtx.store import record as R

from . import scan as S
from .options import parse_time, topic_list
from .wire import Cluster, Queue

if TYPE_CHECKING:
    from pyspark.sql.streaming.datasource import ReadLimit

log = logging.getLogger("rmqtx.spark")

EARLIEST, LATEST = -2, -1
DEFAULT_GROUP = "RMQTX_SPARK_READER"
DEFAULT_PER_PARTITION = 200_000
BATCH_BYTES = 8 << 20  # pulled bytes decoded into one Arrow batch
SEARCH_SLACK = 64  # offsets read around a SEARCH_OFFSET_BY_TIMESTAMP answer
BROKER_FIELD = StructField("brokerName", StringType())

try:  # Spark 4.2+: admission control and Trigger.AvailableNow for Python streaming sources
    from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older pyspark
    ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in so the reader class needs no second definition."""


def network_schema(base: StructType) -> StructType:
    """The file mode's columns plus the broker group the queue lives on."""
    return StructType(base.fields + [BROKER_FIELD])


def _flag(value: str | None, default: bool) -> bool:
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class NetOptions:
    """Everything a partition reader needs; picklable, sent to the executors."""

    namesrv: str
    topics: tuple[str, ...]
    group: str = DEFAULT_GROUP
    group_given: bool = False
    commit: bool = False
    filter_type: str = TAG
    filter_expression: str = "*"
    include_body: bool = True
    pull_batch: int = 32
    pull_depth: int = 4
    per_partition: int = DEFAULT_PER_PARTITION
    max_per_trigger: int | None = None
    timeout: float = 30.0
    options: dict = field(default_factory=dict, compare=False)

    @classmethod
    def parse(cls, o: Mapping[str, str]) -> "NetOptions":
        topics = tuple(topic_list(o.get("topics")))
        if not topics:
            raise ValueError("give the topics to read: option('topics', 'A,B')")
        kind = (o.get("filterType") or TAG).strip().upper()
        if kind not in (TAG, SQL92):
            raise ValueError(f"filterType must be TAG or SQL92, not {o.get('filterType')!r}")
        expression = o.get("filterExpression") or "*"
        SubscriptionData.build(topics[0], expression, kind)  # a bad tag expression fails at planning
        per_partition = int(o.get("messagesPerPartition") or DEFAULT_PER_PARTITION)
        if per_partition <= 0:
            raise ValueError("messagesPerPartition must be positive")
        cap = o.get("maxMessagesPerTrigger")
        return cls(namesrv=o.get("namesrv") or "", topics=topics, group=o.get("group") or DEFAULT_GROUP,
                   group_given=bool(o.get("group")), commit=_flag(o.get("commitOffsets"), False),
                   filter_type=kind, filter_expression=expression,
                   include_body=_flag(o.get("includeBody"), True), pull_batch=int(o.get("pullBatchSize") or 32),
                   pull_depth=int(o.get("pullDepth") or 4), per_partition=per_partition,
                   max_per_trigger=int(cap) if cap else None, timeout=float(o.get("timeout") or 30),
                   options={k: o.get(k) for k in ("startingOffsets", "endingOffsets", "startingTimestamp",
                                                  "endingTimestamp") if o.get(k) is not None})

    def cluster(self) -> Cluster:
        return Cluster(self.namesrv, self.timeout)

    def subscription(self, topic: str) -> SubscriptionData:
        sub = SubscriptionData.build(topic, self.filter_expression, self.filter_type)
        sub.sub_version = 0
        return sub


@dataclass
class QueueRange(InputPartition):
    """Messages of one queue with offsets in [start, end); `commit` sets the group's offset to end."""

    queue: Queue
    start: int
    end: int
    commit: bool = False
    min_ms: int | None = None  # store time window [min_ms, max_ms) from the *Timestamp options
    max_ms: int | None = None


# -- offsets ---------------------------------------------------------------------------------
def all_queues(cluster: Cluster, topics: tuple[str, ...]) -> list[Queue]:
    out = []
    for topic in topics:
        queues = cluster.queues(topic)
        if not queues:
            log.warning("topic %s has no route on the NameServer", topic)
        out += queues
    return out


def _parse_spec(value: str | None, default: str) -> str | dict:
    text = (value or default).strip()
    if text.startswith("{"):
        spec = json.loads(text)
        if not isinstance(spec, dict) or not all(isinstance(v, dict) for v in spec.values()):
            raise ValueError(f'offsets JSON must look like {{"topic": {{"brokerName/queueId": offset}}}}: {text}')
        return spec
    if text.lower() not in ("earliest", "latest", "group"):
        raise ValueError(f"offsets must be earliest, latest, group or JSON, not {text!r}")
    return text.lower()


def _time(value: str) -> int:
    ms = parse_time(value)
    assert ms is not None
    return ms


def resolve(cluster: Cluster, queues: list[Queue], opts: NetOptions, which: str, default: str) -> dict[Queue, int]:
    """Concrete offsets per queue for startingOffsets/endingOffsets (or the *Timestamp options)."""
    stamp = opts.options.get(f"{which}Timestamp")
    given = opts.options.get(f"{which}Offsets")
    if stamp is not None and given is not None:
        raise ValueError(f"give {which}Offsets or {which}Timestamp, not both")
    if stamp is not None:  # Java answers the unit closest in time: back off, the reader cuts by time exactly
        ms = _time(stamp)
        out = {}
        for q in queues:
            found = cluster.search_offset(q, ms)
            lo, hi = cluster.min_offset(q), cluster.max_offset(q)
            out[q] = max(lo, found - SEARCH_SLACK) if which == "starting" else min(hi, found + SEARCH_SLACK)
        return out
    spec = _parse_spec(given, default)
    out = {}
    for q in queues:
        if isinstance(spec, dict):
            want = spec.get(q.topic, {}).get(q.key, EARLIEST if which == "starting" else LATEST)
            want = "earliest" if want == EARLIEST else "latest" if want == LATEST else int(want)
        else:
            want = spec
        if want == "group":
            committed = cluster.committed_offset(q, opts.group)
            want = "earliest" if committed is None or committed < 0 else committed
        if want == "earliest":
            out[q] = cluster.min_offset(q)
        elif want == "latest":
            out[q] = cluster.max_offset(q)
        else:
            out[q] = int(want)
    return out


def to_json(offsets: dict[Queue, int]) -> dict:
    """{"topic": {"brokerName/queueId": offset}}, sorted, as Spark keeps it in the checkpoint."""
    out: dict[str, dict[str, int]] = {}
    for q, off in sorted(offsets.items()):
        out.setdefault(q.topic, {})[q.key] = int(off)
    return out


def split(q: Queue, start: int, end: int, per_partition: int, commit: bool) -> list[QueueRange]:
    """[start, end) of one queue cut into ranges of at most per_partition offsets (never cut when committing)."""
    if end <= start:
        return []
    if commit:
        return [QueueRange(q, start, end, True)]
    return [QueueRange(q, a, min(a + per_partition, end)) for a in range(start, end, per_partition)]


# -- reading ---------------------------------------------------------------------------------
def read_range(opts: NetOptions, part: QueueRange, arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Pull the range and yield it as Arrow batches; commits the group's offset once all is read."""
    sub = opts.subscription(part.queue.topic)
    scan_opts = S.ScanOptions(part.min_ms, part.max_ms, opts.include_body)
    with opts.cluster() as cluster:
        pending: list[bytes] = []
        size = 0
        for body in cluster.pull_range(part.queue, opts.group, sub, part.start, part.end, opts.pull_batch, opts.pull_depth):
            pending.append(body)
            size += len(body)
            if size >= BATCH_BYTES:
                yield from _batches(b"".join(pending), part, sub, scan_opts, arrow_schema)
                pending, size = [], 0
        if pending:
            yield from _batches(b"".join(pending), part, sub, scan_opts, arrow_schema)
        if part.commit:
            cluster.commit_offset(part.queue, opts.group, part.end)


def record_starts(data: bytes) -> np.ndarray:
    """Where each stored record of a pull answer (records back to back) starts."""
    starts = []
    pos, n = 0, len(data)
    unpack = R.INT32.unpack_from
    while pos + 4 <= n:
        total = unpack(data, pos)[0]
        if total < S.MIN_RECORD or pos + total > n:
            log.warning("a pulled record at byte %d claims %d bytes; the rest of the answer is dropped", pos, total)
            break
        starts.append(pos)
        pos += total
    return np.array(starts, np.int64)


def _batches(data: bytes, part: QueueRange, sub: SubscriptionData, opts: S.ScanOptions,
             arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    buf = np.frombuffer(data, np.uint8)
    cols = S.decode(buf, record_starts(data), None, opts)
    if cols is None:
        return
    keep = pc.and_(pc.greater_equal(cols["queueOffset"], part.start), pc.less(cols["queueOffset"], part.end))
    if sub.is_tag and sub.tags:  # the broker matched tag hash codes only
        keep = pc.and_(keep, pc.fill_null(pc.is_in(cols["tags"], pa.array(sub.tags, pa.string())), False))
    n = len(cols["queueOffset"])
    cols["brokerName"] = pa.array([part.queue.broker] * n, pa.string())
    batch = pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in arrow_schema], schema=arrow_schema)
    batch = batch.filter(keep)
    if batch.num_rows:
        yield batch


class NetworkReader(DataSourceReader):
    """A batch read of [startingOffsets, endingOffsets) of every queue of the topics."""

    def __init__(self, opts: NetOptions, schema: StructType) -> None:
        self.opts = opts
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        with self.opts.cluster() as cluster:
            queues = all_queues(cluster, self.opts.topics)
            start = resolve(cluster, queues, self.opts, "starting", "group" if self.opts.group_given else "earliest")
            end = resolve(cluster, queues, self.opts, "ending", "latest")
        o = self.opts.options
        window = (_time(o["startingTimestamp"]) if "startingTimestamp" in o else None,
                  _time(o["endingTimestamp"]) if "endingTimestamp" in o else None)
        out: list[InputPartition] = []
        for q in queues:
            for part in split(q, start[q], end[q], self.opts.per_partition, self.opts.commit):
                part.min_ms, part.max_ms = window
                out.append(part)
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, QueueRange):
            yield from read_range(self.opts, partition, self.arrow_schema)


class NetworkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of new messages; offsets per queue live in Spark's checkpoint.

    A batch's end offsets never move back, so replaying a checkpointed batch after a restart
    reads exactly the same messages; commit() then sets the group's offsets when commitOffsets is on.
    """

    def __init__(self, opts: NetOptions, schema: StructType) -> None:
        self.opts = opts
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.target: dict | None = None

    def initialOffset(self) -> dict:
        with self.opts.cluster() as cluster:
            queues = all_queues(cluster, self.opts.topics)
            return to_json(resolve(cluster, queues, self.opts, "starting", "group" if self.opts.group_given else "latest"))

    def _newest(self) -> dict:
        with self.opts.cluster() as cluster:
            return to_json({q: cluster.max_offset(q) for q in all_queues(cluster, self.opts.topics)})

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        newest = self.target if self.target is not None else self._newest()
        merged = {t: dict(qs) for t, qs in (start or {}).items()}
        for topic, queues in newest.items():
            for key, off in queues.items():
                have = merged.setdefault(topic, {}).get(key)
                merged[topic][key] = off if have is None else max(have, off)
        cap = self.opts.max_per_trigger
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            cap = limit.max_rows
        elif limit is not None and type(limit).__name__ == "ReadAllAvailable":
            cap = None
        return merged if cap is None or start is None else _capped(start, merged, cap)

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        return ReadMaxRows(self.opts.max_per_trigger) if self.opts.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._newest()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        out: list[InputPartition] = []
        fresh = []
        for topic, queues in end.items():
            for key, stop in queues.items():
                begin = start.get(topic, {}).get(key)
                if begin is None:
                    fresh.append((topic, key, stop))
                else:
                    out += split(self._queue(topic, key), begin, stop, self.opts.per_partition, False)
        if fresh:  # a queue that appeared since the last batch is read from its earliest message
            with self.opts.cluster() as cluster:
                for topic, key, stop in fresh:
                    q = self._queue(topic, key, cluster)
                    out += split(q, cluster.min_offset(q), stop, self.opts.per_partition, False)
        if "startingTimestamp" in self.opts.options:  # the initial offsets were backed off: cut by time
            for part in out:
                if isinstance(part, QueueRange):
                    part.min_ms = _time(self.opts.options["startingTimestamp"])
        return out

    def _queue(self, topic: str, key: str, cluster: Cluster | None = None) -> Queue:
        """The queue named in an offsets dict, with its broker's address from the current route."""
        if not hasattr(self, "_routes"):
            self._routes: dict[str, dict[str, Queue]] = {}
        if topic not in self._routes or key not in self._routes[topic]:
            if cluster is not None:
                self._routes[topic] = {q.key: q for q in cluster.queues(topic)}
            else:
                with self.opts.cluster() as c:
                    self._routes[topic] = {q.key: q for q in c.queues(topic)}
        try:
            return self._routes[topic][key]
        except KeyError:
            raise RuntimeError(f"queue {key} of {topic} has no broker address on the NameServer now") from None

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, QueueRange):
            yield from read_range(self.opts, partition, self.arrow_schema)

    def commit(self, end: dict) -> None:
        if not self.opts.commit:
            return
        with self.opts.cluster() as cluster:
            for topic, queues in end.items():
                by_key = {q.key: q for q in cluster.queues(topic)}
                for key, off in queues.items():
                    if key in by_key:
                        cluster.commit_offset(by_key[key], self.opts.group, off)


def _capped(start: dict, end: dict, cap: int) -> dict:
    """end moved back so at most `cap` offsets are read in all, shared out over the queues evenly."""
    lags = [(t, k, start.get(t, {}).get(k, off), off) for t, qs in end.items() for k, off in qs.items()]
    out = {t: dict(qs) for t, qs in end.items()}
    left = cap
    waiting = [x for x in lags if x[3] > x[2]]
    for t, k, begin, stop in lags:
        out[t][k] = min(stop, begin) if k in start.get(t, {}) else stop
    while left > 0 and waiting:
        share = max(left // len(waiting), 1)
        nxt = []
        for t, k, begin, stop in waiting:
            now = out[t][k]
            step = min(share, stop - now, left)
            out[t][k] = now + step
            left -= step
            if out[t][k] < stop:
                nxt.append((t, k, begin, stop))
            if left <= 0:
                break
        waiting = nxt
    return out
