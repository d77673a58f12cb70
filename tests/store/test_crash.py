"""A writer killed with SIGKILL mid-stream: acknowledged messages survive, nothing corrupt is served."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest as pyunit

from twisted.trial import unittest

from rmqtx.common.message import parse_properties
from rmqtx.store import GetStatus, MessageStore, StoreConfig
from rmqtx.store.record import body_crc, decode_record
from rmqtx.store.tools import verify

from .helpers import REPO

try:
    from rmqtx import _accel  # the compiled committer, whether or not RMQTX_PURE_PYTHON turned it off
except ImportError:
    _accel = None

WRITER = os.path.join(os.path.dirname(__file__), "crash_writer.py")
SPARE_WRITER = os.path.join(os.path.dirname(__file__), "index_spare_writer.py")


def run_and_kill(root: str, flush_type: str, acks_wanted: int, twin: str = "") -> list[tuple[int, int, int]]:
    """Start the writer, SIGKILL it after acks_wanted acks; (seq, queueOffset, offset) of each ack.
    ``twin``: the group commit thread it uses (see crash_writer.py)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, WRITER, root, flush_type, twin], stdout=subprocess.PIPE, env=env,
                            cwd=REPO)
    acks = []
    deadline = time.monotonic() + 30  # a bound for a slow machine; 600 acks come well before
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.decode().split()
            if parts[0] == "ready":
                continue
            assert parts[1] == "PUT_OK", line
            acks.append((int(parts[0]), int(parts[3]), int(parts[4])))
            if len(acks) >= acks_wanted or time.monotonic() > deadline:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return acks


def open_store(root: str) -> MessageStore:
    store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=128 * 1024,
                                     mapped_file_size_consume_queue=400, max_hash_slot_num=64, max_index_num=256))
    store.load()
    return store


class CrashTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def _check_all_served(self, store: MessageStore) -> int:
        """Every message reachable through the consume queues is a whole, CRC-valid record."""
        n = 0
        for q in (0, 1):
            offset = store.get_min_offset_in_queue("K", q)
            while True:
                res = store.get_message("K", q, offset, 32)
                if res.status is not GetStatus.FOUND:
                    break
                for raw in res.messages:
                    rec = decode_record(raw)
                    self.assertEqual(body_crc(rec.body), rec.body_crc)
                    self.assertEqual(rec.queue_id, q)
                    seq = int(rec.body[6:12])
                    self.assertEqual(seq % 2, q)
                    self.assertEqual(rec.queue_offset, seq // 2)
                    n += 1
                offset = res.next_begin_offset
        return n

    @pyunit.skipIf(_accel is None, "rmqtx._accel not built (tests/remoting/test_accel.py says whether it should be)")
    def test_sync_flush_keeps_every_ack(self) -> None:
        self._sync_flush_keeps_every_ack("c")

    def test_sync_flush_keeps_every_ack_python_committer(self) -> None:
        self._sync_flush_keeps_every_ack("py")

    def _sync_flush_keeps_every_ack(self, twin: str) -> None:
        acks = run_and_kill(self.root, "SYNC_FLUSH", 600, twin)
        self.assertGreater(len(acks), 100)
        self.assertTrue(os.path.exists(os.path.join(self.root, "abort")))
        store = open_store(self.root)
        try:
            for seq, qo, offset in acks:
                raw = store.look_message_by_offset(offset)
                self.assertIsNotNone(raw, seq)
                rec = decode_record(raw)
                self.assertEqual(parse_properties(rec.properties)["UNIQ_KEY"], f"U{seq:08d}")
                self.assertEqual((rec.queue_id, rec.queue_offset), (seq % 2, qo))
                res = store.get_message("K", seq % 2, qo, 1)
                self.assertEqual(res.messages[0], raw)
            served = self._check_all_served(store)
            self.assertGreaterEqual(served, len(acks))
            last = max(acks)[0]
            self.assertEqual(len(store.query_message("K", f"key-{last}", 4, 0, 2**62)[0]), 1)
        finally:
            store.shutdown()
        report = verify(self.root)
        self.assertTrue(report["ok"], report)

    def test_async_flush_serves_nothing_corrupt(self) -> None:
        acks = run_and_kill(self.root, "ASYNC_FLUSH", 3000)
        self.assertGreater(len(acks), 100)
        store = open_store(self.root)
        try:
            self._check_all_served(store)
            # the store keeps working after recovery
            self.assertTrue(open_store_put_ok(store))
        finally:
            store.shutdown()
        summary = verify(self.root)
        self.assertTrue(summary["ok"], summary)
        self.assertEqual(summary["undispatchedRecords"], 0)

    def test_torn_tail_is_cut(self) -> None:
        run_and_kill(self.root, "ASYNC_FLUSH", 300)
        cl_dir = os.path.join(self.root, "commitlog")
        store = open_store(self.root)
        end = store.max_phy_offset
        store.shutdown()
        last = f"{end - end % (128 * 1024):020d}"
        # simulate a torn write: garbage half a record long past the end, then a crash
        with open(os.path.join(cl_dir, last), "r+b") as f:
            f.seek(end - int(last))
            f.write(b"\x00\x00\x01\x00\xda\xa3\x20\xa7" + os.urandom(100))
        open(os.path.join(self.root, "abort"), "wb").close()
        store = open_store(self.root)
        try:
            self.assertEqual(store.max_phy_offset, end)
            with open(os.path.join(cl_dir, last), "rb") as f:
                f.seek(end - int(last))
                self.assertEqual(f.read(108), bytes(108))
            self._check_all_served(store)
        finally:
            store.shutdown()


class IndexSpareCrashTest(unittest.TestCase):
    def test_a_spare_index_file_left_by_a_crash_is_dropped_and_the_file_in_use_repaired(self) -> None:
        with tempfile.TemporaryDirectory() as root:
            env = dict(os.environ, PYTHONPATH=str(REPO))
            proc = subprocess.run([sys.executable, SPARE_WRITER, root], capture_output=True, env=env, cwd=REPO, timeout=60)
            self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stderr.decode())
            sent, in_use = proc.stdout.split()
            index_dir = os.path.join(root, "index")
            on_disk = sorted(os.listdir(index_dir))  # a full file, the file in use, and the empty spare
            self.assertEqual((len(on_disk), on_disk[1]), (3, in_use.decode()))
            store = open_store(root)
            try:
                self.assertEqual([f.name for f in store.index.files], on_disk[:2])
                self.assertNotIn(on_disk[2], os.listdir(index_dir))  # (a new spare may be in the making)
                for n in range(int(sent)):
                    self.assertEqual(len(store.query_message("S", f"k{n}", 4, 0, 2**62)[0]), 1, n)
                self.assertEqual(store.query_message("S", "torn", 4, 0, 2**62)[0], [])
            finally:
                store.shutdown()
            report = verify(root)
            self.assertTrue(report["ok"], report)


def open_store_put_ok(store: MessageStore) -> bool:
    from .helpers import msg, put_sync
    return put_sync(store, msg("K2", 0, b"after crash")).ok
