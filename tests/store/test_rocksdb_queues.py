"""storeType=defaultRocksDB: consume-queue units in RocksDB (the rocksdb extra), keyed as Apache 5.x keys
them, behind the consume-queue interface the dispatcher and the pull path use; a crash loses only
units the commit log gives back."""
from __future__ import annotations

import os
import shutil
import struct
import time

from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.store import GetStatus
from rmqtx.store.cq_rocksdb import CHECKPOINT_TOPIC, VALUE, offset_key, rocksdict, topic_prefix, unit_key
from rmqtx.store.mapped_file import StoreError
from rmqtx.store.record import decode_record
from testkit.standalone import Standalone
from tests.broker.wire import pull, send

from .helpers import TempStore, msg, put_sync

if rocksdict is None:  # pragma: no cover - the rocksdb extra is part of the test install
    raise unittest.SkipTest("the rocksdb extra (rocksdict) is not installed")

TOPICS = 12
QUEUES = 8


def body_of(topic: str, queue_id: int, n: int) -> bytes:
    return f"{topic}/{queue_id}/{n}".encode()


def crash(store) -> None:
    """Stop a store as kill -9 would: no write of waiting units, no checkpoint, the abort file left."""
    rocks = store.rocks
    rocks._thread.shutdown(wait=True)
    rocks.offsets.close()
    rocks.db.close()
    store._running = False
    store._allocator.shutdown(wait=True)
    store._release_lock()


