"""The timer service on a real store with real files; the reactor is a ``task.Clock`` and the wall
clock a number the test moves, so which slot is read when is exact.

- Catching up after a pause (a restart, a busy reactor): a cancel going round the roll window must
  still reach the slot of the message it cancels before that slot is read.
- timerCongestNumEachSlot: Java's flow control of a crowded slot.
- A slave's timer following the master's over the same (replicated) timer topic, then taking over."""
from __future__ import annotations

import dataclasses
import time

from twisted.internet import task
from twisted.trial import unittest

from rmqtx.broker.timer import TIMER_DEL_UNIQKEY, TIMER_DELAY_MS, TIMER_DELIVER_MS, TimerMessageService, flow_controlled
from rmqtx.common.message import parse_properties
from rmqtx.common.topics import TIMER_TOPIC
from rmqtx.store.record import decode_record
from rmqtx.store.timer import TimerConfig
from tests.store.helpers import TempStore, msg

P = 100  # precision, ms
CFG = TimerConfig.from_properties({"timerPrecisionMs": str(P), "timerRollWindowSlot": "20",
                                   "mappedFileSizeTimerLog": str(64 * 1024),
                                   "timerFlushIntervalMs": str(3600 * 1000)})  # no sync thread: shutdown syncs
T0 = 1_800_000_000_000  # a whole second: slots are easy to name


class Wheel:
    """One timer service over a store, with a clock the test moves."""

    def __init__(self, ts: TempStore, cfg: TimerConfig = CFG) -> None:
        self.ts = ts
        self.cfg = cfg
        self.now_ms = T0
        self.reactor = task.Clock()
        ts.store.shutdown()
        ts.store = ts.open(clock=lambda: self.now_ms / 1000)  # store timestamps on the test's clock too
        self.timer = self.open()

    def open(self, root: str | None = None, follow: bool = False) -> TimerMessageService:
        timer = TimerMessageService(self.ts.store, root or self.ts.root, self.cfg, clock=lambda: self.now_ms / 1000,
                                    reactor=self.reactor)
        timer.load()
        deadline = time.monotonic() + 10
        while not timer.files.log.ready():  # the first timer log file is made in a thread
            assert time.monotonic() < deadline, "timer log file never made"
            time.sleep(0.01)
        if follow:
            timer.follow()
        else:
            timer.start()
        return timer

    def restart(self) -> None:
        self.timer.shutdown()
        self.timer = self.open()

    def send(self, body: str, **props: str) -> str | None:
        """Stores a timer message as the send path does; the refusal's remark, if refused."""
        props.setdefault("UNIQ_KEY", f"U-{body}")
        topic, queue_id, refusal = self.timer.redirect("T", 0, props, 0)
        if refusal is not None:
            return f"{refusal.code} {refusal.remark}"
        assert topic == TIMER_TOPIC
        result = self.ts.store.append_message(msg(TIMER_TOPIC, queue_id, body.encode(), tags=None, extra=props))
        assert result.status.name == "PUT_OK", result.status
        return None

    def at(self, ms: int) -> None:
        """The wall clock jumps to ``ms``; the reactor then runs what is due (a busy reactor's catch-up)."""
        self.now_ms = ms
        for _ in range(200):
            self.reactor.advance(0.01)

    def delivered(self) -> list[str]:
        store = self.ts.store
        out = []
        end = store.get_max_offset_in_queue("T", 0)
        if end > 0:
            for raw in store.get_message("T", 0, 0, end).messages:
                out.append(decode_record(raw).body.decode())
        return out


