"""``/metrics``: rocketmq-exporter's metric names and labels, computed from this broker's own state,
then Apache 5.x's OpenTelemetry names (rmqtx.console.otel) beside them.

The exporter polls brokers with admin requests; here each scrape reads the same figures in-process
(runtime info from the broker's GET_BROKER_RUNTIME_INFO handler, per-minute rates from its stats),
then adds prometheus_client's process and platform metrics.
"""

from __future__ import annotations

import shutil
from typing import Any, Iterable

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from rmqtx.common.topics import DLQ_PREFIX, RETRY_PREFIX
from rmqtx.broker.console_settings import MetricsConfig
from rmqtx.console.otel import otel_families

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: MessageModel ordinals, as the exporter prints them in the msgModel label.
MESSAGE_MODEL_ORDINAL = {"BROADCASTING": "0", "CLUSTERING": "1"}

BROKER_NUMS_LABELS = ("cluster", "brokerIP", "broker")
TOPIC_LABELS = ("cluster", "broker", "topic")
DLQ_LABELS = ("cluster", "broker", "group")
GROUP_LABELS = ("cluster", "broker", "topic", "group")
GROUP_DIFF_LABELS = ("group", "topic", "countOfOnlineConsumers", "msgModel")
GROUP_COUNT_LABELS = ("caddr", "localaddr", "group")
RUNTIME_LABELS = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")

#: rocketmq_brokeruntime_<suffix> <- a plain number of the runtime table.
RUNTIME_NUMBERS = (
    ("msg_put_total_today_now", "msgPutTotalTodayNow"),
    ("msg_gettotal_today_now", "msgGetTotalTodayNow"),
    ("msg_gettotal_yesterdaymorning", "msgGetTotalYesterdayMorning"),
    ("msg_puttotal_yesterdaymorning", "msgPutTotalYesterdayMorning"),
    ("msg_gettotal_todaymorning", "msgGetTotalTodayMorning"),
    ("msg_puttotal_todaymorning", "msgPutTotalTodayMorning"),
    ("dispatch_behind_bytes", "dispatchBehindBytes"),
    ("put_message_size_total", "putMessageSizeTotal"),
    ("put_message_average_size", "putMessageAverageSize"),
    ("query_threadpool_queue_capacity", "queryThreadPoolQueueCapacity"),
    ("remain_transientstore_buffer_numbs", "remainTransientStoreBufferNumbs"),
    ("earliest_message_timestamp", "earliestMessageTimeStamp"),
    ("putmessage_entire_time_max", "putMessageEntireTimeMax"),
    ("start_accept_sendrequest_time", "startAcceptSendRequestTimeStamp"),
    ("send_threadpool_queue_size", "sendThreadPoolQueueSize"),
    ("putmessage_times_total", "putMessageTimesTotal"),
    ("getmessage_entire_time_max", "getMessageEntireTimeMax"),
    ("pagecache_lock_time_mills", "pageCacheLockTimeMills"),
    ("commitlog_disk_ratio", "commitLogDiskRatio"),
    ("consumequeue_disk_ratio", "consumeQueueDiskRatio"),
    ("dispatch_maxbuffer", "dispatchMaxBuffer"),
    ("pull_threadpoolqueue_capacity", "pullThreadPoolQueueCapacity"),
    ("send_threadpoolqueue_capacity", "sendThreadPoolQueueCapacity"),
    ("pull_threadpoolqueue_size", "pullThreadPoolQueueSize"),
    ("query_threadpoolqueue_size", "queryThreadPoolQueueSize"),
    ("pull_threadpoolqueue_headwait_timemills", "pullThreadPoolQueueHeadWaitTimeMills"),
    ("query_threadpoolqueue_headwait_timemills", "queryThreadPoolQueueHeadWaitTimeMills"),
    ("send_threadpoolqueue_headwait_timemills", "sendThreadPoolQueueHeadWaitTimeMills"),
    ("commitlog_maxoffset", "commitLogMaxOffset"),
    ("commitlog_minoffset", "commitLogMinOffset"),
    ("put_latency_99", "putLatency99"),
    ("put_latency_999", "putLatency999"),
    ("remain_howmanydata_toflush", "remainHowManyDataToFlush"),
)
#: rocketmq_brokeruntime_<prefix>{10,60,600} <- the three rates of a runtime "a b c" figure.
RUNTIME_RATES = (
    ("getfound_tps", "getFoundTps"),
    ("gettotal_tps", "getTotalTps"),
    ("gettransfered_tps", "getTransferedTps"),
    ("getmiss_tps", "getMissTps"),
    ("put_tps", "putTps"),
)
#: Java's putMessageDistributeTime buckets, as the exporter names them.
PMDT_NAMES = ("0ms", "0to10ms", "10to50ms", "50to100ms", "100to200ms", "200to500ms", "500to1s", "1to2s", "2to3s",
              "3to4s", "4to5s", "5to10s", "10stomore")


