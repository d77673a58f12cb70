"""A new store's files are sparse, as Java's are, unless warmMapedFileEnable=true reserves their blocks."""

from __future__ import annotations

import os
import unittest
from pathlib import Path

from testkit.standalone import Standalone
from testkit.ha import wait_until

GIB = 1024**3


def disk_use(root: Path) -> tuple[int, int]:
    """(bytes allocated on disk, apparent bytes) of every file under root."""
    used = apparent = 0
    for path in root.rglob("*"):
        try:
            st = path.stat()
        except FileNotFoundError:  # a file being made under a temporary name was just renamed
            continue
        if path.is_file():
            used += st.st_blocks * 512
            apparent += st.st_size
    return used, apparent


class SparseStoreTest(unittest.TestCase):
    def run_standalone(self, conf: dict[str, str]) -> Standalone:
        server = Standalone(conf)
        self.addCleanup(server.close)
        server.start()
        server.create_topic("T_sparse")
        server.send_to_queue("T_sparse", 0, "one message")
        return server

    def test_default_store_is_small_on_disk(self) -> None:
        """Java's default sizes (1 GiB commit log, 420 MB index file) take a few MB, not 2.5 GB."""
        server = self.run_standalone({"mappedFileSizeCommitLog": str(GIB)})
        commitlog = server.root / "store" / "commitlog" / f"{0:020d}"
        self.assertEqual(commitlog.stat().st_size, GIB)
        index = server.root / "store" / "index"
        # the index file is made in the store's file thread, so it may appear a moment after the send's answer
        wait_until(lambda: any(p.stat().st_size > 400 * 1024**2 for p in index.glob("*")) if index.is_dir() else False,
                   30, "the full-size index file")
        used, apparent = disk_use(server.root / "store")
        self.assertGreater(apparent, GIB + 400 * 1024**2)  # the commit log and a full-size index file
        self.assertLess(used, 64 * 1024**2, f"{used} bytes allocated for one message")
        self.assertTrue(server.stop())

    def test_warm_maped_file_enable_reserves_blocks(self) -> None:
        size = 64 * 1024**2
        server = self.run_standalone({"mappedFileSizeCommitLog": str(size), "warmMapedFileEnable": "true"})
        commitlog = server.root / "store" / "commitlog" / f"{0:020d}"
        self.assertGreaterEqual(commitlog.stat().st_blocks * 512, size)
        self.assertTrue(server.stop())
        self.assertEqual(os.path.getsize(commitlog), size)
