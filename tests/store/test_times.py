"""The store's put and get times (brokerStatus's putMessageDistributeTime and maxima) on a fake clock."""

from __future__ import annotations

import unittest

from rmqtx.store import PutStatus
from rmqtx.store.times import LABELS, LATENCY_EDGES, WINDOW_MS, StoreTimes, bucket, java_2f, latency_bucket, percentile

from .helpers import TempStore, msg, put_sync


class BucketTest(unittest.TestCase):
    def test_bucket_edges_are_javas(self) -> None:
        """StoreStatsService.setPutMessageEntireTimeMax: <=0, then half-open ranges up to 10 s."""
        edges = {-5: 0, 0: 0, 1: 1, 9: 1, 10: 2, 49: 2, 50: 3, 99: 3, 100: 4, 199: 4, 200: 5, 499: 5, 500: 6,
                 999: 6, 1000: 7, 1999: 7, 2000: 8, 3000: 9, 4000: 10, 4999: 10, 5000: 11, 9999: 11, 10000: 12,
                 10 ** 9: 12}
        self.assertEqual({ms: bucket(ms) for ms in edges}, edges)
        self.assertEqual(len(LABELS), 13)

    def test_text_is_javas(self) -> None:
        times = StoreTimes(boot_ms=1_000)
        for elapsed in (0, 0, 3, 120, 12_000):
            times.put(elapsed, 2_000)
        self.assertEqual(times.distribution(2_000),
                         "[<=0ms]:2 [0~10ms]:1 [10~50ms]:0 [50~100ms]:0 [100~200ms]:1 [200~500ms]:0 [500ms~1s]:0 "
                         "[1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:1 ")
        self.assertEqual((times.put_max, times.put_failed), (12_000, 0))


class WindowTest(unittest.TestCase):
    def test_the_histogram_starts_again_every_minute_the_maxima_never(self) -> None:
        boot = 5_000
        times = StoreTimes(boot)
        times.put(700, boot + WINDOW_MS - 1, ok=False)
        self.assertIn("[500ms~1s]:1 ", times.distribution(boot + WINDOW_MS - 1))
        self.assertIn("[500ms~1s]:0 ", times.distribution(boot + WINDOW_MS))
        times.put(1, boot + WINDOW_MS + 5)
        self.assertIn("[0~10ms]:1 ", times.distribution(boot + 2 * WINDOW_MS - 1))
        # an idle gap of several minutes: the windows stay aligned to the start
        times.put(1, boot + 5 * WINDOW_MS + 10)
        self.assertIn("[0~10ms]:1 ", times.distribution(boot + 6 * WINDOW_MS - 1))
        self.assertIn("[0~10ms]:0 ", times.distribution(boot + 6 * WINDOW_MS))
        self.assertEqual((times.put_max, times.put_failed), (700, 1))
        times.get(3)
        times.get(2)
        self.assertEqual(times.get_max, 3)


