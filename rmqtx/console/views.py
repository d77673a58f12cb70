"""Read-only console views over the broker's in-process state: broker, topics, groups, DLQ pages."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from twisted.internet import defer, threads

from rmqtx.broker.processors.admin_bodies import connection_json, is_system_topic
from rmqtx.common import fastjson
from rmqtx.common.topics import DLQ_PREFIX, RETRY_PREFIX
from rmqtx.console.local import local_call
from rmqtx.console.messages import MAX_RESULTS, by_queue_offset
from rmqtx.remoting.codes import RequestCode

#: Rates shown as TPS are per second over the last minute (rocketmq-exporter reads the minute too).
TPS_WINDOW_S = 60
#: The store's size on disk is walked off the reactor at most this often.
DISK_WALK_EVERY_S = 10.0


def _tps(counter: Any) -> float:
    return round(counter.sum_last(TPS_WINDOW_S) / TPS_WINDOW_S, 3) if counter is not None else 0.0


def store_bytes_on_disk(root: str) -> int:
    """Bytes the store's files really take (allocated blocks, so sparse files count what they hold)."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                st = os.stat(os.path.join(folder, name))
            except OSError:
                continue
            total += getattr(st, "st_blocks", 0) * 512 or st.st_size
    return total


class ConsoleViews:
    """Builds the JSON the console's pages read; everything but the disk walk runs on the reactor."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker  # the BrokerService: config, ctx, dispatcher, NameServer client
        self._disk: tuple[float, int] = (0.0, -1)
        self._walking: defer.Deferred | None = None

    @property
    def ctx(self) -> Any:
        return self.broker.ctx

    # -- broker -------------------------------------------------------------------------------
    async def runtime_table(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table, from the broker's own handler."""
        response = await local_call(self.broker.dispatcher, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict((fastjson.loads(response.body) if response.body else {}).get("table") or {})

    def store_size(self) -> int:
        """The last walked size; starts a new walk in a thread when it is old."""
        at, size = self._disk
        if self._walking is None and time.monotonic() - at > DISK_WALK_EVERY_S:
            d = self._walking = threads.deferToThread(store_bytes_on_disk, self.broker.config.storePathRootDir)

            def walked(result: int) -> None:
                self._disk = (time.monotonic(), result)

            d.addCallback(walked)
            d.addErrback(lambda _f: None)
            d.addBoth(lambda _r: setattr(self, "_walking", None))
        return size

    async def broker_view(self) -> dict[str, Any]:
        cfg, ctx = self.broker.config, self.ctx
        runtime = await self.runtime_table()
        stats = ctx.stats
        try:
            usage = shutil.disk_usage(cfg.storePathRootDir)
            disk = {"total": usage.total, "used": usage.used, "free": usage.free,
                    "ratio": round(usage.used / usage.total, 4) if usage.total else -1}
        except OSError:
            disk = {"total": -1, "used": -1, "free": -1, "ratio": -1}
        disk["storeBytes"] = self.store_size()
        disk["storePath"] = cfg.storePathRootDir
        consumers = sum(len(info.channels) for info in ctx.clients.consumers.values())
        producers = sum(len(members) for members in ctx.clients.producers.values())
        return {
            "cluster": cfg.brokerClusterName,
            "brokerName": cfg.brokerName,
            "brokerId": cfg.brokerId,
            "role": cfg.brokerRole,
            "address": cfg.broker_addr,
            "haAddress": cfg.ha_server_addr,
            "namesrvAddr": cfg.namesrvAddr,
            "version": runtime.get("brokerVersionDesc", ""),
            "bootTimestamp": stats.boot_ms,
            "runtime": runtime.get("runtime", ""),
            "putTps": _tps(stats.broker_puts),
            "getTps": _tps(stats.gets_transferred),
            "putTotal": stats.broker_puts.total,
            "getTotal": stats.gets_transferred.total,
            "commitLogMinOffset": ctx.store.min_phy_offset,
            "commitLogMaxOffset": ctx.store.max_phy_offset,
            "disk": disk,
            "topics": len(ctx.topics.table),
            "groups": len(self.group_names()),
            "consumersOnline": consumers,
            "producersOnline": producers,
            "aclEnable": cfg.aclEnable,
            "runtimeInfo": runtime,
        }

    async def cluster_view(self) -> dict[str, Any]:
        """This broker in full, and every broker the NameServer lists (address and role) for the cluster page."""
        me = await self.broker_view()
        brokers: list[dict[str, Any]] = []
        error = ""
        if self.broker.config.namesrv_addrs:
            from rmqtx.tools.ops import AdminError, AdminOps

            ops = AdminOps(self.broker.config.namesrv_addrs, client=self.broker.namesrv_client, timeout=3.0)
            try:
                info = await ops.cluster_info()
            except AdminError as exc:
                info, error = {}, str(exc)
            for cluster, names in sorted((info.get("clusterAddrTable") or {}).items()):
                for name in sorted(names):
                    addrs = ((info.get("brokerAddrTable") or {}).get(name) or {}).get("brokerAddrs") or {}
                    for broker_id, addr in sorted((int(k), v) for k, v in addrs.items()):
                        brokers.append({"cluster": cluster, "brokerName": name, "brokerId": broker_id, "address": addr,
                                        "role": "MASTER" if broker_id == 0 else "SLAVE", "self": addr == me["address"]})
        if not any(b["self"] for b in brokers):
            brokers.insert(0, {"cluster": me["cluster"], "brokerName": me["brokerName"], "brokerId": me["brokerId"],
                               "address": me["address"], "role": me["role"], "self": True})
        return {"broker": me, "brokers": brokers, "namesrvError": error}

    # -- topics -------------------------------------------------------------------------------
    def _queues(self, topic: str, count: int) -> list[dict[str, Any]]:
        store = self.ctx.store
        out = []
        for qid in range(count):
            low = max(0, store.get_min_offset_in_queue(topic, qid))
            high = max(0, store.get_max_offset_in_queue(topic, qid))
            last = store.get_message_store_timestamp(topic, qid, high - 1) if high > 0 else 0
            out.append({"queueId": qid, "minOffset": low, "maxOffset": high, "lastUpdateTimestamp": max(0, last)})
        return out

    def topic_view(self, name: str) -> dict[str, Any] | None:
        ctx = self.ctx
        tc = ctx.topics.get(name)
        if tc is None:
            return None
        queues = self._queues(name, max(tc.readQueueNums, tc.writeQueueNums))
        return {
            "topic": name,
            "readQueueNums": tc.readQueueNums,
            "writeQueueNums": tc.writeQueueNums,
            "perm": tc.perm,
            "order": tc.order,
            "system": is_system_topic(name, self.broker.config) or name.startswith((RETRY_PREFIX, DLQ_PREFIX)),
            "kind": "retry" if name.startswith(RETRY_PREFIX) else "dlq" if name.startswith(DLQ_PREFIX) else "normal",
            "tps": _tps(ctx.stats.topic_puts.get(name)),
            "messages": sum(q["maxOffset"] - q["minOffset"] for q in queues),
            "minOffset": min((q["minOffset"] for q in queues), default=0),
            "maxOffset": sum(q["maxOffset"] for q in queues),
            "queues": queues,
            "groups": sorted(self.groups_of_topic(name)),
        }

    def topics_view(self) -> dict[str, Any]:
        return {"topics": [self.topic_view(name) for name in sorted(self.ctx.topics.table)]}

    # -- groups -------------------------------------------------------------------------------
    def group_names(self) -> set[str]:
        ctx = self.ctx
        names = set(ctx.groups.table) | set(ctx.clients.consumers)
        names |= {key.split("@", 1)[1] for key in ctx.offsets.table if "@" in key}
        return names

    def groups_of_topic(self, topic: str) -> set[str]:
        ctx = self.ctx
        groups = {g for g, info in ctx.clients.consumers.items() if topic in info.subscriptions}
        return groups | ctx.offsets.groups_of_topic(topic)

    def _group_topics(self, group: str) -> list[str]:
        info = self.ctx.clients.consumer_group(group)
        topics = set(self.ctx.offsets.topics_of_group(group))
        if info is not None:
            topics |= set(info.subscriptions)
        return sorted(t for t in topics if self.ctx.topics.get(t) is not None)

    def lag_rows(self, group: str) -> list[dict[str, Any]]:
        """Per-queue broker offset, committed offset, lag, and how old the first unconsumed message is."""
        ctx, store, now = self.ctx, self.ctx.store, int(time.time() * 1000)
        rows = []
        for topic in self._group_topics(group):
            tc = ctx.topics.get(topic)
            for qid in range(tc.readQueueNums):
                broker_offset = max(0, store.get_max_offset_in_queue(topic, qid))
                committed = ctx.offsets.query(group, topic, qid)
                consumer_offset = max(0, committed)
                lag = max(0, broker_offset - consumer_offset)
                latency = 0
                if lag > 0:
                    first = max(consumer_offset, store.get_min_offset_in_queue(topic, qid))
                    stored = store.get_message_store_timestamp(topic, qid, first) if first < broker_offset else 0
                    latency = max(0, now - stored) if stored > 0 else 0
                last = store.get_message_store_timestamp(topic, qid, consumer_offset - 1) if consumer_offset > 0 else 0
                rows.append({"topic": topic, "queueId": qid, "brokerOffset": broker_offset, "consumerOffset": consumer_offset,
                             "committed": committed >= 0, "lag": lag, "lastTimestamp": max(0, last), "latencyMs": latency})
        return rows

    def group_view(self, group: str) -> dict[str, Any]:
        ctx = self.ctx
        info = ctx.clients.consumer_group(group)
        connections = [connection_json(c) for c in info.channels.values()] if info is not None else []
        rows = self.lag_rows(group)
        tps = sum(_tps(counter) for key, counter in ctx.stats.group_get_nums.items() if key.endswith("@" + group))
        config = ctx.groups.table.get(group)
        return {
            "group": group,
            "online": bool(connections),
            "consumeType": info.consume_type if info else "",
            "messageModel": info.message_model if info else "",
            "consumeFromWhere": info.consume_from_where if info else "",
            "subscriptions": {t: s.broker_json() for t, s in info.subscriptions.items()} if info else {},
            "connections": connections,
            "versions": sorted({str(c["version"]) for c in connections}),
            "lag": sum(r["lag"] for r in rows),
            "tps": round(tps, 3),
            "queues": rows,
            "config": config.to_json() if config is not None else None,
            "dlqTopic": DLQ_PREFIX + group if ctx.topics.get(DLQ_PREFIX + group) is not None else "",
        }

    def groups_view(self) -> dict[str, Any]:
        out = []
        for group in sorted(self.group_names()):
            view = self.group_view(group)
            view.pop("queues")
            out.append(view)
        return {"groups": out}

    # -- DLQ ----------------------------------------------------------------------------------
    def dlq_view(self, group: str, start: int | None = None) -> dict[str, Any]:
        """A page of a group's dead letters, newest last, from ``start`` (default: the newest page)."""
        topic = DLQ_PREFIX + group
        store = self.ctx.store
        tc = self.ctx.topics.get(topic)
        pages = []
        for qid in range(tc.readQueueNums if tc is not None else 0):
            low = max(0, store.get_min_offset_in_queue(topic, qid))
            high = max(0, store.get_max_offset_in_queue(topic, qid))
            first = max(low, high - MAX_RESULTS) if start is None else max(low, start)
            pages.append({"queueId": qid, "minOffset": low, "maxOffset": high,
                          "messages": by_queue_offset(store, topic, qid, first, MAX_RESULTS) if high > first else []})
        return {"group": group, "topic": topic, "exists": tc is not None, "queues": pages}

    def dlq_groups(self) -> list[str]:
        return sorted(t[len(DLQ_PREFIX):] for t in self.ctx.topics.table if t.startswith(DLQ_PREFIX))
