"""Put counters fed by the store's arrival events: what brokerStatus, clusterList and statsAll read.

rmqtx sees every stored message through the arrival listener, so it counts puts per topic and in
total, in one-minute buckets kept for a day (Java's StatsItem minute/hour/day snapshots).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Callable

DAY_MINUTES = 1440
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"


class MinuteCounter:
    """Counts per minute for the last day; sums and rates over the last N seconds."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.total = 0
        self._buckets: dict[int, int] = {}

    def add(self, n: int) -> None:
        minute = int(self.clock() // 60)
        self._buckets[minute] = self._buckets.get(minute, 0) + n
        self.total += n
        if len(self._buckets) > DAY_MINUTES:
            for old in [m for m in self._buckets if m <= minute - DAY_MINUTES]:
                del self._buckets[old]

    def sum_last(self, seconds: int) -> int:
        now = self.clock()
        since = int((now - seconds) // 60)
        return sum(n for m, n in self._buckets.items() if m > since)

    def snapshot(self, minutes: int) -> dict:
        """A BrokerStatsItem bean over the last ``minutes``."""
        total = self.sum_last(minutes * 60)
        return {"avgpt": 0.0, "sum": total, "tps": total / (minutes * 60.0)}


class BrokerStats:
    """Put counts per topic and for the whole broker, plus when the broker started."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.boot_ms = int(clock() * 1000)
        self.broker = MinuteCounter(clock)
        self.topics: dict[str, MinuteCounter] = defaultdict(lambda: MinuteCounter(clock))
        self._last_max: dict[tuple[str, int], int] = {}

    def on_arrival(self, topic: str, queue_id: int, new_max: int) -> None:
        """Store arrival listener: the queue grew to ``new_max``."""
        key = (topic, queue_id)
        grown = max(1, new_max - self._last_max.get(key, new_max - 1))
        self._last_max[key] = new_max
        self.broker.add(grown)
        self.topics[topic].add(grown)

    def item(self, name: str, key: str, cluster: str) -> MinuteCounter | None:
        """The counter VIEW_BROKER_STATS_DATA asks for, or None when rmqtx keeps no such item."""
        if name == TOPIC_PUT_NUMS:
            return self.topics.get(key)
        if name == BROKER_PUT_NUMS and key == cluster:
            return self.broker
        return None

    def put_tps(self) -> str:
        """Java's ``putTps``: rates over 10 s, 60 s and 600 s."""
        return " ".join(str(self.broker.sum_last(s) / float(s)) for s in (10, 60, 600))

    def runtime(self) -> str:
        secs = int(self.clock() - self.boot_ms / 1000)
        return f"[ {secs // 86400} days, {secs % 86400 // 3600} hours, {secs % 3600 // 60} minutes, {secs % 60} seconds ]"
