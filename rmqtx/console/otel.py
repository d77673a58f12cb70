"""``/metrics``' Apache 5.x half: the series a 5.x broker's OpenTelemetry Prometheus exporter prints.

Apache 5.3-5.5 ships opentelemetry-exporter-prometheus 1.29.0-alpha: a counter named ``..._total``
keeps its name, a histogram gives ``_bucket``/``_sum``/``_count``, and a unit is appended to the name
("milliseconds", "bytes") unless the name has it already, so ``rocketmq_consumer_lag_latency`` is
scraped as ``rocketmq_consumer_lag_latency_milliseconds``. Every sample carries
``otel_scope_name="broker-meter"`` and the broker's labels (``metricsLabel``'s pairs, ``aggregation``
when ``metricsInDelta``, ``node_type``, ``cluster``, ``node_id``). Only figures rmqtx measures are
served; docs/console.md lists the 5.x series left out and why.
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable

from prometheus_client.core import Metric

from rmqtx.broker.processors.admin_bodies import is_system_topic
from rmqtx.broker.stats import FINISH_LATENCY_BOUNDS, MESSAGE_SIZE_BOUNDS
from rmqtx.common.topics import DLQ_PREFIX, RETRY_PREFIX
from rmqtx.broker.console_settings import MetricsConfig
from rmqtx.tools.tables import version_desc

SCOPE = "broker-meter"
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"
#: ConsumeType.getTypeCN(), lower-cased as Java labels consume_mode.
CONSUME_MODE = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop"}
#: The le labels of rocketmq_message_size, as Java's Double.toString prints the bounds.
SIZE_LE = tuple(f"{float(b)}" for b in MESSAGE_SIZE_BOUNDS) + ("+Inf",)
FINISH_LE = tuple(f"{float(b)}" for b in FINISH_LATENCY_BOUNDS) + ("+Inf",)
#: Java's MESSAGE_STORE_TIMESTAMP_POSITION + 8: what must be written for the first record's store time to be read.
STORE_TIMESTAMP_END = 56 + 8
STORE_LABELS = {"storage_type": "local", "storage_medium": "disk"}


def _flag(value: bool) -> str:
    return "true" if value else "false"


def is_system_group(group: str) -> bool:
    """BrokerMetricsManager.isSystemGroup: CID_RMQ_SYS_ groups, any case."""
    return group.lower().startswith(SYSTEM_GROUP_PREFIX)


def _number(text: str | None) -> int:
    """A runtime-table figure ("0", "1700000000000"); -1 when absent."""
    try:
        return int(float(text)) if text else -1
    except ValueError:
        return -1


def _retry_or_dlq(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX)


def base_labels(cfg: Any, settings: MetricsConfig) -> dict[str, str]:
    """The labels every 5.x sample carries, in Java's order of puts (later puts win)."""
    labels = {"otel_scope_name": SCOPE, **settings.labels}
    if settings.in_delta:
        labels["aggregation"] = "delta"
    labels.update(node_type="broker", cluster=cfg.brokerClusterName, node_id=cfg.brokerName)
    return labels


class _Families:
    """Metric families built for one scrape; gauge, counter and histogram add samples with the base labels."""

    def __init__(self, base: dict[str, str]) -> None:
        self.base = base
        self.out: list[Metric] = []
        self._by_name: dict[str, Metric] = {}

    def family(self, name: str, doc: str, kind: str) -> Metric:
        family = self._by_name.get(name)
        if family is None:
            family = self._by_name[name] = Metric(name, doc, kind)
            self.out.append(family)
        return family

    def gauge(self, name: str, doc: str, value: float, **labels: str) -> None:
        self.family(name, doc, "gauge").add_sample(name, {**self.base, **labels}, float(value))

    def counter(self, name: str, doc: str, value: float, **labels: str) -> None:
        """``name`` without ``_total``: prometheus_client prints the family as ``name_total``."""
        self.family(name, doc, "counter").add_sample(name + "_total", {**self.base, **labels}, float(value))

    def histogram(self, name: str, doc: str, bounds: tuple[str, ...], buckets: Iterable[int], total: float,
                  **labels: str) -> None:
        """``buckets``: counts per bucket, not cumulative; ``bounds``: their le labels."""
        family = self.family(name, doc, "histogram")
        sample = {**self.base, **labels}
        count = 0
        for le, n in zip(bounds, buckets):
            count += n
            family.add_sample(name + "_bucket", {**sample, "le": le}, float(count))
        family.add_sample(name + "_count", sample, float(count))
        family.add_sample(name + "_sum", sample, float(total))


