"""Route tables as RocketMQ's RouteInfoManager keeps them, and the bodies built from them.

Tables are plain dicts in insertion order; bodies are written in Java's HashMap order with the
capacities the Java NameServer gives its maps, so they match the Java NameServer byte for byte.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from twisted.logger import Logger

from rmqtx.common import fastjson
from rmqtx.common.fastjson import JavaMap, JavaSet, java_order, table_capacity
from rmqtx.common.topic_config import TopicConfig
from rmqtx.common.topics import FLAG_UNIT, FLAG_UNIT_SUB, PERM_READ, PERM_WRITE
from rmqtx.namesrv.register_body import DataVersion

log = Logger(namespace="rmqtx.namesrv.route")

MASTER_ID = 0

# Initial capacities of RouteInfoManager's tables in Java (they decide HashMap iteration order).
_TOPIC_TABLE_CAPACITY = 1024
_BROKER_TABLE_CAPACITY = 128
_CLUSTER_TABLE_CAPACITY = 32


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    def to_bean(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_bean(self) -> dict[str, Any]:
        return {"brokerAddrs": JavaMap(self.broker_addrs), "brokerName": self.broker_name, "cluster": self.cluster}


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    conn: object | None
    ha_server_addr: str | None


@dataclass(slots=True)
class RegisterResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


class _Capacity:
    """Tracks a Java HashMap's table size: it doubles as the map grows and never shrinks."""

    __slots__ = ("capacity",)

    def __init__(self, initial: int) -> None:
        self.capacity = table_capacity(0, initial)

    def seen(self, size: int) -> int:
        if size > self.capacity * 3 // 4:
            self.capacity = table_capacity(size, self.capacity)
        return self.capacity


def _topic_list(topics: list[str], broker_addr: str | None = None) -> bytes:
    return fastjson.dumps({"brokerAddr": broker_addr, "topicList": JavaSet(topics)})


