"""Broker config and runtime: GET/UPDATE_BROKER_CONFIG (26/25), GET_BROKER_RUNTIME_INFO (28), VIEW_BROKER_STATS_DATA (315).

UPDATE_BROKER_CONFIG let anyone who reached a Java broker rewrite paths and commands
(CVE-2023-33246). Here it is off unless ``enableUpdateBrokerConfig=true`` and even then only takes
the harmless runtime switches in ``UPDATABLE_KEYS``.
"""

from __future__ import annotations

import dataclasses
import shutil

import orjson

from rmqtx.broker.config import RUNTIME_KEYS
from rmqtx.broker.context import BrokerContext
from rmqtx.broker.java_settings import java_defaults
from rmqtx.broker.processors.admin_bodies import ok
from rmqtx.broker.processors.admin_headers import GetBrokerConfigResponseHeader, ViewBrokerStatsDataRequestHeader
from rmqtx.broker.topics import DataVersion
from rmqtx.common import fastjson
from rmqtx.common.fastjson import JavaMap
from rmqtx.common.properties import parse_bool, parse_properties
from rmqtx.common.topics import SCHEDULE_TOPIC
from rmqtx.remoting.codes import CURRENT_VERSION, RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.record import RecordError, decode_record

ENABLE_KEY = "enableUpdateBrokerConfig"
#: Settings rmqtx reads on every use, so changing them at run time is both safe and effective.
UPDATABLE_KEYS = RUNTIME_KEYS
VERSION_DESC = "V4_9_8"