class LatencyTest(unittest.TestCase):
    """5.x's putLatency99 / putLatency999 (StoreStatsService.findPutMessageEntireTimePX)."""

    def test_buckets_are_5x(self) -> None:
        self.assertEqual(len(LATENCY_EDGES), 75)
        self.assertEqual(LATENCY_EDGES[:3] + LATENCY_EDGES[19:22] + LATENCY_EDGES[-2:], (1, 2, 3, 20, 22, 24, 9000, 10000))
        edges = {-3: 0, 0: 0, 1: 0, 2: 1, 20: 19, 21: 20, 22: 20, 23: 21, 50: 34, 51: 35, 10000: 74, 10001: 75}
        self.assertEqual({ms: latency_bucket(ms) for ms in edges}, edges)

    def test_percentile_interpolates_in_its_bucket(self) -> None:
        counts = [0] * 76
        self.assertEqual(percentile(counts, 0.99), 0.0)
        counts[0], counts[latency_bucket(300)] = 990, 10  # 990 puts within 1 ms, 10 of 251-300 ms
        self.assertEqual(percentile(counts, 0.99), 1.0)  # the 990th put: the whole first bucket
        self.assertEqual(percentile(counts, 0.999), 295.0)  # the 9th of 10 in (250, 300]: 250 + 50 * 9/10
        counts[75] = 1000  # half the puts over 10 s: the 999th of them in the unbounded bucket, whose Java long
        # product (2**63 - 1 - 10000) * 998 wraps to -9,980,998: 10000 - 9980.998
        self.assertAlmostEqual(percentile(counts, 0.999), 19.002, places=6)

    def test_two_decimals_rounded_half_up(self) -> None:
        self.assertEqual([java_2f(v) for v in (0.0, 0.125, 1.0, 295.0, 2.5e-3)], ["0.00", "0.13", "1.00", "295.00", "0.00"])

    def test_the_last_whole_window_counts(self) -> None:
        boot = 5_000
        times = StoreTimes(boot)
        for elapsed in [0] * 99 + [120]:
            times.put(elapsed, boot + 10)
        self.assertEqual(times.latency_percentile(0.99, boot + 20), "0.00")  # this window is not over yet
        self.assertEqual(times.latency_percentile(0.99, boot + WINDOW_MS), "1.00")
        self.assertEqual(times.latency_percentile(0.999, boot + WINDOW_MS + 1), "1.00")
        self.assertEqual(times.latency_percentile(0.99, boot + 2 * WINDOW_MS), "0.00")  # a window without puts
        times.put(40, boot + 2 * WINDOW_MS + 5)
        self.assertEqual(times.latency_percentile(0.99, boot + 5 * WINDOW_MS), "0.00")  # idle for minutes since


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class StorePutTimesTest(unittest.TestCase):
    """An ASYNC_FLUSH store, its clock stepped by hand while a put runs."""

    def setUp(self) -> None:
        self.ts = TempStore()
        self.addCleanup(self.ts.close)
        self.clock = Clock()
        self.ts.store.shutdown()
        self.store = self.ts.store = self.ts.open(self.clock)

    def test_puts_are_timed_and_failures_counted_as_java_counts_them(self) -> None:
        store, clock = self.store, self.clock
        real_put = store.commitlog.put_message

        def slow_put(*args):  # the write takes 30 ms of the store's clock
            clock.now += 0.030
            return real_put(*args)

        store.commitlog.put_message = slow_put
        self.assertIs(put_sync(store, msg("T", 0, b"x")).status, PutStatus.PUT_OK)
        self.assertIs(put_sync(store, msg("T", 0, b"x" * (4 * 1024 * 1024 + 1))).status, PutStatus.MESSAGE_ILLEGAL)
        # refused by Java's checkMessage before its timer starts: neither timed nor counted
        self.assertIs(put_sync(store, msg("T" * 200, 0, b"x")).status, PutStatus.MESSAGE_ILLEGAL)
        self.assertIs(put_sync(store, msg("T", 0, b"x", extra={"big": "y" * 40000})).status,
                      PutStatus.PROPERTIES_SIZE_EXCEEDED)
        times = store.times
        self.assertEqual(times.counts[bucket(30)], 2)  # the good put and the body too large
        self.assertEqual(sum(times.counts), 2)
        self.assertEqual((times.put_max, times.put_failed), (30, 1))
        self.assertEqual(times.latency[latency_bucket(30)], 2)
        store.commitlog.put_message = real_put
        self.assertEqual(store.append_message(msg("T", 1, b"y")).status, PutStatus.PUT_OK)
        self.assertEqual(sum(times.counts), 3)
        self.assertEqual((times.counts[0], times.latency[0], sum(times.latency)), (1, 1, 3))  # the inline 0-ms case

    def test_gets_are_timed(self) -> None:
        put_sync(self.store, msg("T", 0, b"x"))
        real_get = self.store._get_message

        def slow_get(*args):  # the read takes 250 ms of the store's clock
            self.clock.now += 0.25
            return real_get(*args)

        self.store._get_message = slow_get  # type: ignore[method-assign]
        self.assertEqual(len(self.store.get_message("T", 0, 0, 32).messages), 1)
        self.assertEqual(self.store.times.get_max, 250)
