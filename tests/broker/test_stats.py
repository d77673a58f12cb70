"""Broker counters on a fake clock: second-exact rates, snapshots, and the midnight totals of the runtime info."""

from __future__ import annotations

import unittest
from datetime import datetime

from rmqtx.broker.stats import BROKER_GET_NUMS, GROUP_GET_NUMS, TOPIC_PUT_NUMS, BrokerStats


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
        self.assertEqual(self.stats.mornings(self.stats.broker_puts), (0, 0))  # no midnight since boot
        self.clock.at(datetime(2026, 3, 11, 9, 0))
        for n in range(6, 9):
            self.put("T", 0, n)
        self.assertEqual(self.stats.mornings(self.stats.broker_puts), (5, 0))
        self.clock.at(datetime(2026, 3, 12, 1, 0))
        self.put("T", 0, 9)
        self.assertEqual(self.stats.mornings(self.stats.broker_puts), (8, 5))
        self.assertEqual(self.stats.broker_puts.total, 9)


if __name__ == "__main__":
    unittest.main()
