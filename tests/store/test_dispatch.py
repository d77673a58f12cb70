"""One dispatch pipeline: puts, recovery and a replica's appends feed the same dispatchers the same requests."""
from __future__ import annotations

import os
import shutil
import tempfile

from twisted.trial import unittest

from rmqtx.common.sysflag import TRANSACTION_PREPARED
from rmqtx.store import BatchToStore, MessageStore
from rmqtx.store.dispatch_request import DispatchRequest
from rmqtx.store.record import encode_batch_body, java_hash
from rmqtx.store.replica import ReplicaAppender, read_for_transfer

from .helpers import msg, put_sync, read_cq, small_config


class Recorder:
    """A dispatcher that keeps what it is fed (the fields every writer must agree on)."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def dispatch(self, req: DispatchRequest) -> None:
        assert req.props is not None, "the pipeline hands every dispatcher parsed properties"
        self.seen.append((req.topic, req.queue_id, req.physical_offset, req.size, req.store_timestamp,
                          req.queue_offset, req.sys_flag & 0xC, req.properties, dict(req.props)))


def _open(root: str, recorder: Recorder, **kw) -> MessageStore:
    store = MessageStore(small_config(root, **kw))
    store.pipeline.add(recorder)  # before load: recovery dispatches through it too
    store.load()
    return store


class OnePipeline(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.mkdtemp(prefix="rmqtx-dispatch-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.master_root = os.path.join(tmp, "master")
        self.slave_root = os.path.join(tmp, "slave")
        self.put_seen = Recorder()
        store = _open(self.master_root, self.put_seen)
        for i in range(12):
            put_sync(store, msg("T", i % 2, body=b"m%d" % i, tags="TagA" if i % 3 else "TagB",
                                keys=f"k{i}", uniq=f"U{i:04d}"))
        put_sync(store, msg("T", 0, body=b"half", sys_flag=TRANSACTION_PREPARED))  # dispatched, no unit
        put_sync(store, BatchToStore(topic="T", queue_id=1, body=encode_batch_body(
            [(0, b"b1", "TAGS\x01TagB\x02KEYS\x01kb"), (0, b"b2", "TAGS\x01TagA")]),
            sys_flag=0, born_timestamp=1_700_000_000_000, born_host=("10.0.0.1", 1),
            store_host=("127.0.0.1", 10911)))
        store.wait_for_file_jobs()
        self.units = {q: read_cq(self.master_root, "T", q) for q in (0, 1)}
        self.end = store.max_phy_offset
        store.shutdown()

    def test_recovery_feeds_what_the_puts_fed(self) -> None:
        for sub in ("consumequeue", "index", "checkpoint"):
            path = os.path.join(self.master_root, sub)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
        seen = Recorder()
        store = _open(self.master_root, seen)
        self.addCleanup(store.shutdown)
        self.assertEqual(len(self.put_seen.seen), 15)
        self.assertEqual(seen.seen, self.put_seen.seen)
        store.wait_for_file_jobs()
        self.assertEqual({q: read_cq(self.master_root, "T", q) for q in (0, 1)}, self.units)
        got = store.query_message("T", "kb", 4, 0, 1 << 62)[0]
        self.assertEqual(len(got), 1)

    def test_replica_feeds_what_the_puts_fed(self) -> None:
        seen = Recorder()
        slave = _open(self.slave_root, seen, broker_role="SLAVE")
        self.addCleanup(slave.shutdown)
        master = MessageStore(small_config(self.master_root))
        master.load()
        self.addCleanup(master.shutdown)
        appender = ReplicaAppender(slave)
        offset = 0
        while offset < self.end:  # in pieces that cut records, as transfers do
            chunk = read_for_transfer(master, offset, 97)
            self.assertIsNone(appender.append(offset, chunk))
            offset += len(chunk)
        self.assertEqual(seen.seen, self.put_seen.seen)
        slave.wait_for_file_jobs()
        self.assertEqual({q: read_cq(self.slave_root, "T", q) for q in (0, 1)}, self.units)
        tags_a = java_hash("TagA")
        self.assertIn(tags_a, [u[2] for u in self.units[1]])