class CatchUpTest(unittest.TestCase):
    def setUp(self) -> None:
        self.ts = TempStore()
        self.addCleanup(self.ts.close)
        self.wheel = Wheel(self.ts)
        self.addCleanup(lambda: self.wheel.timer.shutdown())

    def send_and_cancel(self) -> int:
        """A message due 3.1 s on, and its cancel one slot later: both roll (window 2 s), in two roll slots."""
        w = self.wheel
        w.send("target", **{TIMER_DELAY_MS: "3100"})  # stored at T0: rolls into the slot of T0 + 2 s
        w.at(T0 + P)
        due = T0 + 3100 - P  # a due time on a slot boundary is stored one slot earlier, as Java does
        w.send("cancel", **{TIMER_DEL_UNIQKEY: "T+U-target", TIMER_DELIVER_MS: str(due + 1), "UNIQ_KEY": "U-target"})
        w.at(T0 + 2 * P)  # stored at T0 + 0.1 s: rolls into the slot of T0 + 2.1 s
        return due

    def test_cancel_in_a_later_roll_slot_after_a_pause(self) -> None:
        w = self.wheel
        due = self.send_and_cancel()
        w.at(T0 + 2000 + P)  # only the target's roll slot is read: it goes round, into its own slot
        self.assertEqual(w.delivered(), [])
        w.at(due + 2000)  # a pause: the cancel's roll slot and the target's slot are both behind
        self.assertEqual(w.delivered(), [])
        self.assertEqual(w.timer.runtime_figures()["timerOffsetBehind"], "0")

    def test_cancel_in_a_later_roll_slot_across_a_restart(self) -> None:
        w = self.wheel
        due = self.send_and_cancel()
        w.at(T0 + 2000 + P)
        w.restart()
        w.at(due + 5000)
        self.assertEqual(w.delivered(), [])

    def test_a_roll_slot_read_before_the_message_was_linked(self) -> None:
        """Linked long after it was stored (here 2.5 s, more than the 2 s roll window), a message's roll slot
        counted from its store time has been read already: it rolls from the time it is linked instead."""
        w = self.wheel
        w.send("m", **{TIMER_DELAY_MS: "10000"})
        w.timer.cfg = dataclasses.replace(CFG, timerStopEnqueue=True)
        w.at(T0 + 2500)  # the dequeue reads up to T0 + 2.5 s before the enqueue links it
        w.timer.cfg = CFG
        w.at(T0 + 2600)
        self.assertEqual((w.delivered(), w.timer.runtime_figures()["timerOffsetBehind"]), ([], "0"))
        w.at(T0 + 12_000)
        self.assertEqual(w.delivered(), ["m"])

    def test_both_roll_slots_behind(self) -> None:
        """Both go round during the catch-up; each copy is then past due, yet no slot after them was read."""
        w = self.wheel
        due = self.send_and_cancel()
        w.at(due + 2000)
        self.assertEqual(w.delivered(), [])

    def test_uncancelled_messages_still_come_after_a_pause(self) -> None:
        w = self.wheel
        for i, delay in enumerate((500, 1500, 3100, 3900)):
            w.send(f"m{i}", **{TIMER_DELAY_MS: str(delay)})
        w.at(T0 + 10_000)
        self.assertEqual(sorted(w.delivered()), ["m0", "m1", "m2", "m3"])
        for raw in self.ts.store.get_message("T", 0, 0, 4).messages:
            self.assertNotIn("TIMER_DEL_UNIQKEY", parse_properties(decode_record(raw).properties))


class FlowControlTest(unittest.TestCase):
    def test_javas_draw_between_the_limit_and_twice_it(self) -> None:
        self.assertFalse(flow_controlled(2, 2, lambda n: 999))
        self.assertTrue(flow_controlled(4, 2, lambda n: 0))
        # 1000 * (3 - 2) / 2.1 = 476.2: a draw above it refuses
        self.assertTrue(flow_controlled(3, 2, lambda n: 477))
        self.assertFalse(flow_controlled(3, 2, lambda n: 476))
        self.assertFalse(flow_controlled(2**31 - 1, 2**31 - 1))  # Java's default: never

    def test_a_crowded_slot_refuses_and_others_do_not(self) -> None:
        ts = TempStore()
        self.addCleanup(ts.close)
        wheel = Wheel(ts, dataclasses.replace(CFG, timerCongestNumEachSlot=2))
        self.addCleanup(lambda: wheel.timer.shutdown())
        at = str(T0 + 1500 + 1)
        answers = []
        for i in range(40):
            answers.append(wheel.send(f"m{i}", **{TIMER_DELIVER_MS: at}))
            wheel.reactor.advance(0)  # linked, as after the send's reactor turn
        self.assertEqual(answers[:3], [None] * 3)  # up to the limit, and the one that reaches past it
        refused = ("1 timer message is under flow control, max num limit is 4 or the current value is greater "
                   "than 2 and less than 4, trigger random flow control")
        self.assertEqual(set(answers[3:]), {None, refused})  # 3 in the slot: Java's draw (refuses about half)
        fourth = answers.index(None, 3)
        self.assertEqual(answers[fourth + 1:], [refused] * (39 - fourth))  # 4 in the slot: always refused
        self.assertIsNone(wheel.send("other", **{TIMER_DELIVER_MS: str(T0 + 1600 + 1)}))
        wheel.at(T0 + 2000)
        self.assertEqual(len(wheel.delivered()), 1 + answers.count(None))


