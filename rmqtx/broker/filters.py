"""ConsumerFilterManager: SQL92 groups' expressions and bloom bits, for the dispatch bit map and the pull shortcut.

As RocketMQ's ConsumerFilterManager, CommitLogDispatcherCalcBitMap and ExpressionMessageFilter's consume
queue check: every dispatched message gets a bit map of the groups whose expression matched it, and a
pull skips a unit whose map lacks the puller's bits without reading or evaluating the message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from twisted.logger import Logger

from rmqtx.common.subscription import SubscriptionData
from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.jsonfiles import JsonConfigFile
from rmqtx.filter import (BloomFilter, BloomFilterData, CompiledExpression, FilterSyntaxError, calc_bitmap,
                          compile_cached, consumer_bloom_key)
from rmqtx.store.consume_queue_ext import ExtUnit
from rmqtx.store.message_filter import MessageFilter

if TYPE_CHECKING:
    from twisted.internet import defer

log = Logger(namespace="rmqtx.broker.filters")


@dataclass
class ConsumerFilterData:
    """One group's filter on one topic; born_time tells which stored bit maps already include it."""

    group: str
    topic: str
    expression: str
    expression_type: str
    client_version: int
    compiled: CompiledExpression
    bloom_data: BloomFilterData
    born_time: int
    dead_time: int = 0

    @property
    def dead(self) -> bool:
        return self.dead_time >= self.born_time

    def to_json(self) -> dict[str, Any]:
        """Java's ConsumerFilterData bean, properties in fastjson's (alphabetical) order."""
        return {
            "bloomFilterData": {"bitNum": self.bloom_data.bit_num, "bitPos": list(self.bloom_data.bit_pos)},
            "bornTime": self.born_time,
            "clientVersion": self.client_version,
            "consumerGroup": self.group,
            "dead": self.dead,
            "deadTime": self.dead_time,
            "expression": self.expression,
            "expressionType": self.expression_type,
            "topic": self.topic,
        }


