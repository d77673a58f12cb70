"""Topic configs: ``config/topics.json``, the system topics, and auto-creation from TBW102."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from twisted.logger import Logger

from rmqtx.broker.jsonfiles import EntryCache, JsonConfigFile
from rmqtx.common.fastjson import RenderedHashMap, table_capacity
from rmqtx.common.topic_config import TopicConfig
from rmqtx.common.topics import (
    BENCHMARK_TOPIC,
    DEFAULT_TOPIC,
    DLQ_PREFIX,
    OFFSET_MOVED_EVENT,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
)

if TYPE_CHECKING:
    from twisted.internet import defer

    from rmqtx.broker.config import BrokerConfig

log = Logger(namespace="rmqtx.broker.topics")
#: Java's TopicConfigManager table: ``new ConcurrentHashMap<>(1024)``, 2048 buckets (grown at 3/4 full).
TOPIC_TABLE_CAPACITY = 2048

class DataVersion:
    """Counter + timestamp that tells NameServers whether the topic table changed."""

    def __init__(self, counter: int = 0, timestamp: int | None = None) -> None:
        self.counter = counter
        self.timestamp = timestamp if timestamp is not None else int(time.time() * 1000)

    def next(self) -> None:
        self.counter += 1
        self.timestamp = int(time.time() * 1000)

    def to_json(self) -> dict:
        return {"counter": self.counter, "timestamp": self.timestamp}


class TopicConfigManager:
    """All topics this broker serves, persisted to ``config/topics.json``."""

    def __init__(self, config: BrokerConfig, store_root: str) -> None:
        self.config = config
        self.file = JsonConfigFile(Path(store_root) / "config" / "topics.json")
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self._rendered = EntryCache(depth=1)  # topicConfigTable sits one level in
        self._wire = RenderedHashMap()  # the same entries, compact, for registrations and admin answers
        self._add_system_topics()

    def _system(self, name: str, queues: int, perm: int = PERM_READ | PERM_WRITE) -> None:
        self.table[name] = TopicConfig(name, queues, queues, perm)

    def _add_system_topics(self) -> None:
        cfg = self.config
        self._system(SELF_TEST_TOPIC, 1)
        if cfg.autoCreateTopicEnable:
            self._system(DEFAULT_TOPIC, cfg.defaultTopicQueueNums, PERM_INHERIT | PERM_READ | PERM_WRITE)
        self._system(BENCHMARK_TOPIC, 1024)
        if cfg.clusterTopicEnable:
            self._system(cfg.brokerClusterName, 16, PERM_INHERIT | PERM_READ | PERM_WRITE)
        if cfg.brokerTopicEnable:
            self._system(cfg.brokerName, 1, PERM_INHERIT | PERM_READ | PERM_WRITE)
        self._system(OFFSET_MOVED_EVENT, 1)
        self._system(SCHEDULE_TOPIC, 18)
        if cfg.traceTopicEnable:
            self._system(cfg.msgTraceTopicName, 1)
        self._system(f"{cfg.brokerClusterName}_REPLY_TOPIC", 1)

    def load(self) -> None:
        data = self.file.load()
        if not data:
            return
        for name, raw in (data.get("topicConfigTable") or {}).items():
            tc = self.table[name] = TopicConfig.from_json(raw)
            if name.startswith(DLQ_PREFIX) and tc.perm == PERM_WRITE:
                # earlier rmqtx made DLQs write-only, so nobody could consume them; Java makes them read+write
                tc.perm = PERM_READ | PERM_WRITE
                log.warn("{topic} was write-only (an rmqtx bug); it is now readable", topic=name)
        version = data.get("dataVersion") or {}
        self.data_version = DataVersion(int(version.get("counter", 0)), int(version.get("timestamp", 0)) or None)

    def to_json(self) -> dict:
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {name: tc.to_json() for name, tc in self.table.items()},
        }

    def wire_json(self) -> dict:
        """TopicConfigSerializeWrapper as Java's fastjson writes it: the table in its bucket order."""
        capacity = table_capacity(len(self.table), TOPIC_TABLE_CAPACITY)
        table = self._wire.render(self.table, TopicConfig.to_json, capacity)
        return {"dataVersion": self.data_version.to_json(), "topicConfigTable": table}

    def file_json(self) -> dict:
        """``to_json`` with each topic rendered once per change (what ``persist`` writes)."""
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": self._rendered.render(self.table, TopicConfig.to_json),
        }

    def persist(self) -> defer.Deferred[None]:
        """Write topics.json in a thread; changes in a burst share one write (rendered when it starts)."""
        return self.file.save_latest(self.file_json)

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def put(self, tc: TopicConfig) -> None:
        """Add or replace a topic (admin), bump the data version and persist."""
        self.table[tc.topicName] = tc
        self.data_version.next()
        self.persist()

    def put_all(self, tcs: list[TopicConfig]) -> None:
        """Add or replace several topics at once (UPDATE_AND_CREATE_TOPIC_LIST): one version bump, one write."""
        for tc in tcs:
            self.table[tc.topicName] = tc
        self.data_version.next()
        self.persist()

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self.data_version.next()
        self.persist()
        return True

    def create_in_send(self, topic: str, default_topic: str, client_queue_nums: int, sys_flag: int) -> TopicConfig | None:
        """Auto-create ``topic`` from its default topic, as a send to a new topic does."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        if not self.config.autoCreateTopicEnable:
            return None
        template = self.table.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        queues = max(1, min(client_queue_nums, template.writeQueueNums))
        tc = TopicConfig(topic, queues, queues, template.perm & ~PERM_INHERIT, topicSysFlag=sys_flag)
        self.put(tc)
        return tc

    def create_system_topic(self, topic: str, queues: int, perm: int, sys_flag: int = 0) -> tuple[TopicConfig, bool]:
        """Find or create a broker-made topic (retry, DLQ, half topics); True when new."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing, False
        tc = TopicConfig(topic, queues, queues, perm, topicSysFlag=sys_flag)
        self.put(tc)
        return tc, True
