"""Broker counters: puts (from the store's arrival events) and gets (from the pull processor).

They feed what brokerStatus, clusterList and statsAll read: the minute/hour/day snapshots of
VIEW_BROKER_STATS_DATA, the 10/60/600 s rates of the runtime info, and the totals at the last two
local midnights. Like Java's StatsItem, each counter keeps a bounded number of buckets: per minute
for the last hour and per hour for the last day, plus per second for the last 600 s where rates are
wanted or per ten seconds otherwise (Java samples its minute figures every 10 s), so thousands of
topic@group items stay small and a minute's window slides instead of restarting at each minute.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import defaultdict
from datetime import date, datetime
from typing import Callable

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
RATE_WINDOWS_S = (10, 60, 600)
KEEP_SECONDS = 600
TEN_S = 10
KEEP_MINUTES = 60
KEEP_HOURS = 25
#: Upper bounds (bytes) of Apache 5.x's rocketmq_message_size histogram buckets (1K, 4K, 512K, 1M, 2M, 4M).
MESSAGE_SIZE_BOUNDS = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
#: Upper bounds (seconds) of Apache 5.x's rocketmq_finish_message_latency buckets (5 s, 1 min, 10 min, 1 h, 12 h, 24 h).
FINISH_LATENCY_BOUNDS = (5, 60, 600, 3600, 12 * 3600, 24 * 3600)
#: Properties that make a 5.x broker label a sent message: TopicMessageType's metrics values.
_SHARDING_KEY, _START_DELIVER = "__SHARDINGKEY", "__STARTDELIVERTIME"
_DELAY_KEYS = ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")


def _add(buckets: dict[int, int], at: int, n: int, keep: int) -> None:
    """Count n in bucket ``at``; drop buckets older than ``keep`` once there are twice as many."""
    buckets[at] = buckets.get(at, 0) + n
    if len(buckets) > 2 * keep:
        for old in [b for b in buckets if b <= at - keep]:
            del buckets[old]


def _midnight_after(day: int) -> float:
    """The epoch time of the local midnight that ends the day with this ordinal."""
    return datetime.combine(date.fromordinal(day + 1), datetime.min.time()).timestamp()


class Counter:
    """A running total with per-second (or per-ten-second), per-minute and per-hour buckets."""

    def __init__(self, clock: Callable[[], float], per_second: bool = False) -> None:
        self.clock = clock
        self.total = 0
        # the finest buckets: one per second for broker-wide counters, one per ten seconds per key
        self._fine_width = 1 if per_second else TEN_S
        self._fine: dict[int, int] = {}
        self._minutes: dict[int, int] = {}
        self._hours: dict[int, int] = {}
        # counts of the current second are summed here and put in the buckets once it is over
        self._pending = 0
        self._pending_second = 0
        self._second_start = self._second_end = 0.0

    def add(self, n: int, now: float | None = None) -> None:
        """Count ``n`` now (``now``: the clock's reading, when the caller has it)."""
        if now is None:
            now = self.clock()
        self.total += n
        if self._second_start <= now < self._second_end:
            self._pending += n
            return
        self._settle()
        second = int(now // 1)
        self._pending_second = second
        self._second_start = float(second)
        self._second_end = second + 1.0
        self._pending = n

    def _settle(self) -> None:
        """Put the pending counts in their second, minute and hour buckets."""
        n = self._pending
        if n:
            self._pending = 0
            at = self._pending_second
            _add(self._fine, at // self._fine_width, n, KEEP_SECONDS // self._fine_width)
            _add(self._minutes, at // 60, n, KEEP_MINUTES)
            _add(self._hours, at // 3600, n, KEEP_HOURS)

    def sum_last(self, seconds: int) -> int:
        """Counts of the last ``seconds``: to the second (or ten) within 600 s, the minute within an
        hour, the hour beyond."""
        self._settle()
        now = self.clock()
        if seconds <= KEEP_SECONDS:
            buckets, width = self._fine, self._fine_width
        elif seconds <= KEEP_MINUTES * 60:
            buckets, width = self._minutes, 60
        else:
            buckets, width = self._hours, 3600
        since = int((now - seconds) // width)
        return sum(n for b, n in buckets.items() if b > since)

    def rates(self, uptime: float = float("inf")) -> str:
        """Java's ``putTps``-style text: per-second rates over 10 s, 60 s and 600 s.

        Java samples once a second since boot and leaves a window longer than its samples empty, so
        a broker up for two minutes reads ``"0.5 0.2 "``.
        """
        return " ".join(str(self.sum_last(s) / float(s)) if uptime >= s else "" for s in RATE_WINDOWS_S)

    def snapshot(self, minutes: int) -> dict:
        """A BrokerStatsItem bean over the last ``minutes``."""
        total = self.sum_last(minutes * 60)
        return {"avgpt": 0.0, "sum": total, "tps": total / (minutes * 60.0)}


class DailyCounter(Counter):
    """A broker-wide counter that also knows its total at the last two local midnights.

    Java records both at each midnight and starts them at 0, so before the first midnight since
    boot they read 0; here the marks move lazily, at the first add or read of a new day.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(clock, per_second=True)
        self._day = date.fromtimestamp(clock()).toordinal()
        self._next_midnight = _midnight_after(self._day)
        self.today_morning = 0
        self.yesterday_morning = 0

    def _roll(self) -> None:
        today = date.fromtimestamp(self.clock()).toordinal()
        # no count since the last add, so the total now is the total at each midnight passed
        self.yesterday_morning = self.today_morning if today - self._day == 1 else self.total
        self.today_morning = self.total
        self._day = today
        self._next_midnight = _midnight_after(today)

    def add(self, n: int, now: float | None = None) -> None:
        if now is None:
            now = self.clock()
        if now >= self._next_midnight:
            self._roll()
        super().add(n, now)

    def mornings(self) -> tuple[int, int]:
        """Totals at today's and yesterday's local midnight."""
        if self.clock() >= self._next_midnight:
            self._roll()
        return self.today_morning, self.yesterday_morning


class BrokerStats:
    """Put counts per topic, get counts per topic@group, broker totals, and the boot time."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.boot_ms = int(clock() * 1000)
        self.broker_puts = DailyCounter(clock)
        self.topic_puts: dict[str, Counter] = defaultdict(self._counter)
        #: bytes stored by sends per topic (Java's TOPIC_PUT_SIZE, which rocketmq-exporter reads); a
        #: send adds to ``_put_bytes``, moved into the counter at the end of its read (no call per send)
        self.topic_put_size: dict[str, Counter] = defaultdict(self._counter)
        self._put_bytes: dict[str, int] = {}
        self.gets_found = Counter(clock, per_second=True)  # pulls that returned messages
        self.gets_missed = Counter(clock, per_second=True)  # pulls that returned none
        self.gets_transferred = DailyCounter(clock)  # messages those pulls carried
        self.group_get_nums: dict[str, Counter] = defaultdict(self._counter)
        self.group_get_size: dict[str, Counter] = defaultdict(self._counter)
        self._last_max: dict[tuple[str, int], int] = {}
        #: (stored topic, message type) -> [messages, bytes, size sum, puts per size bucket (7)]: what a
        #: 5.x broker's rocketmq_messages_in_total, throughput_in_total and message_size count per send
        self.messages_in: dict[tuple[str, str], list[int]] = {}
        #: (group, topic) -> messages sent to the group's DLQ (rocketmq_send_to_dlq_messages_total)
        self.sent_to_dlq: dict[tuple[str, str], int] = defaultdict(int)
        #: (topic, group, queue id) -> the next offset the group's last pull answered (Java's pullOffsetTable)
        self.pull_offsets: dict[tuple[str, str, int], int] = {}
        #: real topic -> [commits, rollbacks, commit latency sum (s), commits per latency bucket (7)]
        self.transactions: dict[str, list[int]] = {}

    def _counter(self) -> Counter:
        return Counter(self.clock)

    def on_arrival(self, topic: str, queue_id: int, new_max: int) -> None:
        """Store arrival listener: the queue grew to ``new_max``."""
        key = (topic, queue_id)
        grown = max(1, new_max - self._last_max.get(key, new_max - 1))
        self._last_max[key] = new_max
        now = self.clock()
        self.broker_puts.add(grown, now)
        self.topic_puts[topic].add(grown, now)
        if self._put_bytes:  # what this topic's sends stored (a topic's bytes wait for its arrival, or a reader)
            size = self._put_bytes.pop(topic, 0)
            if size:
                self.topic_put_size[topic].add(size, now)

    def _settle_sizes(self) -> None:
        pending, self._put_bytes = self._put_bytes, {}
        for topic, size in pending.items():
            self.topic_put_size[topic].add(size)

    def on_put(self, topic: str, props: dict[str, str], is_half: bool, messages: int, wrote_bytes: int) -> None:
        """One accepted send of ``messages`` records stored in ``topic`` (the half or schedule topic for
        those kinds, as Java labels them); typed from the sent properties as Java's getMessageType does."""
        if is_half:
            kind = "transaction"
        elif _SHARDING_KEY in props:
            kind = "fifo"
        elif (_START_DELIVER in props or _DELAY_KEYS[0] in props or _DELAY_KEYS[1] in props or _DELAY_KEYS[2] in props
              or _DELAY_KEYS[3] in props):
            kind = "delay"
        else:
            kind = "normal"
        try:  # a subscript, not .get(): one call less per sent message
            row = self.messages_in[(topic, kind)]
        except KeyError:
            row = self.messages_in[(topic, kind)] = [0] * 10
        row[0] += messages
        row[1] += wrote_bytes
        try:
            self._put_bytes[topic] += wrote_bytes
        except KeyError:
            self._put_bytes[topic] = wrote_bytes
        size = wrote_bytes // messages if messages else 0
        row[2] += size
        row[3 + bisect_left(MESSAGE_SIZE_BOUNDS, size)] += 1  # histogram buckets follow count and sums

    def on_dlq(self, group: str, topic: str) -> None:
        """A message given up on and written to ``%DLQ%group`` (topic: the one Java's counter names)."""
        self.sent_to_dlq[(group, topic)] += 1

    def on_end_transaction(self, topic: str, commit: bool, born_ms: int) -> None:
        """A half message committed or rolled back; a commit's latency is whole seconds since it was
        born, as Java records it."""
        row = self.transactions.get(topic)
        if row is None:
            row = self.transactions[topic] = [0] * 10
        if not commit:
            row[1] += 1
            return
        row[0] += 1
        latency = (int(self.clock() * 1000) - born_ms) // 1000
        row[2] += latency
        row[3 + bisect_left(FINISH_LATENCY_BOUNDS, latency)] += 1

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

    def item(self, name: str, key: str, cluster: str) -> Counter | None:
        """The counter VIEW_BROKER_STATS_DATA asks for, or None when rmqtx keeps no such item."""
        if name == TOPIC_PUT_NUMS:
            return self.topic_puts.get(key)
        if name == TOPIC_PUT_SIZE:
            self._settle_sizes()
            return self.topic_put_size.get(key)
        if name == GROUP_GET_NUMS:
            return self.group_get_nums.get(key)
        if name == GROUP_GET_SIZE:
            return self.group_get_size.get(key)
        if name == BROKER_PUT_NUMS and key == cluster:
            return self.broker_puts
        if name == BROKER_GET_NUMS and key == cluster:
            return self.gets_transferred
        return None

    def put_size_topics(self) -> list[str]:
        """The topics TOPIC_PUT_SIZE has a counter for, pending sizes counted in first."""
        self._settle_sizes()
        return list(self.topic_put_size)

    def uptime(self) -> float:
        return self.clock() - self.boot_ms / 1000

    def get_total_rates(self, uptime: float = float("inf")) -> str:
        """``getTotalTps``: found plus missed pulls per second over 10 s, 60 s and 600 s; a window longer
        than the uptime reads 0.0 (Java adds two rates that start at 0 there, unlike the other figures)."""
        return " ".join(
            str((self.gets_found.sum_last(s) + self.gets_missed.sum_last(s)) / float(s) if uptime >= s else 0.0)
            for s in RATE_WINDOWS_S
        )

    def runtime(self) -> str:
        secs = int(self.clock() - self.boot_ms / 1000)
        return f"[ {secs // 86400} days, {secs % 86400 // 3600} hours, {secs % 3600 // 60} minutes, {secs % 60} seconds ]"