def _human_bytes(n: int) -> str:
    """``MixAll.humanReadableByteCount(n, false)``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{value:.1f} {'KMGTPE'[exp - 1]}iB"


class RuntimeAdminProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.stats = ctx.stats
        self.config_version = DataVersion()
        self.boot_phy_offset = 0
        from twisted.internet import reactor

        reactor.callLater(0, self._note_boot_offset)  # the store loads right after the processors are built

    def _note_boot_offset(self) -> None:
        self.boot_phy_offset = self.ctx.store.max_phy_offset

    def table(self) -> dict:
        return {
            RequestCode.GET_BROKER_CONFIG: self.broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_stats,
        }

    def broker_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        settings = self.ctx.config.as_properties()
        store_config = self.ctx.store.config
        for key, value in store_config.to_properties().items():
            settings.setdefault(key, value)
        settings["storePathCommitLog"] = settings.get("storePathCommitLog") or store_config.commit_log_dir
        for key, value in java_defaults(self.ctx.config.listenPort).items():
            settings.setdefault(key, value)
        body = "".join(f"{k}={v}\n" for k, v in settings.items()).encode()
        version = orjson.dumps(self.config_version.to_json()).decode()
        return GetBrokerConfigResponseHeader(version).apply_to(ok(request, body))

    def update_broker_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        config = self.ctx.config
        if not config.switches.enable_update_broker_config:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"Can not update config: {ENABLE_KEY} is false on this broker."
            )
        updates = parse_properties(request.body.decode("utf-8", "replace"), trim_values=True) if request.body else {}
        refused = sorted(k for k in updates if k not in UPDATABLE_KEYS)
        if refused:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"Can not update config {', '.join(refused)}: only {', '.join(sorted(UPDATABLE_KEYS))} may change at run time.",
            )
        kinds = {f.name: f.type for f in dataclasses.fields(config)}
        try:
            converted = {k: _convert(kinds[k], v) for k, v in updates.items()}
        except ValueError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        config.update(**converted)  # GET_BROKER_CONFIG lists these fields' values, so the listing follows
        if updates:
            self.config_version.next()
        if "brokerPermission" in updates:
            self.ctx.topics.data_version.next()
            self.ctx.registrar.register_all()
        return ok(request)

    def runtime_info(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return ok(request, fastjson.dumps({"table": self._runtime_table()}))

    def _runtime_table(self) -> JavaMap:
        """The keys of Java's ``prepareRuntimeInfo``. rmqtx has no thread pools: their queues are
        always empty, and their capacities are the settings a tool would compare them with."""
        store, cfg, stats = self.ctx.store, self.ctx.config, self.stats
        capacity = self._pool_capacity
        times, now_ms = store.times, int(store.clock() * 1000)
        puts, gets = stats.broker_puts.total, stats.gets_transferred.total
        puts_today, puts_yesterday = stats.broker_puts.mornings()
        gets_today, gets_yesterday = stats.gets_transferred.mornings()
        size_total = max(0, store.max_phy_offset - self.boot_phy_offset)
        ratio = self._disk_ratio(cfg.storePathRootDir)
        zero = "0"
        up = stats.uptime()
        table = JavaMap(
            {
                "msgPutTotalTodayNow": str(puts),
                "msgPutTotalTodayMorning": str(puts_today),
                "msgPutTotalYesterdayMorning": str(puts_yesterday),
                "msgGetTotalTodayNow": str(gets),
                "msgGetTotalTodayMorning": str(gets_today),
                "msgGetTotalYesterdayMorning": str(gets_yesterday),
                "bootTimestamp": str(stats.boot_ms),
                "runtime": stats.runtime(),
                "brokerVersion": str(CURRENT_VERSION),
                "brokerVersionDesc": VERSION_DESC,
                "putTps": stats.broker_puts.rates(up),
                "getMissTps": stats.gets_missed.rates(up),
                "getTransferedTps": stats.gets_transferred.rates(up),
                # 5.x's spelling of the same figure (its mqadmin exportMetrics reads this one)
                "getTransferredTps": stats.gets_transferred.rates(up),
                "getTotalTps": stats.get_total_rates(up),
                "getFoundTps": stats.gets_found.rates(up),
                "putMessageTimesTotal": str(puts),
                "putMessageSizeTotal": str(size_total),
                "putMessageAverageSize": str(size_total / puts if puts else 0.0),
                "putMessageFailedTimes": str(times.put_failed),
                "putMessageEntireTimeMax": str(times.put_max),
                "getMessageEntireTimeMax": str(times.get_max),
                "putMessageDistributeTime": times.distribution(now_ms),
                "putLatency99": times.latency_percentile(0.99, now_ms),
                "putLatency999": times.latency_percentile(0.999, now_ms),
                "commitLogMinOffset": str(store.min_phy_offset),
                "commitLogMaxOffset": str(store.max_phy_offset),
                "commitLogDiskRatio": ratio,
                f"commitLogDiskRatio_{cfg.storePathRootDir}/commitlog": ratio,
                "consumeQueueDiskRatio": ratio,
                "commitLogDirCapacity": self._capacity(cfg.storePathRootDir),
                "dispatchMaxBuffer": zero,
                "dispatchBehindBytes": zero,
                "pageCacheLockTimeMills": zero,
                "remainHowManyDataToFlush": "0 B",
                "remainTransientStoreBufferNumbs": "2147483647",
                "earliestMessageTimeStamp": str(self._earliest_message_time()),
                "startAcceptSendRequestTimeStamp": zero,
                "sendThreadPoolQueueSize": zero,
                "sendThreadPoolQueueCapacity": capacity("sendThreadPoolQueueCapacity", "10000"),
                "sendThreadPoolQueueHeadWaitTimeMills": zero,
                "pullThreadPoolQueueSize": zero,
                "pullThreadPoolQueueCapacity": capacity("pullThreadPoolQueueCapacity", "100000"),
                "pullThreadPoolQueueHeadWaitTimeMills": zero,
                "queryThreadPoolQueueSize": zero,
                "queryThreadPoolQueueCapacity": capacity("queryThreadPoolQueueCapacity", "20000"),
                "queryThreadPoolQueueHeadWaitTimeMills": zero,
                "EndTransactionQueueSize": zero,
                "EndTransactionThreadPoolQueueCapacity": capacity("endTransactionPoolQueueCapacity", "100000"),
                # 5.x's keys: its mqadmin clusterList prints #ACTIVATED from brokerActive (a master runs the
                # schedule and transaction-check services; a slave outside controller mode does not)
                "brokerActive": "false" if cfg.brokerRole == "SLAVE" else "true",
                "litePullThreadPoolQueueSize": zero,
                "litePullThreadPoolQueueCapacity": capacity("litePullThreadPoolQueueCapacity", "100000"),
                "litePullThreadPoolQueueHeadWaitTimeMills": zero,
                "ackThreadPoolQueueSize": zero,
                "ackThreadPoolQueueCapacity": capacity("ackThreadPoolQueueCapacity", "100000"),
                "ackThreadPoolQueueHeadWaitTimeMills": zero,
            }
        )
        for level, delivered in sorted(self.ctx.schedule.offsets.items()):
            top = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            table[f"scheduleMessageOffset_{level}"] = f"{delivered},{top}"
        timer = self.ctx.timer
        if timer is not None and timer.cfg.timerWheelEnable and timer.files is not None:
            table.update(timer.runtime_figures())  # 5.x's timer keys
        return table

    def _pool_capacity(self, key: str, default: str) -> str:
        """A pool's queue capacity as broker.conf set it (Java reports its setting), else Java's default."""
        value = self.ctx.config.properties.get(key, "").strip()
        return value if value.isdigit() else default

    def _earliest_message_time(self) -> int:
        """Java reads 2 x maxMessageSize bytes at the min offset and answers -1 when its file holds fewer."""
        store = self.ctx.store
        if store.max_phy_offset <= store.min_phy_offset:
            return -1
        file_size = store.config.mapped_file_size_commit_log
        file_start = store.min_phy_offset - store.min_phy_offset % file_size
        written = min(store.max_phy_offset, file_start + file_size) - file_start
        if store.min_phy_offset % file_size + 2 * store.config.max_message_size > written:
            return -1
        raw = store.look_message_by_offset(store.min_phy_offset)
        try:
            return decode_record(raw).store_timestamp if raw else -1
        except RecordError:
            return -1

    @staticmethod
    def _disk_ratio(path: str) -> str:
        try:
            usage = shutil.disk_usage(path)
        except OSError:
            return "-1"
        return str(round(usage.used / usage.total, 2)) if usage.total else "-1"

    @staticmethod
    def _capacity(path: str) -> str:
        try:
            usage = shutil.disk_usage(path)
        except OSError:
            return ""
        return f"Total : {_human_bytes(usage.total)}, Free : {_human_bytes(usage.free)}."

    def view_stats(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = ViewBrokerStatsDataRequestHeader.from_command(request)
        item = self.stats.item(header.statsName, header.statsKey, self.ctx.config.brokerClusterName)
        if item is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The stats <{header.statsName}> <{header.statsKey}> not exist"
            )
        body = {"statsDay": item.snapshot(1440), "statsHour": item.snapshot(60), "statsMinute": item.snapshot(1)}
        return ok(request, fastjson.dumps(body))


def _convert(kind: object, value: str) -> object:
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if name == "bool":
        return parse_bool(value)
    if name == "int":
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"For input string: \"{value}\"") from None
    return value