def _number(text: object) -> float:
    """A runtime figure as a number; a unit after it ("0 B") is dropped."""
    try:
        return float((str(text).split() or ["0"])[0])
    except ValueError:
        return 0.0


def _rates(text: object) -> list[float]:
    parts = str(text or "").split(" ")
    return [_number(p) if p.strip() else 0.0 for p in (parts + ["", "", ""])[:3]]


def _pmdt(text: object) -> list[float]:
    """The 13 counts of Java's putMessageDistributeTime text ("[<=0ms]:0 [0~10ms]:0 ...")."""
    values = [_number(part.rsplit(":", 1)[-1]) for part in str(text or "").split(" ") if ":" in part]
    return (values + [0.0] * len(PMDT_NAMES))[: len(PMDT_NAMES)]


class _Snapshot:
    """A collector whose families are set just before each exposition (the reactor thread builds them)."""

    def __init__(self) -> None:
        self.families: list[Metric] = []

    def collect(self) -> Iterable[Metric]:
        return list(self.families)


class BrokerMetrics:
    """Builds the exposition for one broker; ``render`` is called per scrape on the reactor."""

    def __init__(self, broker: Any, views: Any, settings: MetricsConfig | None = None) -> None:
        self.broker = broker
        self.views = views
        self.settings = settings or MetricsConfig()
        self.registry = CollectorRegistry(auto_describe=False)
        self._snapshot = _Snapshot()
        self.registry.register(self._snapshot)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    async def render(self) -> bytes:
        runtime = await self.views.runtime_table()
        self._snapshot.families = self.families(runtime) + otel_families(self.broker, self.settings, runtime)
        return generate_latest(self.registry)

    def families(self, runtime: dict[str, str]) -> list[Metric]:
        cfg, ctx = self.broker.config, self.broker.ctx
        cluster, broker, addr = cfg.brokerClusterName, cfg.brokerName, cfg.broker_addr
        views = self.views
        out: list[Metric] = []

        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=list(labels))
            out.append(family)
            return family

        stats = ctx.stats
        minute = 60.0
        broker_tps = gauge("rocketmq_broker_tps", "Messages put per second over the last minute", BROKER_NUMS_LABELS)
        broker_tps.add_metric([cluster, addr, broker], stats.broker_puts.sum_last(60) / minute)
        broker_qps = gauge("rocketmq_broker_qps", "Messages got per second over the last minute", BROKER_NUMS_LABELS)
        broker_qps.add_metric([cluster, addr, broker], stats.gets_transferred.sum_last(60) / minute)

        producer_tps = gauge("rocketmq_producer_tps", "Messages put per second to a topic over the last minute", TOPIC_LABELS)
        producer_offset = gauge("rocketmq_producer_offset", "Sum of a topic's queue max offsets", TOPIC_LABELS)
        retry_offset = gauge("rocketmq_topic_retry_offset", "Sum of a retry topic's queue max offsets", TOPIC_LABELS)
        dlq_offset = gauge("rocketmq_topic_dlq_offset", "Sum of a dead letter topic's queue max offsets", DLQ_LABELS)
        for topic, tc in sorted(ctx.topics.table.items()):
            total = sum(max(0, ctx.store.get_max_offset_in_queue(topic, q)) for q in range(tc.writeQueueNums))
            if topic.startswith(RETRY_PREFIX):
                retry_offset.add_metric([cluster, broker, topic], total)
            elif topic.startswith(DLQ_PREFIX):
                dlq_offset.add_metric([cluster, broker, topic[len(DLQ_PREFIX):]], total)
            else:
                producer_offset.add_metric([cluster, broker, topic], total)
        for topic, counter in sorted(stats.topic_puts.items()):
            producer_tps.add_metric([cluster, broker, topic], counter.sum_last(60) / minute)
        producer_size = gauge("rocketmq_producer_message_size", "Bytes sent per second to a topic over the last minute",
                              TOPIC_LABELS)
        for topic in sorted(stats.put_size_topics()):
            producer_size.add_metric([cluster, broker, topic], stats.topic_put_size[topic].sum_last(60) / minute)

        consumer_tps = gauge("rocketmq_consumer_tps", "Messages a group got per second from a topic over the last minute", GROUP_LABELS)
        consumer_size = gauge("rocketmq_consumer_message_size", "Bytes a group got per second from a topic over the last minute",
                              GROUP_LABELS)
        for key, counter in sorted(stats.group_get_nums.items()):
            topic, _, group = key.partition("@")
            consumer_tps.add_metric([cluster, broker, topic, group], counter.sum_last(60) / minute)
            size = stats.group_get_size.get(key)
            consumer_size.add_metric([cluster, broker, topic, group], size.sum_last(60) / minute if size else 0.0)

        consumer_offset = gauge("rocketmq_consumer_offset", "Sum of a group's committed offsets on a topic", GROUP_LABELS)
        latency = gauge("rocketmq_group_get_latency_by_storetime",
                        "Age in ms of the oldest message a group has not consumed on a topic", GROUP_LABELS)
        diff = gauge("rocketmq_group_diff", "Messages a group has not consumed on a topic", GROUP_DIFF_LABELS)
        retry_diff = gauge("rocketmq_group_retrydiff", "Messages a group has not consumed on its retry topic", GROUP_DIFF_LABELS)
        count = gauge("rocketmq_group_count", "Online consumers of a group", GROUP_COUNT_LABELS)
        for group in sorted(views.group_names()):
            info = ctx.clients.consumer_group(group)
            channels = list(info.channels.values()) if info is not None else []
            model = MESSAGE_MODEL_ORDINAL.get(info.message_model if info else "CLUSTERING", "1")
            caddrs = ",".join(sorted(c.conn.peer for c in channels))
            local = ",".join(sorted({c.client_id.split("@", 1)[0] for c in channels}))
            count.add_metric([caddrs, local, group], len(channels))
            per_topic: dict[str, list[dict]] = {}
            for row in views.lag_rows(group):
                per_topic.setdefault(row["topic"], []).append(row)
            for topic, rows in sorted(per_topic.items()):
                lag = sum(r["lag"] for r in rows)
                if model == "1":
                    target = retry_diff if topic.startswith(RETRY_PREFIX) else diff
                    target.add_metric([group, topic, str(len(channels)), model], lag)
                    latency.add_metric([cluster, broker, topic, group], max(r["latencyMs"] for r in rows))
                consumer_offset.add_metric([cluster, broker, topic, group], sum(r["consumerOffset"] for r in rows))

        labels = [cluster, addr, "", runtime.get("brokerVersionDesc", ""), runtime.get("bootTimestamp", ""),
                  runtime.get("brokerVersion", "")]
        for suffix, key in RUNTIME_NUMBERS:
            gauge(f"rocketmq_brokeruntime_{suffix}", f"Broker runtime info {key}", RUNTIME_LABELS).add_metric(
                labels, _number(runtime.get(key, "0")))
        for prefix, key in RUNTIME_RATES:
            for window, value in zip((10, 60, 600), _rates(runtime.get(key))):
                gauge(f"rocketmq_brokeruntime_{prefix}{window}", f"Broker runtime info {key}, {window} s window",
                      RUNTIME_LABELS).add_metric(labels, value)
        for name, value in zip(PMDT_NAMES, _pmdt(runtime.get("putMessageDistributeTime"))):
            gauge(f"rocketmq_brokeruntime_pmdt_{name}", f"Puts that took {name}", RUNTIME_LABELS).add_metric(labels, value)
        try:
            usage = shutil.disk_usage(cfg.storePathRootDir)
            free, total = float(usage.free), float(usage.total)
        except OSError:
            free = total = -1.0
        gauge("rocketmq_brokeruntime_commitlogdir_capacity_free", "Free bytes of the store's disk", RUNTIME_LABELS).add_metric(labels, free)
        gauge("rocketmq_brokeruntime_commitlogdir_capacity_total", "Bytes of the store's disk", RUNTIME_LABELS).add_metric(labels, total)
        store_bytes = self.views.store_size()
        gauge("rmqtx_store_bytes", "Bytes the store's files take on disk (walked every 10 s)", ("cluster", "broker")).add_metric(
            [cluster, broker], float(store_bytes))
        return out