class RocksStoreTest(unittest.TestCase):
    def setUp(self) -> None:
        self.ts = TempStore(store_type="defaultRocksDB", mapped_file_size_commit_log=256 * 1024)
        self.addCleanup(self.ts.close)

    def bodies(self, store, topic: str, q: int) -> list[bytes]:
        out: list[bytes] = []
        offset = store.get_min_offset_in_queue(topic, q)
        while offset < store.get_max_offset_in_queue(topic, q):
            r = store.get_message(topic, q, offset, 32)
            self.assertEqual(r.status, GetStatus.FOUND, (topic, q, offset))
            out.extend(decode_record(m).body for m in r.messages)
            offset = r.next_begin_offset
        return out

    def test_keys_restart_and_crash(self) -> None:
        store = self.ts.store
        for i in range(120):
            self.assertEqual(put_sync(store, msg("K", i % 3, body_of("K", i % 3, i // 3))).status.name, "PUT_OK")
        expect = {q: [body_of("K", q, n) for n in range(40)] for q in range(3)}
        self.assertEqual({q: self.bodies(store, "K", q) for q in range(3)}, expect)  # read from memory
        store.shutdown()
        self.ts.store = store = self.ts.open()
        # Apache 5.x's keys: the units, the queue's max entry, the checkpoint
        raw = store.rocks.db.get(unit_key(topic_prefix("K"), 1, 39))
        phys, size, _, store_ts = VALUE.unpack(raw)
        self.assertEqual(decode_record(store.commitlog.read(phys, size)).body, body_of("K", 1, 39))
        self.assertEqual(struct.unpack(">qq", store.rocks.offsets.get(offset_key(topic_prefix("K"), b"max", 1))),
                         (phys, 39))
        self.assertEqual(store.rocks.built, store.commitlog.max_offset)
        self.assertIsNotNone(store.rocks.offsets.get(offset_key(topic_prefix(CHECKPOINT_TOPIC), b"max", 0)))
        self.assertEqual({q: self.bodies(store, "K", q) for q in range(3)}, expect)
        # more units, only in memory when the crash comes: recovery gives them back from the commit log
        for i in range(120, 150):
            put_sync(store, msg("K", i % 3, body_of("K", i % 3, i // 3)))
        crash(store)
        self.ts.store = store = self.ts.open()
        expect = {q: [body_of("K", q, n) for n in range(50)] for q in range(3)}
        self.assertEqual({q: self.bodies(store, "K", q) for q in range(3)}, expect)
        self.assertEqual(put_sync(store, msg("K", 0, b"next")).queue_offset, 50)
        store.delete_topics({"K"})
        store.shutdown()
        self.ts.store = store = self.ts.open()
        self.assertNotIn(("K", 0), store.consume_queues)

    def test_file_store_directory_refused(self) -> None:
        self.ts.store.shutdown()
        shutil.rmtree(os.path.join(self.ts.root, "consumequeue"))
        self.ts.kw["store_type"] = "default"
        self.ts.store = self.ts.open()
        put_sync(self.ts.store, msg("T", 0, b"in a file queue"))
        self.ts.store.shutdown()
        self.ts.kw["store_type"] = "defaultRocksDB"
        with self.assertRaisesRegex(StoreError, "holds consume queue files"):
            self.ts.open()
        self.ts.kw["store_type"] = "default"
        self.ts.store = self.ts.open()


class RocksBrokerTest(unittest.TestCase):
    """A real broker with storeType=defaultRocksDB: sends, pulls, a clean restart and a kill -9."""

    timeout = 180

    def setUp(self) -> None:
        self.server = Standalone({"storeType": "defaultRocksDB"})
        self.addCleanup(self.server.close)
        self.server.start(timeout=60)

    def topics(self) -> list[str]:
        return [f"RocksQ_{i:02d}" for i in range(TOPICS)]

    async def send_round(self, n: int) -> None:
        client = RemotingClient()
        try:
            sends = [defer.ensureDeferred(send(client, self.server.broker, t, body_of(t, q, n), queue_id=q))
                     for t in self.topics() for q in range(QUEUES)]
            answers = await defer.gatherResults(sends, consumeErrors=True)
        finally:
            await client.close()
        self.assertEqual({a.code for a in answers}, {ResponseCode.SUCCESS})
        self.assertEqual({int(a.ext_fields["queueOffset"]) for a in answers}, {n})

    async def read_back(self, rounds: int) -> None:
        client = RemotingClient()
        try:
            for t in self.topics():
                for q in range(QUEUES):
                    resp, records = await pull(client, self.server.broker, t, q, 0)
                    self.assertEqual(resp.code, ResponseCode.SUCCESS, f"{t}/{q}: {resp.remark}")
                    self.assertEqual([r.body for r in records], [body_of(t, q, n) for n in range(rounds)])
                    got = await client.invoke(self.server.broker, RemotingCommand.request(
                        RequestCode.GET_MAX_OFFSET, {"topic": t, "queueId": q}))
                    self.assertEqual(got.ext_fields["offset"], str(rounds))
        finally:
            await client.close()

    async def scenario(self) -> None:
        for t in self.topics():
            self.server.create_topic(t, QUEUES)
        await self.send_round(0)
        await self.read_back(1)
        self.assertTrue(self.server.stop(), self.server.log())
        cq_dir = self.server.root / "store" / "consumequeue"
        self.assertTrue((cq_dir / "CURRENT").exists())  # a RocksDB database, no queue directories
        self.assertFalse([p for p in cq_dir.iterdir() if p.is_dir() and p.name.startswith("RocksQ")])
        self.server.start(timeout=60)
        await self.read_back(1)
        await self.send_round(1)
        assert self.server.proc is not None
        self.server.proc.kill()  # at once: the last units may not be in the database yet
        self.server.proc.wait()
        self.server.start(timeout=60)
        await self.read_back(2)

    def test_send_pull_restart_kill(self):
        return defer.ensureDeferred(self.scenario())


class RocksRetentionTest(unittest.TestCase):
    """Commit-log files deleted: each queue's first readable unit moves past their records, and stays so."""

    def setUp(self) -> None:
        self.now = time.time()
        self.ts = TempStore(store_type="defaultRocksDB")
        self.addCleanup(self.ts.close)
        self.ts.store.shutdown()
        self.ts.store = self.ts.open(clock=lambda: self.now)

    def test_expired(self) -> None:
        store = self.ts.store
        for i in range(300):
            put_sync(store, msg("R", i % 2, os.urandom(900)))
        store.flush.flush_commit_log_now()
        self.now += 73 * 3600
        store.run_retention_now()
        min_phy = store.min_phy_offset
        self.assertGreater(min_phy, 0)
        for q in (0, 1):
            lo = store.get_min_offset_in_queue("R", q)
            self.assertGreater(lo, 0)
            r = store.get_message("R", q, lo, 1)
            self.assertEqual(r.status, GetStatus.FOUND)
            self.assertGreaterEqual(decode_record(r.messages[0]).physical_offset, min_phy)
            self.assertEqual(store.get_message("R", q, 0, 1).status, GetStatus.OFFSET_TOO_SMALL)
        lows = {q: store.get_min_offset_in_queue("R", q) for q in (0, 1)}
        store.shutdown()
        self.ts.store = store = self.ts.open(clock=lambda: self.now)
        self.assertEqual({q: store.get_min_offset_in_queue("R", q) for q in (0, 1)}, lows)
        self.assertEqual(store.get_max_offset_in_queue("R", 1), 150)
