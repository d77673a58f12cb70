"""Consume queue ext files: RocketMQ's layout checked with an independent reader, recovery, truncation, retention."""
from __future__ import annotations

import os
import struct
import time

from twisted.trial import unittest

from rmqtx.store import GetStatus, MessageFilter, MessageStore
from rmqtx.store.record import decode_record, java_hash
from rmqtx.store.tools import verify

from .helpers import TempStore, msg, put_sync, read_cq, small_config

LONG_MIN = -(1 << 63)
EXT_FILE = 256  # 7 units of 34 bytes, then the closing -1
BITMAP = bytes(range(1, 15))  # 112 bits, the broker default's map size


def read_ext(root: str, topic: str, qid: int) -> dict[int, tuple[int, int, int, bytes]]:
    """Every unit by real offset: (size, tagsCode, msgStoreTime, bitmap), walking each file to its end mark."""
    d = os.path.join(root, "consumequeue_ext", topic, str(qid))
    units = {}
    for name in sorted(os.listdir(d)):
        assert len(name) == 20 and name.isdigit(), name
        data = open(os.path.join(d, name), "rb").read()
        base, pos = int(name), 0
        while pos + 2 <= len(data):
            (size,) = struct.unpack_from(">h", data, pos)
            if size <= 0:
                break
            tags, store_time, bm_size = struct.unpack_from(">qqh", data, pos + 2)
            assert size == 20 + bm_size
            units[base + pos] = (size, tags, store_time, data[pos + 20:pos + 20 + bm_size])
            pos += size
    return units


def calc(topic: str, props: dict[str, str]) -> bytes | None:
    return BITMAP if props.get("a") == "1" else None


class ExtLayoutTest(unittest.TestCase):
    def setUp(self) -> None:
        self.ts = TempStore(enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=EXT_FILE)
        self.store = self.ts.store
        self.store.set_bitmap_calculator(calc)

    def tearDown(self) -> None:
        self.ts.close()

    def _put(self, n: int, topic: str = "T", start: int = 0) -> list:
        return [put_sync(self.store, msg(topic, 0, b"%d" % i, tags=f"Tag{i % 3}", extra={"a": str(i % 2)}))
                for i in range(start, start + n)]

    def test_java_layout_and_addresses(self) -> None:
        results = self._put(20)
        self.store.shutdown()
        root = self.ts.root
        cq = read_cq(root, "T", 0)
        ext = read_ext(root, "T", 0)
        names = sorted(os.listdir(os.path.join(root, "consumequeue_ext", "T", "0")))
        self.assertEqual(names, [f"{i * EXT_FILE:020d}" for i in range(3)])  # 540 bytes of units
        self.assertEqual(len(cq), 20)
        reals = []
        for i, ((phy, size, tag), res) in enumerate(zip(cq, results)):
            self.assertEqual((phy, size), (res.wrote_offset, res.wrote_bytes))
            self.assertLess(tag, -(1 << 31))  # an ext address, never a tags hash
            real = tag - LONG_MIN
            reals.append(real)
            self.assertEqual(ext[real], (20 + (14 if i % 2 else 0), java_hash(f"Tag{i % 3}"), res.store_timestamp,
                                         BITMAP if i % 2 else b""))
        self.assertEqual(sorted(reals), sorted(ext))
        first = open(os.path.join(root, "consumequeue_ext", "T", "0", f"{0:020d}"), "rb").read()
        end = max(r for r in reals if r < EXT_FILE)
        end += ext[end][0]
        self.assertEqual(first[end:end + 2], b"\xff\xff")  # the file was closed, not split
        self.assertTrue(verify(root)["ok"])
        self.assertEqual(verify(root)["consumeQueueExtUnits"], 20)

    def test_filters_see_real_tags_and_ext_unit(self) -> None:
        results = self._put(10)  # one consume queue file: a pull stops at its end
        seen = []

        class WithBits(MessageFilter):
            by_tags_only = False

            def matches_unit(self, tags_code, ext):
                seen.append((tags_code, ext.store_time, ext.bitmap))
                return ext.bitmap is not None

        r = self.store.get_message("T", 0, 0, 32, WithBits())
        self.assertEqual([decode_record(m).body for m in r.messages], [b"%d" % i for i in range(1, 10, 2)])
        self.assertEqual(seen, [(java_hash(f"Tag{i % 3}"), results[i].store_timestamp, BITMAP if i % 2 else None)
                                for i in range(10)])
        want = java_hash("Tag0")
        r = self.store.get_message("T", 0, 0, 32, MessageFilter({want}))
        self.assertEqual([decode_record(m).body for m in r.messages], [b"0", b"3", b"6", b"9"])

    def test_restart_continues_after_last_unit(self) -> None:
        self._put(9)
        self.store.shutdown()
        self.store = self.ts.store = self.ts.open()
        self.store.set_bitmap_calculator(calc)
        self._put(9, start=9)
        self.store.shutdown()
        ext = read_ext(self.ts.root, "T", 0)
        self.assertEqual(sorted(t - LONG_MIN for _, _, t in read_cq(self.ts.root, "T", 0)), sorted(ext))
        self.assertEqual(len(ext), 18)
        self.assertTrue(verify(self.ts.root)["ok"])
        self.store = self.ts.store = self.ts.open()
        class WithBits(MessageFilter):
            by_tags_only = False

            def matches_unit(self, tags_code, ext):
                return ext.bitmap is not None

        r = self.store.get_message("T", 0, 0, 32, WithBits())
        r2 = self.store.get_message("T", 0, r.next_begin_offset, 32, WithBits())
        self.assertEqual(len(r.messages) + len(r2.messages), 9)

    def test_torn_commit_log_cuts_queue_and_ext_together(self) -> None:
        results = self._put(20)
        self.store.shutdown()
        victim = results[15]
        path = os.path.join(self.ts.root, "commitlog", f"{0:020d}")
        with open(path, "r+b") as f:  # break the record's magic code
            f.seek(victim.wrote_offset + 4)
            f.write(b"\x12\x34\x56\x78")
        self.store = self.ts.store = self.ts.open()
        cq = self.store.consume_queues[("T", 0)]
        self.assertEqual(cq.max_offset, 15)
        last_real = cq.unit_at(14)[2] - LONG_MIN
        unit = cq.ext.get(cq.unit_at(14)[2])
        self.assertEqual(cq.ext.queue.max_offset, last_real + unit.size)
        self.store.set_bitmap_calculator(calc)
        self._put(1, start=100)
        self.assertEqual(cq.unit_at(15)[2] - LONG_MIN, last_real + unit.size)
        self.store.shutdown()
        ext = read_ext(self.ts.root, "T", 0)
        self.assertEqual(len(ext), 16)  # the cut units were zeroed, not left behind
        summary = verify(self.ts.root)
        self.assertTrue(summary["ok"], summary)

    def test_unresolvable_address_matches_and_verify_reports_it(self) -> None:
        self._put(4)
        cq = self.store.consume_queues[("T", 0)]
        addr = cq.unit_at(1)[2]
        mf = cq.ext.queue.find(addr - LONG_MIN)
        pos = addr - LONG_MIN - mf.from_offset
        mf.mm[pos:pos + 2] = b"\0\0"
        r = self.store.get_message("T", 0, 0, 32, MessageFilter(()))
        self.assertEqual([decode_record(m).body for m in r.messages], [b"1"])  # unknown tags code: Java lets it through
        self.store.flush.flush_all_now()
        self.assertEqual(verify(self.ts.root)["errors"], {"consumequeue_ext_unresolved": 1})

    def test_reopened_without_ext_lets_tag_filter_through(self) -> None:
        self._put(3)
        self.store.shutdown()
        self.store = self.ts.store = MessageStore(small_config(self.ts.root))
        self.store.load()
        r = self.store.get_message("T", 0, 0, 32, MessageFilter(()))
        self.assertEqual(len(r.messages), 3)