class FollowerTest(unittest.TestCase):
    """The slave's timer reads the same timer topic as the master's (replication copies it byte for byte)
    into wheel files of its own."""

    def setUp(self) -> None:
        self.ts = TempStore()
        self.addCleanup(self.ts.close)
        self.wheel = Wheel(self.ts)
        self.master = self.wheel.timer
        self.addCleanup(lambda: self.master.shutdown())
        self.slave = self.wheel.open(root=self.ts.root + "/slave", follow=True)
        self.addCleanup(lambda: self.slave.shutdown())

    def sync(self) -> None:
        """SlaveSynchronize's GET_TIMER_CHECK_POINT."""
        check = self.master.files.check
        self.slave.follow_master(check.last_read_time_ms, check.master_queue_offset)

    def test_takes_over_where_the_master_stopped(self) -> None:
        w = self.wheel
        w.send("early", **{TIMER_DELAY_MS: "500"})
        w.send("rolls", **{TIMER_DELAY_MS: "3100"})
        w.send("cancelled", **{TIMER_DELAY_MS: "1500"})
        w.send("cancel", **{TIMER_DEL_UNIQKEY: "T+U-cancelled", TIMER_DELIVER_MS: str(T0 + 1500), "UNIQ_KEY": "U-cancelled"})
        w.at(T0 + 100)
        self.assertEqual(self.slave.queue_offset, 0)  # the master's checkpoint not read yet: nothing linked
        self.sync()
        w.at(T0 + 1000)
        self.assertEqual(w.delivered(), ["early"])  # by the master; the slave delivers nothing
        self.assertEqual(self.slave.queue_offset, 4)
        self.sync()
        self.assertEqual(self.slave.read_ms, self.master.read_ms)
        self.master.stop()  # the master dies
        self.slave.start()  # the slave is elected
        self.assertFalse(self.slave.following)
        w.at(T0 + 6000)
        self.assertEqual(w.delivered(), ["early", "rolls"])  # each once, the cancel held

    def test_a_cancel_the_old_master_had_not_rolled_yet_still_holds(self) -> None:
        """Taking over from an older read time, the slave does not roll the target again (the old master
        did), but does roll its cancel, which the old master had not: the cancel reaches the target's slot."""
        w = self.wheel
        w.send("target", **{TIMER_DELAY_MS: "3100"})  # stored at T0: rolls in the slot of T0 + 2 s
        w.at(T0 + P)
        due = T0 + 3100 - P
        w.send("cancel", **{TIMER_DEL_UNIQKEY: "T+U-target", TIMER_DELIVER_MS: str(due + 1), "UNIQ_KEY": "U-target"})
        w.at(T0 + 2 * P)  # stored at T0 + 0.1 s: rolls in the slot of T0 + 2.1 s
        self.sync()  # the last checkpoint the slave reads: read time T0 + 0.2 s
        w.at(T0 + 2000 + P)  # the master rolls the target, not yet the cancel
        self.sync_offset_only()
        w.at(T0 + 2000 + P)  # the slave links the target's copy
        self.master.stop()
        self.slave.start()
        w.at(due + 2000)
        self.assertEqual(w.delivered(), [])

    def sync_offset_only(self) -> None:
        """A checkpoint read whose read time is the older one (the master's had not been written yet)."""
        self.slave.follow_master(self.slave.files.check.last_read_time_ms, self.master.files.check.master_queue_offset)

    def test_a_slave_links_no_further_than_the_master(self) -> None:
        w = self.wheel
        self.master.stop()  # the master has linked nothing
        w.send("m", **{TIMER_DELAY_MS: "500"})
        self.sync()
        w.at(T0 + 1000)
        self.assertEqual((self.slave.queue_offset, w.delivered()), (0, []))
        self.slave.start()  # taking over: it links what the master never did, and delivers it
        w.at(T0 + 2000)
        self.assertEqual(w.delivered(), ["m"])

    def test_a_roll_the_master_linked_late_is_not_skipped(self) -> None:
        """A master links a message a moment after the send stored it. Had it counted the roll slot from
        then (T0 + 2.1 s here) while the slave counts from the store time (T0 + 2 s), a takeover from a
        read time between the two would lose the message: the old master had not rolled it yet, and the
        new master would have passed its own slot for it."""
        w = self.wheel
        w.send("late", **{TIMER_DELAY_MS: "3100"})  # stored at T0
        w.at(T0 + P + P // 2)  # the master links it a slot after it was stored
        self.sync()
        w.at(T0 + 2000 + P + P // 2)  # the master's read time reaches T0 + 2.1 s
        self.sync()  # the last checkpoint the slave reads
        self.master.stop()
        self.slave.start()
        w.at(T0 + 3100 + 2000)
        self.assertEqual(w.delivered(), ["late"])

    def test_a_slave_linking_late_does_not_deliver_twice(self) -> None:
        """The slave links a message only after the master rolled it and read past its roll slot: from its own
        link time the message no longer rolls, and the master's copy is linked beside it. Taking over, the
        new master delivers the copy and not the original as well."""
        w = self.wheel
        w.send("m", **{TIMER_DELAY_MS: "3100"})  # stored at T0: rolls in the slot of T0 + 2 s
        w.at(T0 + 2000 + P + P // 2)  # the master reads that slot and puts a copy back, due at its own slot
        self.sync()  # the slave's first checkpoint: read time T0 + 2.1 s, both units linkable
        w.at(T0 + 2000 + 2 * P)
        self.assertEqual(self.slave.queue_offset, 2)
        self.master.stop()
        self.slave.start()
        w.at(T0 + 3100 + 2000)
        self.assertEqual(w.delivered(), ["m"])
