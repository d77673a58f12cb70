"""The timer files in Apache RocketMQ 5.x's layout: wheel slots, timer log units and blanks, checkpoint, recovery of a torn log."""

from __future__ import annotations

import os
import struct
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

from rmqtx.store.timer import (
    BLANK_MAGIC, MAGIC_DEFAULT, MAGIC_ROLL, SLOTS_TOTAL, UNIT, UNIT_SIZE, TimerCheckpoint, TimerConfig, TimerLog, TimerWheel,
)


class TimerFilesTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="rmqtx-timer-files-")
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        self.pool = ThreadPoolExecutor(1)
        self.addCleanup(self.pool.shutdown)

    def test_wheel_slot_layout_and_ring(self) -> None:
        path = os.path.join(self.root, "timerwheel")
        wheel = TimerWheel(path, 100)
        self.assertEqual(os.path.getsize(path), SLOTS_TOTAL * 2 * 32)
        wheel.put(1_700_000_000_150, 52, 104, 2, 0)
        self.assertEqual(wheel.get(1_700_000_000_100), (1_700_000_000_100, 52, 104, 2, 0))  # same slot, floored
        self.assertEqual(wheel.get(1_700_000_000_200)[0], -1)
        # the same position one turn of the ring later holds another time: empty for that time
        turn = SLOTS_TOTAL * 2 * 100
        self.assertEqual(wheel.get(1_700_000_000_100 + turn)[0], -1)
        index = (1_700_000_000_100 // 100) % (SLOTS_TOTAL * 2)
        with open(path, "rb") as f:
            f.seek(index * 32)
            self.assertEqual(struct.unpack(">qqqii", f.read(32)), (17_000_000_001, 52, 104, 2, 0))
        wheel.close()
        with self.assertRaises(ValueError):  # another precision's wheel has the same length; a wrong length is refused
            with open(path, "ab") as f:
                f.write(b"x")
            TimerWheel(path, 100)

    def test_count_from_reads_only_data_extents_and_agrees_with_a_whole_file_scan(self) -> None:
        path = os.path.join(self.root, "timerwheel")
        wheel = TimerWheel(path, 1000)
        now = 1_700_000_000_000
        self.assertEqual(wheel._data_extents(SLOTS_TOTAL * 2 * 32), [])  # a fresh wheel is one hole
        self.assertEqual(wheel.count_from(now), 0)
        # slots far apart (separate pages, both ends of the ring), one before the read time, one a turn late
        for offset_s, num in ((0, 3), (1, 4), (5_000, 2), (SLOTS_TOTAL * 2 - 2, 7), (-1, 100)):
            wheel.put(now + offset_s * 1000, 52, 104, num, 0)
        self.assertEqual(wheel.count_from(now), 3 + 4 + 2 + 7)  # written through the mapping, not yet synced
        extents = wheel._data_extents(SLOTS_TOTAL * 2 * 32)
        self.assertLess(sum(hi - lo for lo, hi in extents), SLOTS_TOTAL * 2 * 32 // 10)
        wheel.sync()
        wheel.close()
        wheel = TimerWheel(path, 1000)
        self.assertEqual(wheel.count_from(now), 16)
        whole = [(0, SLOTS_TOTAL * 2 * 32)]
        wheel._data_extents = lambda length: whole  # file systems without SEEK_DATA: the whole file
        self.assertEqual(wheel.count_from(now), 16)
        wheel.close()

    def test_log_units_blank_padding_recovery_and_last_unit(self) -> None:
        directory = os.path.join(self.root, "timerlog")
        log = TimerLog(directory, UNIT_SIZE * 3 + 20, self.pool)  # room for 3 units; the 4th goes to a new file
        positions = []
        for i in range(5):
            self.assertTrue(wait_ready(log))
            unit = UNIT.pack(UNIT_SIZE, positions[-1] if positions else -1, MAGIC_DEFAULT | (MAGIC_ROLL if i == 4 else 0),
                             1000 + i, 500, 4096 * i, 200, 7, 0)
            positions.append(log.append(unit))
        self.assertEqual(positions, [0, 52, 104, 176, 228])
        first = log.queue.files[0]
        self.assertEqual(struct.unpack_from(">iqi", first.mm, 156), (20, 0, BLANK_MAGIC))
        self.assertEqual(BLANK_MAGIC, struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ 1880681594))[0])
        self.assertEqual(log.unit(52)[5], 4096)
        self.assertEqual(log.last_unit_of(first)[5], 4096 * 2)
        # a torn unit after the last sound one is cut on recovery
        log.queue.files[-1].mm[104:116] = b"\x00\x00\x00\x34garbage!"  # at 280: a size, no magic
        log.close()
        again = TimerLog(directory, UNIT_SIZE * 3 + 20, self.pool)
        again.load()
        found = [(pos, unit[5]) for pos, unit in again.recover(0)]
        self.assertEqual(found, [(0, 0), (52, 4096), (104, 8192), (176, 12288), (228, 16384)])
        self.assertEqual(again.write_pos, 280)
        again.close()

    def test_checkpoint_page(self) -> None:
        path = os.path.join(self.root, "timercheck")
        check = TimerCheckpoint(path)
        check.set(last_read_time_ms=123_000, last_flush_pos=520, last_queue_offset=9, master_queue_offset=9, slot_done=2)
        check.sync()
        check.close()
        with open(path, "rb") as f:
            data = f.read()
        self.assertEqual(len(data), 4096)
        self.assertEqual(struct.unpack_from(">qqqq", data, 0), (123_000, 520, 9, 9))
        self.assertEqual(struct.unpack_from(">q", data, 56), (2,))
        self.assertEqual(TimerCheckpoint(path).slot_done, 2)

    def test_config_defaults_and_roll_window(self) -> None:
        cfg = TimerConfig.from_properties({})
        self.assertEqual((cfg.timerMaxDelaySec, cfg.timerPrecisionMs, cfg.timerRollWindowSlot, cfg.timerWheelEnable),
                         (259200, 1000, 172800, True))
        self.assertEqual(cfg.roll_window_slots, 172800)
        self.assertEqual(TimerConfig.from_properties({"timerRollWindowSlot": "1"}).roll_window_slots, SLOTS_TOTAL - 60)
        self.assertFalse(TimerConfig.from_properties({"timerWheelEnable": "false"}).timerWheelEnable)


def wait_ready(log: TimerLog) -> bool:
    """The next file is made in the pool thread: wait for it (a test may block)."""
    for _ in range(200):
        if log.ready():
            return True
        fut = log.queue.next_future()
        if fut is not None:
            fut.result(5)
    return log.ready()
