"""The timer scenario's check: the broker's lateness is judged by the store timestamp, the client's by the receipt."""

from __future__ import annotations

import unittest

from interop.scenarios import TIMER_LATE_S, TIMER_RECEIVE_LATE_S, timer_check

PARAMS = {"messages": [{"body": "timer-0", "tags": "TagA", "keys": ["k0"], "timer": {"delay_ms": 1500}},
                       {"body": "timer-1", "tags": "TagA", "keys": ["k1"], "timer": {"delay_sec": 2}}]}


def events(*recvs: dict) -> list[dict]:
    """Both messages sent at t=100; ``recvs`` are the recv events' extra fields, in message order."""
    out = [{"kind": "sent", "body": m["body"], "at": 100.0} for m in PARAMS["messages"]]
    for m, extra in zip(PARAMS["messages"], recvs):
        out.append({"kind": "recv", "body": m["body"], "tags": m["tags"], "keys": m["keys"], **extra})
    return out


class TimerCheckTest(unittest.TestCase):
    def test_on_time(self) -> None:
        self.assertIsNone(timer_check(events({"at": 101.8, "stored_at": 101.7}, {"at": 102.9}), PARAMS, None))

    def test_early_by_store_or_receipt(self) -> None:
        self.assertIn("before it was due", timer_check(events({"at": 101.8, "stored_at": 101.2}, {"at": 102.9}), PARAMS, None))
        self.assertIn("before it was due", timer_check(events({"at": 101.8}, {"at": 101.5}), PARAMS, None))

    def test_stored_late_fails_even_when_received_soon_after(self) -> None:
        late = 100 + 1.5 + TIMER_LATE_S + 0.5
        reason = timer_check(events({"at": late + 0.1, "stored_at": late}, {"at": 102.9}), PARAMS, None)
        self.assertIn("stored on its topic", reason)
        self.assertIn("timer-1 received 2.90", reason)  # every message's times, for the cause

    def test_a_slow_receipt_of_a_timely_store_passes_within_its_bound(self) -> None:
        slow = 100 + 1.5 + TIMER_LATE_S + 3
        self.assertIsNone(timer_check(events({"at": slow, "stored_at": 101.7}, {"at": 102.9}), PARAMS, None))
        too_slow = 100 + 1.5 + TIMER_RECEIVE_LATE_S + 1
        self.assertIn("late", timer_check(events({"at": too_slow, "stored_at": 101.7}, {"at": 102.9}), PARAMS, None))

    def test_without_a_store_time_the_receipt_has_the_broker_bound(self) -> None:
        late = 100 + 2 + TIMER_LATE_S + 0.5
        self.assertIn("late", timer_check(events({"at": 101.8}, {"at": late}), PARAMS, None))


if __name__ == "__main__":
    unittest.main()
