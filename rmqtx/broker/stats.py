"""Broker counters: puts (from the store's arrival events) and gets (from the pull processor).

They feed what brokerStatus, clusterList and statsAll read: per-minute buckets kept for two days give
the minute/hour/day snapshots of VIEW_BROKER_STATS_DATA, the 10/60/600 s rates of the runtime info,
and the totals at the last two midnights (Java records those at each local midnight).
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Callable

KEEP_MINUTES = 2 * 1440
KEEP_SECONDS = 600
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
RATE_WINDOWS_S = (10, 60, 600)


class MinuteCounter:
    """Counts per minute for the last two days, and per second for the last 600 s (the rate windows)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.total = 0
        self._buckets: dict[int, int] = {}
        self._seconds: dict[int, int] = {}

    def add(self, n: int) -> None:
        now = self.clock()
        minute, second = int(now // 60), int(now)
        self._buckets[minute] = self._buckets.get(minute, 0) + n
        self._seconds[second] = self._seconds.get(second, 0) + n
        self.total += n
        if len(self._buckets) > KEEP_MINUTES:
            for old in [m for m in self._buckets if m <= minute - KEEP_MINUTES]:
                del self._buckets[old]
        if len(self._seconds) > 2 * KEEP_SECONDS:
            for old in [s for s in self._seconds if s <= second - KEEP_SECONDS]:
                del self._seconds[old]

    def sum_last(self, seconds: int) -> int:
        """Counts of the last ``seconds``: to the second within 600 s, to the minute beyond."""
        now = self.clock()
        if seconds <= KEEP_SECONDS:
            since_s = int(now) - seconds
            return sum(n for s, n in self._seconds.items() if s > since_s)
        since = int((now - seconds) // 60)
        return sum(n for m, n in self._buckets.items() if m > since)

    def total_at(self, when: float) -> int:
        """The running total as it stood at ``when`` (within the two days kept)."""
        return self.total - sum(n for m, n in self._buckets.items() if m >= when // 60)

    def rates(self) -> str:
        """Java's ``putTps``-style text: per-second rates over 10 s, 60 s and 600 s."""
        return " ".join(str(self.sum_last(s) / float(s)) for s in RATE_WINDOWS_S)

    def snapshot(self, minutes: int) -> dict:
        """A BrokerStatsItem bean over the last ``minutes``."""
        total = self.sum_last(minutes * 60)
        return {"avgpt": 0.0, "sum": total, "tps": total / (minutes * 60.0)}


class BrokerStats:
    """Put counts per topic, get counts per topic@group, broker totals, and the boot time."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.boot_ms = int(clock() * 1000)
        self.broker_puts = MinuteCounter(clock)
        self.topic_puts: dict[str, MinuteCounter] = defaultdict(self._counter)
        self.gets_found = MinuteCounter(clock)  # pulls that returned messages
        self.gets_missed = MinuteCounter(clock)  # pulls that returned none
        self.gets_transferred = MinuteCounter(clock)  # messages those pulls carried
        self.group_get_nums: dict[str, MinuteCounter] = defaultdict(self._counter)
        self.group_get_size: dict[str, MinuteCounter] = defaultdict(self._counter)
        self._last_max: dict[tuple[str, int], int] = {}

    def _counter(self) -> MinuteCounter:
        return MinuteCounter(self.clock)

    def on_arrival(self, topic: str, queue_id: int, new_max: int) -> None:
        """Store arrival listener: the queue grew to ``new_max``."""
        key = (topic, queue_id)
        grown = max(1, new_max - self._last_max.get(key, new_max - 1))
        self._last_max[key] = new_max
        self.broker_puts.add(grown)
        self.topic_puts[topic].add(grown)

    def on_get(self, topic: str, group: str, messages: int, size: int) -> None:
        """One pull answered from the store: ``messages`` records of ``size`` bytes (0 for a miss)."""
        if not messages:
            self.gets_missed.add(1)
            return
        self.gets_found.add(1)
        self.gets_transferred.add(messages)
        key = f"{topic}@{group}"
        self.group_get_nums[key].add(messages)
        self.group_get_size[key].add(size)

    def item(self, name: str, key: str, cluster: str) -> MinuteCounter | None:
        """The counter VIEW_BROKER_STATS_DATA asks for, or None when rmqtx keeps no such item."""
        if name == TOPIC_PUT_NUMS:
            return self.topic_puts.get(key)
        if name == GROUP_GET_NUMS:
            return self.group_get_nums.get(key)
        if name == GROUP_GET_SIZE:
            return self.group_get_size.get(key)
        if name == BROKER_PUT_NUMS and key == cluster:
            return self.broker_puts
        if name == BROKER_GET_NUMS and key == cluster:
            return self.gets_transferred
        return None

    def get_total_rates(self) -> str:
        """``getTotalTps``: found plus missed pulls per second over 10 s, 60 s and 600 s."""
        return " ".join(str((self.gets_found.sum_last(s) + self.gets_missed.sum_last(s)) / float(s)) for s in RATE_WINDOWS_S)

    def mornings(self, counter: MinuteCounter) -> tuple[int, int]:
        """Totals at today's and yesterday's local midnight; 0 for a midnight before boot, as in Java."""
        boot = self.boot_ms / 1000
        today = datetime.fromtimestamp(self.clock()).replace(hour=0, minute=0, second=0, microsecond=0)
        marks = [today.timestamp(), (today - timedelta(days=1)).timestamp()]
        today_total, yesterday_total = (counter.total_at(t) if t > boot else 0 for t in marks)
        return today_total, yesterday_total

    def runtime(self) -> str:
        secs = int(self.clock() - self.boot_ms / 1000)
        return f"[ {secs // 86400} days, {secs % 86400 // 3600} hours, {secs % 3600 // 60} minutes, {secs % 60} seconds ]"