def otel_families(broker: Any, settings: MetricsConfig, runtime: dict[str, str]) -> list[Metric]:
    """The 5.x families the switches of ``settings`` leave on, from the broker's state now."""
    cfg, ctx = broker.config, broker.ctx
    out = _Families(base_labels(cfg, settings))
    on = settings.groups
    if "enableStatsMetrics" in on:
        out.gauge("rocketmq_broker_permission", "Broker permission", cfg.brokerPermission)
        out.gauge("rocketmq_topic_number", "Active topic number", len(ctx.topics.table))
        out.gauge("rocketmq_consumer_group_number", "Active subscription group number", len(ctx.groups.table))
    if "enableRequestMetrics" in on:
        _requests(out, ctx, cfg)
    if "enableConnectionMetrics" in on:
        _connections(out, ctx)
    if "enableLagAndDlqMetrics" in on:
        _lag(out, ctx, cfg)
        for (group, topic), n in sorted(ctx.stats.sent_to_dlq.items()):
            # a send-back without originTopic: Java's null attribute value leaves the label out
            labels = {"consumer_group": group, **({"topic": topic} if topic else {}),
                      "is_system": _flag(is_system_topic(topic, cfg) or is_system_group(group))}
            out.counter("rocketmq_send_to_dlq_messages", "Consumer send to DLQ messages", n, **labels)
    if "enableTransactionMetrics" in on:
        for topic, row in sorted(ctx.stats.transactions.items()):
            if row[0]:
                out.counter("rocketmq_commit_messages", "Total number of commit messages", row[0], topic=topic)
                # Java records whole seconds in an instrument whose unit says "ms": the name carries the unit
                out.histogram("rocketmq_finish_message_latency_milliseconds", "Transaction finish latency", FINISH_LE,
                              row[3:], row[2], topic=topic)
            if row[1]:
                out.counter("rocketmq_rollback_messages", "Total number of rollback messages", row[1], topic=topic)
    if "enableMessageStoreMetrics" in on:
        _store(out, ctx, cfg, runtime)
    return out.out


def _requests(out: _Families, ctx: Any, cfg: Any) -> None:
    stats = ctx.stats
    for (topic, kind), row in sorted(stats.messages_in.items()):
        if _retry_or_dlq(topic):  # as Java, sends that land in a retry or dead letter topic are left out
            continue
        labels = {"topic": topic, "message_type": kind, "is_system": _flag(is_system_topic(topic, cfg))}
        out.counter("rocketmq_messages_in", "Total number of incoming messages", row[0], **labels)
        out.counter("rocketmq_throughput_in", "Total traffic of incoming messages", row[1], **labels)
        out.histogram("rocketmq_message_size", "Incoming messages size", SIZE_LE, row[3:], row[2], **labels)
    for key, counter in sorted(stats.group_get_nums.items()):
        topic, _, group = key.partition("@")
        if _retry_or_dlq(topic):
            continue
        labels = {"topic": topic, "consumer_group": group,
                  "is_system": _flag(is_system_topic(topic, cfg) or group.startswith("CID_RMQ_SYS_"))}
        size = stats.group_get_size.get(key)
        out.counter("rocketmq_messages_out", "Total number of outgoing messages", counter.total, **labels)
        out.counter("rocketmq_throughput_out", "Total traffic of outgoing messages", size.total if size else 0, **labels)


def _connections(out: _Families, ctx: Any) -> None:
    producers: dict[tuple[str, str], int] = {}
    for channels in ctx.clients.producers.values():
        for channel in channels.values():
            key = (channel.language.lower(), version_desc(channel.version).lower())
            producers[key] = producers.get(key, 0) + 1
    for (language, version), n in sorted(producers.items()):
        out.gauge("rocketmq_producer_connections", "Producer connections", n, language=language, version=version,
                  protocol_type="remoting")
    for group, info in sorted(ctx.clients.consumers.items()):
        consumers: dict[tuple[str, str], int] = {}
        for channel in info.channels.values():
            key = (channel.language.lower(), version_desc(channel.version).lower())
            consumers[key] = consumers.get(key, 0) + 1
        mode = CONSUME_MODE.get(info.consume_type, str(info.consume_type).lower())
        for (language, version), n in sorted(consumers.items()):
            out.gauge("rocketmq_consumer_connections", "Consumer connections", n, consumer_group=group, language=language,
                      version=version, consume_mode=mode, protocol_type="remoting", is_system=_flag(is_system_group(group)))


