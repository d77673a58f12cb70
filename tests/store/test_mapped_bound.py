"""mappedConsumeQueueFilesMax: consume-queue files are mapped on use, at most that many stay mapped,
idle queues are unmapped by the sweep, and a restart reads the files' ends without mapping them."""
from __future__ import annotations

from twisted.trial import unittest

from rmqtx.store import GetStatus
from rmqtx.store.record import decode_record

from .helpers import TempStore, msg, put_sync

LIMIT = 3
UNITS_PER_FILE = 400  # more than the 4 KB first read holds (204 units): the restart's binary search runs
QUEUES = 10
FULL = 550  # queue 0: one full file and part of a second


def body(q: int, i: int) -> bytes:
    return f"{q}:{i}".encode()


class MappedBoundTest(unittest.TestCase):
    def setUp(self) -> None:
        self.ts = TempStore(mapped_file_size_consume_queue=UNITS_PER_FILE * 20,
                            mapped_file_size_commit_log=1024 * 1024, mapped_consume_queue_files_max=LIMIT)
        self.addCleanup(self.ts.close)

    @property
    def store(self):
        return self.ts.store

    def mapped_files(self) -> int:
        return sum(1 for cq in self.store.consume_queues.values() for mf in cq.queue.files if mf.mm is not None)

    def counts(self) -> dict[int, int]:
        return {q: FULL if q == 0 else 1 + q % 4 for q in range(QUEUES)}

    def fill(self) -> None:
        counts = self.counts()
        for i in range(max(counts.values())):
            for q, n in counts.items():
                if i < n:
                    self.assertEqual(put_sync(self.store, msg("B", q, body(q, i))).status.name, "PUT_OK")
        self.check_bound()

    def check_bound(self) -> None:
        if self.store.cq_maps is not None:
            self.assertLessEqual(self.mapped_files(), LIMIT + 1)  # a new queue's file counts once made

    def check_all(self) -> None:
        for q, n in self.counts().items():
            self.assertEqual(self.store.get_max_offset_in_queue("B", q), n, q)
            self.assertEqual(self.store.get_min_offset_in_queue("B", q), 0, q)
            got: list[bytes] = []
            offset = 0
            while offset < n:
                r = self.store.get_message("B", q, offset, 32)
                self.assertEqual(r.status, GetStatus.FOUND, (q, offset))
                got.extend(decode_record(m).body for m in r.messages)
                offset = r.next_begin_offset
            self.assertEqual(got, [body(q, i) for i in range(n)], q)
            self.check_bound()

    def test_bound_sweep_and_restart(self) -> None:
        self.fill()
        self.check_all()
        maps = self.store.cq_maps
        maps.sweep()  # clears the use marks
        maps.sweep()  # nothing used since: everything unmapped
        self.assertEqual(self.mapped_files(), 0)
        self.assertEqual(maps.files, 0)
        self.check_all()  # mapped again on use
        self.store.shutdown()
        self.ts.store = self.ts.open()
        self.assertEqual(self.mapped_files(), 0)  # recovery read the ends, mapped nothing
        self.assertEqual(len(self.store.consume_queues[("B", 0)].queue.files), 2)
        self.check_all()
        # and the queues go on from where they were
        self.assertEqual(put_sync(self.store, msg("B", 0, b"more")).queue_offset, FULL)
        self.assertEqual(put_sync(self.store, msg("B", 5, b"more")).queue_offset, self.counts()[5])

    def test_no_bound_maps_everything(self) -> None:
        self.store.shutdown()
        self.ts.kw["mapped_consume_queue_files_max"] = 0
        self.ts.store = self.ts.open()
        self.assertIsNone(self.store.cq_maps)
        self.fill()
        self.store.shutdown()
        self.ts.store = self.ts.open()
        self.assertEqual(self.mapped_files(), sum(len(cq.queue.files) for cq in self.store.consume_queues.values()))
        self.check_all()
