"""Broker counters on a fake clock: second-exact rates, snapshots, and the midnight totals of the runtime info."""

from __future__ import annotations

import unittest
from datetime import datetime

from rmqtx.broker.stats import BROKER_GET_NUMS, GROUP_GET_NUMS, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, BrokerStats


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start.timestamp()

    def __call__(self) -> float:
        return self.now

    def at(self, when: datetime) -> None:
        self.now = when.timestamp()


class BrokerStatsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.clock = Clock(datetime(2026, 3, 10, 10, 0, 0))
        self.stats = BrokerStats(self.clock)

    def put(self, topic: str, queue: int, new_max: int) -> None:
        self.stats.on_arrival(topic, queue, new_max)

    def test_rates_count_only_their_window(self) -> None:
        self.put("T", 0, 1)
        self.clock.now += 30
        self.put("T", 0, 2)
        self.put("T", 0, 5)  # a batch of three
        self.assertEqual(self.stats.broker_puts.rates().split(), [str(4 / 10.0), str(5 / 60.0), str(5 / 600.0)])
        self.clock.now += 11
        self.assertEqual(self.stats.broker_puts.rates().split()[0], "0.0")
        self.clock.now += 600
        self.assertEqual(self.stats.broker_puts.rates(), "0.0 0.0 0.0")
        self.assertEqual(self.stats.item(TOPIC_PUT_NUMS, "T", "C").snapshot(1440)["sum"], 5)

    def test_a_topics_minute_slides_past_the_minute_boundary(self) -> None:
        """The Prometheus TPS read 0 in CI when its sends fell late in a minute and the scrape came after it."""
        self.clock.at(datetime(2026, 3, 10, 10, 0, 55))
        for n in range(1, 4):
            self.put("T", 0, n)
        self.clock.now += 10  # 10:01:05
        self.assertEqual(self.stats.item(TOPIC_PUT_NUMS, "T", "C").snapshot(1)["sum"], 3)
        self.clock.now += 50  # 10:01:55: the puts' ten seconds have left the window
        self.assertEqual(self.stats.item(TOPIC_PUT_NUMS, "T", "C").snapshot(1)["sum"], 0)

    def test_put_sizes_per_topic_reach_the_counter_at_the_reads_end_or_when_asked(self) -> None:
        self.stats.on_put("T", {}, False, 1, 300)
        self.stats.on_put("T", {}, False, 2, 500)  # a batch
        self.stats.on_put("U", {}, False, 1, 70)
        self.assertNotIn("T", self.stats.topic_put_size)  # no counter work per send
        self.put("T", 0, 3)  # the read's arrivals
        self.assertEqual(self.stats.topic_put_size["T"].total, 800)
        self.stats.on_put("U", {}, False, 1, 30)
        self.assertEqual(self.stats.item(TOPIC_PUT_SIZE, "U", "C").snapshot(1)["sum"], 100)
        self.assertIsNone(self.stats.item(TOPIC_PUT_SIZE, "V", "C"))
        self.clock.now += 61
        self.assertEqual(self.stats.item(TOPIC_PUT_SIZE, "T", "C").snapshot(1)["sum"], 0)
        self.assertEqual(self.stats.item(TOPIC_PUT_SIZE, "T", "C").snapshot(60)["sum"], 800)

    def test_gets_by_group_and_broker(self) -> None:
        self.stats.on_get("T", "G", 3, 300)
        self.stats.on_get("T", "G", 0, 0)
        self.stats.on_get("T", "H", 1, 50)
        self.assertEqual(self.stats.item(GROUP_GET_NUMS, "T@G", "C").total, 3)
        self.assertEqual(self.stats.item(BROKER_GET_NUMS, "C", "C").total, 4)
        self.assertIsNone(self.stats.item(BROKER_GET_NUMS, "other", "C"))
        self.assertEqual(self.stats.get_total_rates().split()[0], str(3 / 10.0))
        self.assertEqual(self.stats.gets_missed.total, 1)

    def test_midnight_totals_start_at_zero_and_roll(self) -> None:
        for n in range(1, 6):
            self.put("T", 0, n)
        self.assertEqual(self.stats.broker_puts.mornings(), (0, 0))  # no midnight since boot
        self.clock.at(datetime(2026, 3, 11, 9, 0))
        for n in range(6, 9):
            self.put("T", 0, n)
        self.assertEqual(self.stats.broker_puts.mornings(), (5, 0))
        self.clock.at(datetime(2026, 3, 12, 1, 0))
        self.put("T", 0, 9)
        self.assertEqual(self.stats.broker_puts.mornings(), (8, 5))
        self.assertEqual(self.stats.broker_puts.total, 9)

    def test_two_midnights_without_traffic(self) -> None:
        self.clock.at(datetime(2026, 3, 11, 8, 0))
        self.put("T", 0, 4)  # counts 1 (the first arrival of a queue counts one)
        self.clock.at(datetime(2026, 3, 13, 12, 0))  # two midnights later, nothing in between
        self.assertEqual(self.stats.broker_puts.mornings(), (1, 1))

    def test_buckets_stay_bounded_and_snapshots_span_their_window(self) -> None:
        key_counter = None
        for minute in range(3 * 24 * 60):  # three days, one get a minute
            self.clock.now += 60
            self.stats.on_get("T", "G", 2, 10)
            key_counter = self.stats.item(GROUP_GET_NUMS, "T@G", "C")
        self.assertLessEqual(len(key_counter._minutes), 2 * 60)
        self.assertLessEqual(len(key_counter._hours), 2 * 25)
        self.assertEqual(key_counter._fine_width, 10)  # per-key items keep no per-second buckets
        self.assertLessEqual(len(key_counter._fine), 2 * 60)
        self.assertEqual(self.stats.gets_transferred._fine_width, 1)
        self.assertLessEqual(len(self.stats.gets_transferred._fine), 2 * 600)
        self.assertEqual(key_counter.snapshot(1)["sum"], 2)
        self.assertEqual(key_counter.snapshot(60)["sum"], 120)
        day = key_counter.snapshot(1440)["sum"]
        self.assertTrue(2 * 23 * 60 <= day <= 2 * 24 * 60, day)  # whole hours after the window start's, then the current one
        self.assertEqual(key_counter.total, 2 * 3 * 24 * 60)


if __name__ == "__main__":
    unittest.main()


class RateWindowsTest(unittest.TestCase):
    def test_windows_longer_than_the_uptime_are_empty_as_in_java(self) -> None:
        """brokerStatus against Java 4.9.8 two minutes after boot: putTps "0.0 0.21 ", getTotalTps "0.39 0.76 0.0"."""
        clock = Clock(datetime(2026, 3, 10, 10, 0, 0))
        stats = BrokerStats(clock)
        clock.now += 5
        self.assertEqual(stats.broker_puts.rates(stats.uptime()), "  ")
        self.assertEqual(stats.get_total_rates(stats.uptime()), "0.0 0.0 0.0")
        clock.now += 129  # up 2 min 14 s, as in the capture
        stats.on_arrival("T", 0, 1)
        stats.on_arrival("T", 0, 6)  # six messages in all
        stats.on_get("T", "G", 2, 100)  # one pull that found messages
        self.assertEqual(stats.broker_puts.rates(stats.uptime()), f"{6 / 10.0} {6 / 60.0} ")
        self.assertEqual(stats.get_total_rates(stats.uptime()), f"{1 / 10.0} {1 / 60.0} 0.0")
        clock.now += 600
        self.assertEqual(stats.broker_puts.rates(stats.uptime()), "0.0 0.0 0.0")