class ConsumerFilterManager:
    """Filters by topic and group, from heartbeats; dead ones are dropped after filterDataCleanTimeSpan."""

    def __init__(self, config: BrokerConfig, group_alive: Callable[[str], bool],
                 clock: Callable[[], float] = time.time) -> None:
        self.enabled = config.enableCalcFilterBitMap
        self.bloom = BloomFilter(config.maxErrorRateOfBloomFilter, config.expectConsumerNumUseFilter)
        self.clean_span_ms = config.filterDataCleanTimeSpan
        self._group_alive = group_alive
        self._clock = clock
        self._by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self._calc_lists: dict[str, tuple[tuple[str, CompiledExpression, BloomFilterData], ...]] = {}
        self.evaluations = 0  # messages whose expression a pull evaluated
        self.skipped = 0  # consume queue units a pull's bit map check ruled out
        self.file = JsonConfigFile(Path(config.storePathRootDir) / "config" / "consumerFilter.json")
        self._saved: dict | None = None

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        return self._by_topic.get(topic, {}).get(group)

    # ---- registration -------------------------------------------------------------------------

    def register(self, group: str, subscriptions: Iterable[SubscriptionData]) -> None:
        """A heartbeat's subscriptions: SQL92 ones (re)registered, the group's other topics marked dead."""
        now = self._now()
        topics = set()
        for sub in subscriptions:
            topics.add(sub.topic)
            if not sub.is_tag and sub.sub_string:
                self._register(sub, group, now)
        for table in self._by_topic.values():
            data = table.get(group)
            if data is not None and data.topic not in topics and not data.dead:
                data.dead_time = now
        self.clean(now)

    def _register(self, sub: SubscriptionData, group: str, now: int) -> None:
        table = self._by_topic.setdefault(sub.topic, {})
        old = table.get(group)
        if old is not None and sub.sub_version <= old.client_version:
            if sub.sub_version == old.client_version and old.dead:
                old.dead_time = 0
            return
        bloom_data = self.bloom.generate(consumer_bloom_key(group, sub.topic))
        if old is not None and (old.expression, old.expression_type, old.bloom_data) == (
                sub.sub_string, sub.expression_type, bloom_data):
            old.client_version = sub.sub_version
            old.dead_time = 0
            return
        try:
            compiled = compile_cached(sub.sub_string)
        except FilterSyntaxError as exc:
            log.warn("filter of {group} on {topic} does not compile: {exc}", group=group, topic=sub.topic, exc=exc)
            table.pop(group, None)
        else:
            table[group] = ConsumerFilterData(group, sub.topic, sub.sub_string, sub.expression_type, sub.sub_version,
                                              compiled, bloom_data, now)
        self._changed(sub.topic)

    def clean(self, now: int) -> None:
        """Mark filters of groups without consumers dead; forget those dead longer than the clean span."""
        for topic, table in list(self._by_topic.items()):
            for group, data in list(table.items()):
                if not data.dead and not self._group_alive(group):
                    data.dead_time = now
                if data.dead and now - data.dead_time >= self.clean_span_ms:
                    del table[group]
                    self._changed(topic)
            if not table:
                del self._by_topic[topic]
                self._calc_lists.pop(topic, None)

    def _changed(self, topic: str) -> None:
        table = self._by_topic.get(topic, {})
        self._calc_lists[topic] = tuple((g, d.compiled, d.bloom_data) for g, d in table.items())

    # ---- config/consumerFilter.json -----------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The file's content, long-dead filters dropped first (as Java's encode does)."""
        self.clean(self._now())
        return {"filterDataByTopic": {
            topic: {"groupFilterData": {group: data.to_json() for group, data in table.items()}, "topic": topic}
            for topic, table in self._by_topic.items()
        }}

    def load(self) -> None:
        """Filters saved before a restart, all taken as dead until their group's heartbeat revives them.

        A revived filter keeps its born time, so the bit maps stored since then stay trusted. If the
        bloom filter's size changed in the config, nothing saved is usable and all of it is dropped.
        """
        data = self.file.load() or {}
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        now = self._now()
        try:
            entries = [(topic, group, raw) for topic, by_topic in (data.get("filterDataByTopic") or {}).items()
                       for group, raw in ((by_topic or {}).get("groupFilterData") or {}).items()]
        except AttributeError:  # not the objects Java writes: nothing here to trust
            log.warn("{path} is not a consumer filter table: ignored", path=self.file.path)
            entries = []
        for topic, group, raw in entries:
            try:
                bloom = raw.get("bloomFilterData") or {}
                bloom_data = BloomFilterData(tuple(int(p) for p in bloom.get("bitPos") or ()), int(bloom.get("bitNum", 0)))
                if not self.bloom.is_valid(bloom_data):
                    log.info("bloom filter settings changed: ignoring {path}", path=self.file.path)
                    return
                born, dead = int(raw.get("bornTime", 0)), int(raw.get("deadTime", 0))
                loaded.setdefault(topic, {})[group] = ConsumerFilterData(
                    group, topic, raw["expression"], str(raw.get("expressionType", "SQL92")),
                    int(raw.get("clientVersion", 0)), compile_cached(raw["expression"]), bloom_data, born,
                    dead or max(now - 30_000, born))
            except (AttributeError, KeyError, TypeError, ValueError, FilterSyntaxError) as exc:
                log.warn("saved filter of {group} on {topic} skipped: {exc!r}", group=group, topic=topic, exc=exc)
        self._by_topic = loaded
        for topic in loaded:
            self._changed(topic)

    def persist(self) -> defer.Deferred[None] | None:
        """Write the file in a thread when its content changed since the last write (the 10 s timer)."""
        content = self.to_json()
        if content == self._saved:
            return None
        self._saved = content
        return self.file.save(content)

    def persist_now(self) -> None:
        self._saved = self.to_json()
        self.file.save_now(self._saved)

    # ---- dispatch and pull --------------------------------------------------------------------

    def calc_bitmap(self, topic: str, properties: dict[str, str]) -> bytes | None:
        """The store's bit map calculator: the groups of topic whose expression matches the message."""
        filters = self._calc_lists.get(topic)
        return calc_bitmap(properties, filters, self.bloom) if filters else None

    def cq_filter(self, topic: str, group: str, expression: str) -> "BitmapFilter | None":
        """The consume queue check for a pull of group by its registered expression; None when bits cannot help."""
        data = self.get(topic, group)
        if not self.enabled or data is None or data.expression != expression or not self.bloom.is_valid(data.bloom_data):
            return None
        checks = tuple((pos >> 3, 1 << (pos & 7)) for pos in data.bloom_data.bit_pos)  # is_hit, unrolled: hot path
        return BitmapFilter(self, data.born_time, data.bloom_data.bit_num // 8, checks)


class BitmapFilter(MessageFilter):
    """A registered SQL92 group's unit check: the bits of its expression must all be set in the unit's
    filter bit map (Java's ExpressionMessageFilter.isMatchedByConsumeQueue); the broker evaluates the
    expression on what passes."""

    __slots__ = ("manager", "born", "size", "checks")
    by_tags_only = False

    def __init__(self, manager: "ConsumerFilterManager", born: int, size: int,
                 checks: tuple[tuple[int, int], ...]) -> None:
        super().__init__(None)
        self.manager = manager  # counts the units skipped
        self.born = born
        self.size = size
        self.checks = checks

    def matches_unit(self, tags_code: int | None, ext: ExtUnit | None) -> bool:
        if ext is None or ext.store_time <= self.born or ext.bitmap is None or len(ext.bitmap) != self.size:
            return True  # no usable map, or one computed before this filter was born: evaluate
        bitmap = ext.bitmap
        for byte, mask in self.checks:
            if not bitmap[byte] & mask:
                self.manager.skipped += 1
                return False
        return True