class RouteInfoManager:
    """Topic, broker, cluster and liveness tables; every method runs on the reactor thread."""

    def __init__(self, clock: Callable[[], float] | None = None, expired_ms: int = 120_000) -> None:
        self.clock = clock or time.time
        self.expired_ms = expired_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, dict[str, None]] = {}  # cluster -> ordered set of names
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        self._topic_cap = _Capacity(_TOPIC_TABLE_CAPACITY)
        self._broker_cap = _Capacity(_BROKER_TABLE_CAPACITY)
        self._cluster_cap = _Capacity(_CLUSTER_TABLE_CAPACITY)
        self._route_cache: dict[tuple[str, bool, str | None], bytes] = {}

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _routes_changed(self) -> None:
        self._route_cache.clear()

    # -- Java iteration orders -----------------------------------------------------------------
    def _topics_in_order(self) -> list[str]:
        return java_order(list(self.topic_queue_table), self._topic_cap.seen(len(self.topic_queue_table)))

    def _broker_names_in_order(self) -> list[str]:
        return java_order(list(self.broker_addr_table), self._broker_cap.seen(len(self.broker_addr_table)))

    def _clusters_in_order(self) -> list[str]:
        return java_order(list(self.cluster_addr_table), self._cluster_cap.seen(len(self.cluster_addr_table)))

    @staticmethod
    def _queue_datas_in_order(queue_map: dict[str, QueueData]) -> list[QueueData]:
        return [queue_map[name] for name in java_order(list(queue_map))]

    # -- registration ----------------------------------------------------------------------------
    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None,
        data_version: DataVersion,
        topic_configs: list[TopicConfig] | None,
        filter_server_list: list[str] | None,
        conn: object | None,
    ) -> RegisterResult:
        """Record a broker's (re)registration; topics are re-read only when its data changed."""
        result = RegisterResult()
        self.cluster_addr_table.setdefault(cluster_name, {})[broker_name] = None
        self._cluster_cap.seen(len(self.cluster_addr_table))

        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name)
            self.broker_addr_table[broker_name] = broker_data
            self._broker_cap.seen(len(self.broker_addr_table))
        addrs = broker_data.broker_addrs
        # A slave promoted to master: one address keeps only one id.
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]
            self._routes_changed()
        old_addr = addrs.get(broker_id)
        if old_addr != broker_addr:
            addrs[broker_id] = broker_addr
            self._routes_changed()
        register_first = register_first or old_addr is None

        if broker_id == MASTER_ID and topic_configs is not None:
            if register_first or self.is_broker_topic_config_changed(broker_addr, data_version):
                for topic_config in topic_configs:
                    self._create_and_update_queue_data(broker_name, topic_config)
                self._routes_changed()

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(self.now_ms(), data_version, conn, ha_server_addr)
        if previous is None:
            log.info("new broker registered, {addr} HAServer: {ha}", addr=broker_addr, ha=ha_server_addr)

        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self.filter_server_table.pop(broker_addr, None)
            self._routes_changed()

        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        queue_data = QueueData(broker_name, tc.readQueueNums, tc.writeQueueNums, tc.perm, tc.topicSysFlag)
        queue_map = self.topic_queue_table.get(tc.topicName)
        if queue_map is None:
            self.topic_queue_table[tc.topicName] = {broker_name: queue_data}
            self._topic_cap.seen(len(self.topic_queue_table))
            log.info("new topic registered, {topic} {qd}", topic=tc.topicName, qd=queue_data)
        else:
            old = queue_map.get(broker_name)
            queue_map[broker_name] = queue_data
            if old is not None and old != queue_data:
                log.info("topic changed, {topic} OLD: {old} NEW: {new}", topic=tc.topicName, old=old, new=queue_data)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion | None) -> bool:
        previous = self.query_broker_topic_config(broker_addr)
        return previous is None or previous != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(self, broker_addr: str) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = self.now_ms()

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> bool:
        """Forget one broker address; returns whether it was known at all."""
        known = self.broker_live_table.pop(broker_addr, None) is not None
        self.filter_server_table.pop(broker_addr, None)
        remove_name = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            known = broker_data.broker_addrs.pop(broker_id, None) is not None or known
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_name = True
        if remove_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.pop(broker_name, None)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topics_of(broker_name)
        self._routes_changed()
        log.info("unregisterBroker {addr} {name} {id}: {known}", addr=broker_addr, name=broker_name, id=broker_id,
                 known="OK" if known else "unknown")
        return known

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            queue_map = self.topic_queue_table[topic]
            queue_map.pop(broker_name, None)
            if not queue_map:
                del self.topic_queue_table[topic]
                log.info("topic {topic} has no broker left, removed", topic=topic)

    # -- liveness --------------------------------------------------------------------------------
    def scan_not_active_broker(self) -> list[object]:
        """Drop brokers silent for longer than the expiry; returns their connections to close."""
        deadline = self.now_ms() - self.expired_ms
        expired = [addr for addr, live in self.broker_live_table.items() if live.last_update_ms < deadline]
        conns = []
        for addr in expired:
            live = self.broker_live_table.pop(addr)
            log.warn("The broker channel expired, {addr} {ms}ms", addr=addr, ms=self.expired_ms)
            if live.conn is not None:
                conns.append(live.conn)
            self._destroy_broker_addr(addr)
        return conns

    def on_connection_closed(self, conn: object) -> None:
        """A connection closed: every broker that registered over it is gone."""
        found = [addr for addr, live in self.broker_live_table.items() if live.conn is conn]
        for addr in found:
            log.info("the broker's channel destroyed, {addr}, clean its data at once", addr=addr)
            self._destroy_broker_addr(addr)

    def _destroy_broker_addr(self, broker_addr: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        name_found = None
        remove_name = False
        for name in self._broker_names_in_order():
            broker_data = self.broker_addr_table[name]
            for broker_id in java_order(list(broker_data.broker_addrs)):
                if broker_data.broker_addrs[broker_id] == broker_addr:
                    name_found = name
                    del broker_data.broker_addrs[broker_id]
                    break
            if not broker_data.broker_addrs:
                remove_name = True
                del self.broker_addr_table[name]
            if name_found is not None:
                break
        if name_found is not None and remove_name:
            for cluster in self._clusters_in_order():
                names = self.cluster_addr_table[cluster]
                if name_found in names:
                    del names[name_found]
                    if not names:
                        del self.cluster_addr_table[cluster]
                    break
            self._remove_topics_of(name_found)
        self._routes_changed()

    # -- queries -----------------------------------------------------------------------------
    def pickup_topic_route(self, topic: str | None) -> dict[str, Any] | None:
        """TopicRouteData as a bean dict, or None when no broker serves ``topic``."""
        queue_map = self.topic_queue_table.get(topic) if topic is not None else None
        if queue_map is None:
            return None
        broker_datas = []
        filter_map: JavaMap = JavaMap()
        for name in java_order(list(queue_map)):
            broker_data = self.broker_addr_table.get(name)
            if broker_data is None:
                continue
            broker_datas.append(broker_data.to_bean())
            if self.filter_server_table:
                for addr in java_order(list(broker_data.broker_addrs)):
                    servers = self.filter_server_table.get(broker_data.broker_addrs[addr])
                    if servers is not None:
                        filter_map[broker_data.broker_addrs[addr]] = list(servers)
        if not broker_datas:
            return None
        return {
            "brokerDatas": broker_datas,
            "filterServerTable": filter_map,
            "queueDatas": [qd.to_bean() for qd in self._queue_datas_in_order(queue_map)],
        }

    def topic_route_body(self, topic: str | None, standard_json: bool, order_topic_conf: str | None = None) -> bytes | None:
        """The GET_ROUTEINFO_BY_TOPIC body as Java writes it, cached until the tables change.

        ``standard_json`` (clients >= 4.9.4) quotes the broker id keys and sorts maps.
        """
        key = (topic or "", standard_json, order_topic_conf)
        body = self._route_cache.get(key)
        if body is None:
            route = self.pickup_topic_route(topic)
            if route is None:
                return None
            route["orderTopicConf"] = order_topic_conf
            if standard_json:
                body = fastjson.dumps(route, browser_compatible=True, sort_maps=True)
            else:
                body = fastjson.dumps(route)
            self._route_cache[key] = body
        return body

    def cluster_info_body(self) -> bytes:
        brokers = JavaMap(capacity=self._broker_cap.seen(len(self.broker_addr_table)))
        for name, data in self.broker_addr_table.items():
            brokers[name] = data.to_bean()
        clusters = JavaMap(capacity=self._cluster_cap.seen(len(self.cluster_addr_table)))
        for cluster, names in self.cluster_addr_table.items():
            clusters[cluster] = JavaSet(names)
        return fastjson.dumps({"brokerAddrTable": brokers, "clusterAddrTable": clusters})

    def all_topic_list_body(self) -> bytes:
        return _topic_list(self._topics_in_order())

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Remove a topic everywhere, or only the queues of ``cluster_name``'s brokers."""
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
        else:
            names = self.cluster_addr_table.get(cluster_name)
            queue_map = self.topic_queue_table.get(topic)
            if names and queue_map is not None:
                for name in names:
                    queue_map.pop(name, None)
                if not queue_map:
                    del self.topic_queue_table[topic]
        self._routes_changed()

    def _operate_write_perm(self, broker_name: str, wipe: bool) -> int:
        count = 0
        for queue_map in self.topic_queue_table.values():
            qd = queue_map.get(broker_name)
            if qd is not None:
                qd.perm = qd.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
                count += 1
        self._routes_changed()
        return count

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, wipe=True)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, wipe=False)

    def system_topic_list_body(self) -> bytes:
        """Cluster and broker names (they double as system topics) and one broker address."""
        topics: list[str] = []
        for cluster in self._clusters_in_order():
            topics.append(cluster)
            topics.extend(java_order(list(self.cluster_addr_table[cluster])))
        broker_addr = None
        for name in self._broker_names_in_order():
            addrs = self.broker_addr_table[name].broker_addrs
            if addrs:
                broker_addr = addrs[java_order(list(addrs))[0]]
                break
        return _topic_list(topics, broker_addr)

    def topics_by_cluster_body(self, cluster: str) -> bytes:
        topics: list[str] = []
        names = self.cluster_addr_table.get(cluster)
        if names:
            ordered_topics = self._topics_in_order()
            for name in java_order(list(names)):
                topics.extend(t for t in ordered_topics if name in self.topic_queue_table[t])
        return _topic_list(topics)

    def _first_queue_datas(self) -> Iterator[tuple[str, QueueData]]:
        for topic in self._topics_in_order():
            queue_map = self.topic_queue_table[topic]
            if queue_map:
                yield topic, queue_map[java_order(list(queue_map))[0]]

    def unit_topics_body(self) -> bytes:
        return _topic_list([t for t, qd in self._first_queue_datas() if qd.topic_sys_flag & FLAG_UNIT])

    def has_unit_sub_topics_body(self) -> bytes:
        return _topic_list([t for t, qd in self._first_queue_datas() if qd.topic_sys_flag & FLAG_UNIT_SUB])

    def has_unit_sub_ununit_topics_body(self) -> bytes:
        return _topic_list(
            [t for t, qd in self._first_queue_datas() if qd.topic_sys_flag & FLAG_UNIT_SUB and not qd.topic_sys_flag & FLAG_UNIT]
        )