def _earlier(earliest: int, stored: int) -> int:
    return stored if stored > 0 and (earliest == 0 or stored < earliest) else earliest


def _lag(out: _Families, ctx: Any, cfg: Any) -> None:
    """ConsumerLagCalculator for groups of the subscription table online now, per subscribed topic
    (retry topics skipped): messages past the committed offset and how old the first of them is;
    pulled but not committed (inflight); not pulled yet (ready) and how old the first of those is."""
    store, now, pulled = ctx.store, int(time.time() * 1000), ctx.stats.pull_offsets
    for group in sorted(ctx.groups.table):
        info = ctx.clients.consumer_group(group)
        if info is None or not info.channels or info.consume_type == "CONSUME_POP":
            continue
        for topic in sorted(info.subscriptions):
            tc = ctx.topics.table.get(topic)
            if topic.startswith(RETRY_PREFIX) or tc is None or not tc.perm & cfg.brokerPermission & 6:
                continue
            lag = inflight = ready = earliest = unpulled = 0
            for qid in range(tc.writeQueueNums):
                broker_offset = max(0, store.get_max_offset_in_queue(topic, qid))
                stored_committed = ctx.offsets.query(group, topic, qid)
                committed = broker_offset if stored_committed < 0 else stored_committed
                lag += max(0, broker_offset - committed)
                if committed < broker_offset:
                    earliest = _earlier(earliest, store.get_message_store_timestamp(topic, qid, committed))
                pull = pulled.get((topic, group, qid), stored_committed)  # Java's queryPullOffset
                read_from = max(pull, 0)
                inflight += max(0, read_from - (stored_committed if stored_committed >= 0 else read_from))
                if read_from < broker_offset:
                    unpulled = _earlier(unpulled, store.get_message_store_timestamp(topic, qid, read_from))
                ready += max(0, broker_offset - (pull if pull >= 0 else broker_offset))
            labels = {"consumer_group": group, "topic": topic, "is_retry": "false",
                      "is_system": _flag(is_system_topic(topic, cfg) or is_system_group(group))}
            out.gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", lag, **labels)
            out.gauge("rocketmq_consumer_lag_latency_milliseconds", "Consumer lag time", now - earliest if earliest else 0,
                      **labels)
            out.gauge("rocketmq_consumer_inflight_messages", "Consumer inflight messages", inflight, **labels)
            out.gauge("rocketmq_consumer_queueing_latency_milliseconds", "Consumer queueing time",
                      now - unpulled if unpulled else 0, **labels)
            out.gauge("rocketmq_consumer_ready_messages", "Consumer ready messages", ready, **labels)


def _store(out: _Families, ctx: Any, cfg: Any, runtime: dict[str, str]) -> None:
    try:  # Java's File.getTotalSpace() - getFreeSpace(): blocks in use, root's reserve counted free
        fs = os.statvfs(cfg.storePathRootDir)
    except OSError:
        fs = None
    if fs is not None and fs.f_blocks > 0:
        out.gauge("rocketmq_storage_size_bytes", "Broker storage size", (fs.f_blocks - fs.f_bfree) * fs.f_frsize, **STORE_LABELS)
    queue = ctx.store.commitlog.queue
    out.gauge("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", max(0, queue.max_offset - queue.flushed_where),
              **STORE_LABELS)
    behind = _number(runtime.get("dispatchBehindBytes"))
    if behind >= 0:
        out.gauge("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", behind, **STORE_LABELS)
    # 5.x's getEarliestMessageTime: the first record's store time (not the runtime table's 4.x reading)
    store = ctx.store
    size = STORE_TIMESTAMP_END + (12 if ":" in cfg.brokerIP1 else 0)
    earliest = store.commitlog.store_timestamp_at(store.min_phy_offset, size) if store.max_phy_offset > store.min_phy_offset else -1
    if earliest > 0:
        out.gauge("rocketmq_storage_message_reserve_time_milliseconds", "Broker message reserve time",
                  int(time.time() * 1000) - earliest, **STORE_LABELS)
    timer = ctx.timer
    files = timer.files if timer is not None and timer.cfg.timerWheelEnable else None  # Java: only with the wheel on
    if files is not None:
        for topic, (count, _) in sorted(files.metrics.counts.items()):
            out.gauge("rocketmq_timing_messages", "Current message number in timing", count, topic=topic, **STORE_LABELS)
