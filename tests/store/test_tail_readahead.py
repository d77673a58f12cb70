"""The commit log file being written is mapped without readahead under SYNC_FLUSH (MappedFileQueue's
``tail_readahead``), and read as the other files once the next one takes over.

The kernel's own record of each mapping's advice is read back: the ``rr`` flag (random reads, no
readahead) of the mapping in /proc/self/smaps.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import tempfile

from twisted.trial import unittest

from rmqtx.store.mapped_file import MappedFileQueue

from .helpers import TempStore, msg

SIZE = 64 * 1024


def random_reads(mm: mmap.mmap) -> bool:
    """Whether the kernel maps ``mm`` for random reads (MADV_RANDOM: no readahead)."""
    view = ctypes.c_char.from_buffer(mm)
    addr = ctypes.addressof(view)
    del view  # the buffer export would keep the mapping from closing
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= addr < end
            elif inside and head == "VmFlags:":
                return "rr" in line.split()[1:]
    raise AssertionError(f"no mapping holds {addr:#x}")


def fill(queue: MappedFileQueue) -> None:
    queue.files[-1].wrote = SIZE


class TailReadaheadTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-tail-")
        self.addCleanup(self.tmp.cleanup)
        self.dir = os.path.join(self.tmp.name, "commitlog")

    def queue(self, **kw) -> MappedFileQueue:
        q = MappedFileQueue(self.dir, SIZE, **kw)
        self.addCleanup(q.close)
        return q

    def test_only_the_written_file_goes_without_readahead(self) -> None:
        q = self.queue(tail_readahead=False)
        first = q.last_for_write(0)
        self.assertTrue(random_reads(first.mm))
        fill(q)
        second = q.last_for_write(0)
        self.assertIsNot(first, second)
        self.assertFalse(random_reads(first.mm), "a full file is read with readahead again")
        self.assertTrue(random_reads(second.mm))

    def test_the_default_keeps_readahead_everywhere(self) -> None:
        q = self.queue()
        first = q.last_for_write(0)
        fill(q)
        second = q.last_for_write(0)
        self.assertFalse(random_reads(first.mm))
        self.assertFalse(random_reads(second.mm))

    def test_the_read_mode_switch_leaves_the_written_file_alone(self) -> None:
        q = self.queue(tail_readahead=False)
        first = q.last_for_write(0)
        fill(q)
        second = q.last_for_write(0)
        q.set_readahead(False)
        self.assertTrue(random_reads(first.mm))
        self.assertTrue(random_reads(second.mm))
        fill(q)
        third = q.last_for_write(0)
        self.assertTrue(random_reads(second.mm), "readahead is off: a full file stays without it")
        q.set_readahead(True)
        self.assertFalse(random_reads(first.mm))
        self.assertFalse(random_reads(second.mm))
        self.assertTrue(random_reads(third.mm))

    def reloaded(self) -> MappedFileQueue:
        """Three full files written, then the directory loaded again as at a restart."""
        q = self.queue(tail_readahead=False)
        for _ in range(3):
            q.last_for_write(0)
            fill(q)
        q.close()
        again = self.queue(tail_readahead=False)
        again.load()
        self.assertEqual(len(again.files), 3)
        return again

    def test_a_loaded_directory_maps_its_last_file_without_readahead(self) -> None:
        again = self.reloaded()
        self.assertEqual([random_reads(mf.mm) for mf in again.files], [False, False, True])

    def test_a_cut_tail_is_written_without_readahead(self) -> None:
        again = self.reloaded()
        again.truncate_dirty(SIZE + 100)  # recovery found the end inside the second file
        self.assertEqual(len(again.files), 2)
        self.assertEqual([random_reads(mf.mm) for mf in again.files], [False, True])


class FlushModeTest(unittest.TestCase):
    """The store asks for it under SYNC_FLUSH only, where every sync write-protects the tail's pages."""

    def tail_random(self, flush: str) -> bool:
        ts = TempStore(flush_disk_type=flush)
        self.addCleanup(ts.close)
        ts.store.commitlog.put_message(msg(), 1_700_000_000_001)
        return random_reads(ts.store.commitlog.queue.files[-1].mm)

    def test_sync_flush(self) -> None:
        self.assertTrue(self.tail_random("SYNC_FLUSH"))

    def test_async_flush(self) -> None:
        self.assertFalse(self.tail_random("ASYNC_FLUSH"))