class ExtOffTest(unittest.TestCase):
    def test_byte_identical_without_ext(self) -> None:
        ts = TempStore()
        self.addCleanup(ts.close)
        ts.store.set_bitmap_calculator(calc)  # ignored without enableConsumeQueueExt
        results = [put_sync(ts.store, msg("T", 0, b"%d" % i, tags=f"Tag{i % 3}", extra={"a": "1"})) for i in range(25)]
        ts.store.shutdown()
        expected = b"".join(struct.pack(">qiq", r.wrote_offset, r.wrote_bytes, java_hash(f"Tag{i % 3}"))
                            for i, r in enumerate(results))
        d = os.path.join(ts.root, "consumequeue", "T", "0")
        data = b"".join(open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)))
        self.assertEqual(data[:len(expected)], expected)
        self.assertEqual(data[len(expected):], bytes(len(data) - len(expected)))
        self.assertFalse(os.path.exists(os.path.join(ts.root, "consumequeue_ext")))


class ExtRetentionTest(unittest.TestCase):
    def setUp(self) -> None:
        self.now = time.time()
        self.ts = TempStore(enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=EXT_FILE)
        self.ts.store.shutdown()
        self.store = self.ts.store = self.ts.open(clock=lambda: self.now)

    def tearDown(self) -> None:
        self.ts.close()

    def test_ext_files_go_with_their_queue(self) -> None:
        for i in range(300):
            put_sync(self.store, msg("R", 0, os.urandom(900)))
        self.store.flush.flush_commit_log_now()
        self.now += 73 * 3600
        self.store.run_retention_now()
        cq = self.store.consume_queues[("R", 0)]
        lo = cq.min_offset
        self.assertGreater(lo, 0)
        first_live = cq.unit_at(lo)[2] - LONG_MIN
        files = cq.ext.queue.files
        self.assertGreater(files[0].from_offset, 0)
        self.assertGreaterEqual(files[0].end_offset, first_live)
        self.store.wait_for_file_jobs()
        names = sorted(os.listdir(os.path.join(self.ts.root, "consumequeue_ext", "R", "0")))
        self.assertEqual(names[0], os.path.basename(files[0].path))
        r = self.store.get_message("R", 0, lo, 32, MessageFilter({java_hash("TagA")}))
        self.assertEqual(r.status, GetStatus.FOUND)
        self.store.shutdown()
        self.assertTrue(verify(self.ts.root)["ok"])
        self.store = self.ts.store = self.ts.open()
        self.assertEqual(self.store.consume_queues[("R", 0)].min_offset, lo)
