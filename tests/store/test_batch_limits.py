"""batch_limits is Java's isTheBatchFull: the limits it returns decide exactly as that rule does."""
from __future__ import annotations

import unittest

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtx.store.consume_queue import batch_limits


def java_is_the_batch_full(size: int, max_bytes: int, max_count: int, total: int, count: int, on_disk: bool,
                           memory_count: int, disk_bytes: int, disk_count: int) -> bool:
    """DefaultMessageStore.isTheBatchFull as 4.9.8 states it (counts there are maxTransferCount, here minus one)."""
    if total == 0 or count == 0:
        return False
    if max_count <= count:
        return True
    if on_disk:
        return total + size > disk_bytes or count > disk_count
    return total + size > max_bytes or count > memory_count


class BatchLimits(unittest.TestCase):
    @settings(max_examples=500, deadline=None)
    @given(st.integers(0, 5000), st.integers(1, 9000), st.integers(1, 64), st.integers(0, 9000), st.integers(0, 64),
           st.booleans(), st.integers(0, 64), st.integers(1, 9000), st.integers(0, 64))
    def test_limits_decide_as_is_the_batch_full(self, size, max_bytes, max_count, total, count, on_disk,
                                                memory_count, disk_bytes, disk_count) -> None:
        (mem_n, mem_b), (disk_n, disk_b) = batch_limits(max_count, max_bytes, memory_count, disk_bytes, disk_count)
        n, b = (disk_n, disk_b) if on_disk else (mem_n, mem_b)
        full = bool(total and count) and (count >= n or total + size > b)
        self.assertEqual(full, java_is_the_batch_full(size, max_bytes, max_count, total, count, on_disk,
                                                      memory_count, disk_bytes, disk_count))

    def test_defaults(self) -> None:
        # 32 messages per pull, maxTransferCountOnMessageInMemory 32 / InDisk 8, 256 KiB / 64 KiB
        self.assertEqual(batch_limits(32, 256 * 1024, 31, 64 * 1024, 7), ((32, 256 * 1024), (8, 64 * 1024)))
