"""CI guard on the per-message cost of the broker's hot path: Python calls, counted, not timed.

The workload (testkit/hotpath.py) is what Apache's benchmark Producer and a push consumer
send: ROCKETMQ-binary SEND_MESSAGE_V2 frames 32 to a read and PULL_MESSAGE for 32 messages. cProfile
counts every Python and builtin call, so the figure is the same on any machine; a change that adds
work per message shows up here. `python benchmarks/hotpath.py --calls` prints the current figures.
"""

from __future__ import annotations

from twisted.trial import unittest

from rmqtx.accel import accel
from testkit.hotpath import HotPath, calls_per_message, warm_up

# Measured when set (accelerated, with the send lane: 10.5 / 4.1; pure Python 210.4 / 9.8), plus ~10%
# (more for the accelerated counts, which are small). The lane's sends make no Python call of their own
# but the store clock, the CRC, the statistics and the arrival listeners.
SEND_BUDGET = 12 if accel is not None else 232
PULL_BUDGET = 5 if accel is not None else 11


class CallBudget(unittest.TestCase):
    timeout = 120

    def setUp(self) -> None:
        self.hot = HotPath()

    def tearDown(self):
        return self.hot.close()

    def test_calls_per_sent_and_pulled_message(self) -> None:
        warm_up(self.hot)
        send_calls, pull_calls = calls_per_message(self.hot)
        detail = f"send {send_calls:.1f} calls/msg (budget {SEND_BUDGET}), pull {pull_calls:.1f} (budget {PULL_BUDGET})"
        self.assertLessEqual(send_calls, SEND_BUDGET, detail)
        self.assertLessEqual(pull_calls, PULL_BUDGET, detail)
        self.assertGreater(send_calls, 5, detail)  # the counter really saw the broker's work
