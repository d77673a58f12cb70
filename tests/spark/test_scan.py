"""The Spark-free scanning core: record walking, boundary finding, property splitting."""
from __future__ import annotations

import os
import tempfile
import unittest

from rmqtx.common.message import parse_properties
from rmqtx.store import record as R

from .support import NO_ARROW, requires_arrow

if not NO_ARROW:
    import numpy as np
    import pyarrow as pa

    from rmqtx.spark import columns as C
    from rmqtx.spark import scan as S

BASE = 1 << 20


def build_file(path: str, bodies: list[bytes], size: int = 64 * 1024) -> list[int]:
    """A commit log file of records with these bodies, then a blank filler; returns the starts."""
    out = bytearray(size)
    pos = 0
    starts = []
    for i, body in enumerate(bodies):
        rec = R.encode_record(0, 0, 0, i, BASE + pos, 1, ("10.0.0.1", 1), 2, ("127.0.0.1", 10911), 0, 0,
                              body, "T", "TAGS\x01t")
        out[pos:pos + len(rec)] = rec
        starts.append(pos)
        pos += len(rec)
    R.SIZE_MAGIC.pack_into(out, pos, size - pos, R.BLANK_MAGIC)
    with open(path, "wb") as fh:
        fh.write(out)
    return starts


@requires_arrow
class WalkTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, f"{BASE:020d}")

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def walk(self, until: int | None = None):
        mm, buf = S.open_map(self.path)
        return S.walk(mm, buf, 0, len(mm) if until is None else until)

    def test_runs_of_equal_sizes_and_changes(self) -> None:
        sizes = [10] * 9 + [11] + [10] * 20 + [3, 3, 3, 3, 3, 3, 4] + list(range(40))
        starts = build_file(self.path, [b"x" * n for n in sizes])
        got, pos, end = self.walk()
        self.assertEqual(got.tolist(), starts)
        self.assertEqual(end, "blank")

    def test_stops_before_until_and_resumes(self) -> None:
        starts = build_file(self.path, [b"y" * 20] * 50)
        got, pos, end = self.walk(until=starts[30] + 1)
        self.assertEqual((got.tolist(), pos, end), (starts[:31], starts[31], None))

    def test_torn_record_ends_the_walk(self) -> None:
        starts = build_file(self.path, [b"z" * 20] * 12)
        with open(self.path, "r+b") as fh:
            fh.seek(starts[8] + 4)
            fh.write(b"\0\0\0\1")
        got, pos, end = self.walk()
        self.assertEqual((got.tolist(), pos, end), (starts[:8], starts[8], "torn"))

    def test_boundary_search_skips_magic_inside_bodies(self) -> None:
        fake = R.SIZE_MAGIC.pack(100, R.MESSAGE_MAGIC) * 4
        starts = build_file(self.path, [fake * 5] * 6)
        mm, _ = S.open_map(self.path)
        self.assertEqual(S.find_record_start(mm, 10, 60_000, BASE), starts[1])
        self.assertEqual(S.find_record_start(mm, starts[2], 60_000, BASE), starts[2])
        self.assertIsNone(S.find_record_start(mm, starts[-1] + 1, starts[-1] + 50, BASE))


@requires_arrow
class ColumnsTest(unittest.TestCase):
    def test_binary_segments_short_and_long(self) -> None:
        buf = np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyz", np.uint8)
        pos = np.array([0, 5, 10, 30, 36], np.int64)
        length = np.array([3, 0, 20, 6, 0], np.int64)
        self.assertEqual(C.binary_segments(buf, pos, length).to_pylist(),
                         [b"012", b"", b"abcdefghijklmnopqrst", b"uvwxyz", b""])

    def test_properties_split_like_java(self) -> None:
        props = pa.array(["a\x01b\x02c\x01d", "", "k\x01", "k\x01v\x01", "x\x01y\x01z\x02\x01v", "u\x01\x02w\x01z\x02"])
        names, values, owner = C.split_properties(props)
        pairs = list(zip(owner.tolist(), names.to_pylist(), values.to_pylist()))
        self.assertEqual(pairs, [(0, "a", "b"), (0, "c", "d"), (3, "k", "v"), (4, "", "v"), (5, "w", "z")])
        for i, s in enumerate(props.to_pylist()):
            self.assertEqual({n: v for o, n, v in pairs if o == i}, parse_properties(s))


@requires_arrow
class QueueFileTest(unittest.TestCase):
    def test_preallocated_queue_file_yields_nothing(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "0" * 20)
            with open(path, "wb") as fh:
                fh.write(bytes(600))
            self.assertEqual(len(S.read_queue_units(path)), 0)
            self.assertEqual(list(S.scan_queue_file(path, [], S.ScanOptions())), [])
