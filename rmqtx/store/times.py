"""How long the store's puts and gets take: the figures of Java's StoreStatsService that brokerStatus
shows (putMessageEntireTimeMax, putMessageDistributeTime, putMessageFailedTimes, getMessageEntireTimeMax,
and 5.x's putLatency99 and putLatency999).

Times are whole milliseconds, as Java's system clock gives them. A put is timed until its caller has
its final result: at once under ASYNC_FLUSH, after the group commit under SYNC_FLUSH. The histogram
starts again every 60 s (Java swaps it when it logs its TPS line); the maxima and the failure count
never do. The percentiles come from the last whole window, as 5.x computes them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from decimal import ROUND_HALF_UP, Decimal
from itertools import accumulate

#: The histogram's labels, in Java's order and spelling.
LABELS = ("<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms", "500ms~1s", "1~2s", "2~3s",
          "3~4s", "4~5s", "5~10s", "10s~")
#: Upper bounds (exclusive, ms) of the buckets after the first: 0 ms or less is bucket 0.
_UPPER = (10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
WINDOW_MS = 60_000
#: 5.x's finer buckets for the percentiles, as (step in ms, how many) from 0 up to 10 s, then one without
#: an upper bound (Java's Long.MAX_VALUE). A put of t ms counts in the first bucket whose upper edge is >= t.
_LATENCY_STEPS = ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9))
LATENCY_EDGES = tuple(accumulate(step for step, n in _LATENCY_STEPS for _ in range(n)))
_LAST_EDGE = 2 ** 63 - 1
#: When MessageStore.append_message times a put: at once; once its group commit is done under
#: SYNC_FLUSH (the caller waits with call_when_flushed); when the caller calls put_done.
TIME_NOW, TIME_AT_SYNC, TIME_BY_CALLER = 0, 1, 2


def bucket(elapsed_ms: int) -> int:
    """The histogram bucket of one put's time."""
    return 0 if elapsed_ms <= 0 else bisect_right(_UPPER, elapsed_ms) + 1


def latency_bucket(elapsed_ms: int) -> int:
    """The percentile bucket of one put's time (0 and 1 ms share bucket 0)."""
    return bisect_left(LATENCY_EDGES, elapsed_ms)


def percentile(counts: list[int], px: float) -> float:
    """5.x's findPutMessageEntireTimePX: the bucket holding the px-th put, interpolated linearly in it."""
    index = int(sum(counts) * px)
    passed = 0
    for i, count in enumerate(counts):
        if index <= passed + count:
            low = LATENCY_EDGES[i - 1] if i else 0
            high = LATENCY_EDGES[i] if i < len(LATENCY_EDGES) else _LAST_EDGE
            if not count:
                return float(low)
            span = (high - low) * (index - passed)  # a Java long: it wraps in the unbounded bucket, as there
            span = (span + 2 ** 63) % 2 ** 64 - 2 ** 63
            return low + span / count
        passed += count
    return 0.0


def java_2f(value: float) -> str:
    """Java's ``String.format("%.2f", value)``: its shortest digits, rounded half up."""
    return f"{Decimal(repr(value)).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):f}"


class StoreTimes:
    """Put and get times since the store started; methods take the clock's ``now_ms`` from the caller,
    which read it anyway."""

    def __init__(self, boot_ms: int) -> None:
        self.counts = [0] * len(LABELS)
        #: this window's puts in the percentile buckets, and the last whole window's
        self.latency = [0] * (len(LATENCY_EDGES) + 1)
        self.last_latency = list(self.latency)
        self.put_max = 0
        self.get_max = 0
        #: puts the commit log refused after the store took them (Java's putMessageFailedTimes)
        self.put_failed = 0
        self.boot_ms = boot_ms
        #: when the histogram starts again (read inline on the send path)
        self.window_end = boot_ms + WINDOW_MS

    def put(self, elapsed_ms: int, now_ms: int, ok: bool = True) -> None:
        """One put finished ``elapsed_ms`` after it began."""
        if now_ms >= self.window_end:
            self._roll(now_ms)
        self.counts[bucket(elapsed_ms)] += 1
        self.latency[latency_bucket(elapsed_ms)] += 1
        if elapsed_ms > self.put_max:
            self.put_max = elapsed_ms
        if not ok:
            self.put_failed += 1

    def get(self, elapsed_ms: int) -> None:
        if elapsed_ms > self.get_max:
            self.get_max = elapsed_ms

    def distribution(self, now_ms: int) -> str:
        """``putMessageDistributeTime`` as Java words it: ``[<=0ms]:N [0~10ms]:N ... [10s~]:N `` ."""
        if now_ms >= self.window_end:
            self._roll(now_ms)
        return "".join(f"[{label}]:{n} " for label, n in zip(LABELS, self.counts))

    def latency_percentile(self, px: float, now_ms: int) -> str:
        """``putLatency99`` (px 0.99) or ``putLatency999`` (0.999) in ms, over the last whole window."""
        if now_ms >= self.window_end:
            self._roll(now_ms)
        return java_2f(percentile(self.last_latency, px))

    def _roll(self, now_ms: int) -> None:
        """A new 60-s window: windows stay aligned to the store's start, however long nothing came."""
        skipped = (now_ms - self.window_end) // WINDOW_MS  # whole windows in which nothing was put
        self.counts = [0] * len(LABELS)
        self.last_latency = self.latency if not skipped else [0] * len(self.latency)
        self.latency = [0] * len(self.latency)
        self.window_end += skipped * WINDOW_MS + WINDOW_MS
