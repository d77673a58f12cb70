"""Store behaviour on files it writes itself, checked with an independent reader where it matters."""
from __future__ import annotations

import errno
import os
import struct
import threading
import time
import unittest as pyunit

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from rmqtx.store import (BatchToStore, GetStatus, MessageFilter, MessageStore, PutStatus, StoreLockedError)
from rmqtx.store import mapped_file
from rmqtx.store.committer import PyCommitter
from rmqtx.store.record import decode_record, encode_batch_body, java_hash
from rmqtx.store.replica import truncate_log
from rmqtx.store.times import TIME_AT_SYNC, bucket

from tests.client.support import wait_until

from .helpers import TempStore, msg, put_sync, read_cq, small_config

try:
    from rmqtx import _accel  # the compiled committer, whether or not RMQTX_PURE_PYTHON turned it off
except ImportError:
    _accel = None

MAGIC = 0xDAA320A7
BLANK = 0xCBD43194


def read_commit_log(directory: str) -> tuple[list[dict], list[tuple[int, int]]]:
    """Independent reader straight from REFERENCE.md's layout: (records, blanks as (offset, size))."""
    out, blanks = [], []
    for name in sorted(os.listdir(directory)):
        data = open(os.path.join(directory, name), "rb").read()
        base, pos = int(name), 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic == BLANK:
                blanks.append((base + pos, total))
                assert pos + total == len(data)
                break
            if magic != MAGIC:
                break
            crc, qid, flag, qoff, phys, sysflag, born_ts = struct.unpack_from(">iiiqqiq", data, pos + 8)
            p = pos + 48
            hl = 20 if sysflag & 0x10 else 8
            born = data[p:p + hl - 4]
            (born_port,) = struct.unpack_from(">i", data, p + hl - 4)
            p += hl
            (store_ts,) = struct.unpack_from(">q", data, p)
            p += 8
            sl = 20 if sysflag & 0x20 else 8
            store_host = data[p:p + sl - 4]
            p += sl
            reconsume, prep, body_len = struct.unpack_from(">iqi", data, p)
            p += 16
            body = data[p:p + body_len]
            p += body_len
            tlen = data[p]
            topic = data[p + 1:p + 1 + tlen].decode()
            p += 1 + tlen
            (plen,) = struct.unpack_from(">h", data, p)
            props = data[p + 2:p + 2 + plen].decode()
            p += 2 + plen
            assert p - pos == total, (p - pos, total)
            import zlib
            assert crc == zlib.crc32(body) & 0x7FFFFFFF
            out.append(dict(offset=base + pos, size=total, topic=topic, queue_id=qid, queue_offset=qoff,
                            phys=phys, sys_flag=sysflag, born=born, born_port=born_port, store=store_host,
                            store_ts=store_ts, body=body, props=props, flag=flag, reconsume=reconsume))
            pos += total
    return out, blanks


class WriteReadTest(unittest.TestCase):
    def setUp(self) -> None:
        self.ts = TempStore()
        self.store = self.ts.store

    def tearDown(self) -> None:
        self.ts.close()

    def test_independent_reader_and_rolling(self) -> None:
        bodies = [os.urandom(1000 + i % 7) for i in range(200)]
        results = [put_sync(self.store, msg("T", i % 3, b, tags=f"Tag{i % 2}", keys=f"k{i} x{i}",
                                            uniq=f"U{i:06d}",
                                            born=("::1", 7000) if i % 5 == 0 else ("10.0.0.1", 5555)))
                   for i, b in enumerate(bodies)]
        self.assertTrue(all(r.status is PutStatus.PUT_OK for r in results))
        self.store.shutdown()
        recs, blanks = read_commit_log(os.path.join(self.ts.root, "commitlog"))
        self.assertEqual(len(recs), 200)
        self.assertGreaterEqual(len(os.listdir(os.path.join(self.ts.root, "commitlog"))), 3)
        self.assertGreaterEqual(len(blanks), 2)
        for (off, size) in blanks:
            self.assertEqual(off % (64 * 1024) + size, 64 * 1024)
        per_queue: dict[int, int] = {}
        for i, (r, res) in enumerate(zip(recs, results)):
            self.assertEqual(r["body"], bodies[i])
            self.assertEqual(r["offset"], r["phys"])
            self.assertEqual(r["offset"], res.wrote_offset)
            self.assertEqual(r["queue_offset"], per_queue.get(i % 3, 0))
            per_queue[i % 3] = r["queue_offset"] + 1
            self.assertEqual(bool(r["sys_flag"] & 0x10), i % 5 == 0)
            self.assertEqual(len(r["born"]), 16 if i % 5 == 0 else 4)
            self.assertIn("UNIQ_KEY\x01U%06d" % i, r["props"])
            self.assertEqual(res.msg_id, (bytes([127, 0, 0, 1]) + struct.pack(">iq", 10911, r["offset"])).hex().upper())
        for q in range(3):
            units = read_cq(self.ts.root, "T", q)
            mine = [r for r in recs if r["queue_id"] == q]
            self.assertEqual([(u[0], u[1]) for u in units], [(r["offset"], r["size"]) for r in mine])
            for u, r in zip(units, mine):
                self.assertEqual(u[2], java_hash(r["props"].split("TAGS\x01")[1].split("\x02")[0]))
        self.store = self.ts.store = self.ts.open()
        res = self.store.get_message("T", 1, 0, 100)
        self.assertEqual(res.status, GetStatus.FOUND)
        self.assertEqual(len(res.messages), 10)  # a pull stops at the end of a consume queue file (10 units)
        self.assertEqual(res.next_begin_offset, 10)
        self.assertEqual(len(self.store.get_message("T", 1, 10, 100).messages), 10)
        self.assertEqual(decode_record(res.messages[5]).body, bodies[16])
        self.assertEqual(self.store.get_max_offset_in_queue("T", 0), 67)

    def test_get_statuses(self) -> None:
        for i in range(5):
            put_sync(self.store, msg("G", 0, b"x%d" % i))
        s = self.store
        self.assertEqual(s.get_message("nope", 0, 0, 1).status, GetStatus.NO_MESSAGE_IN_QUEUE)  # as Java: an empty queue
        r = s.get_message("G", 0, 5, 1)
        self.assertEqual((r.status, r.next_begin_offset), (GetStatus.OFFSET_OVERFLOW_ONE, 5))
        r = s.get_message("G", 0, 9, 1)
        self.assertEqual((r.status, r.next_begin_offset), (GetStatus.OFFSET_OVERFLOW_BADLY, 5))  # Java 4.9.8 moves to the max offset
        r = s.get_message("G", 0, 2, 2)
        self.assertEqual((r.status, r.next_begin_offset, r.min_offset, r.max_offset), (GetStatus.FOUND, 4, 0, 5))

    def test_tag_filter(self) -> None:
        for i in range(6):
            put_sync(self.store, msg("F", 0, b"%d" % i, tags="A" if i % 3 == 0 else "B"))
        want = java_hash("A")

        class Slow(MessageFilter):
            """The same question, asked unit by unit (get_message's general loop, not the scan)."""
            by_tags_only = False

        for f in (MessageFilter({want}), Slow({want})):
            r = self.store.get_message("F", 0, 0, 32, f)
            self.assertEqual([decode_record(m).body for m in r.messages], [b"0", b"3"], f)
            self.assertEqual(r.next_begin_offset, 6)
            r = self.store.get_message("F", 0, 4, 32, f)
            self.assertEqual((r.status, r.next_begin_offset), (GetStatus.NO_MATCHED_MESSAGE, 6))
        self.assertEqual(len(self.store.get_message("F", 0, 0, 32, MessageFilter()).messages), 6)

    def test_batch(self) -> None:
        put_sync(self.store, msg("B", 2, b"first"))
        body = encode_batch_body([(0, b"b%d" % i, f"KEYS\x01kb{i}\x02TAGS\x01TB") for i in range(3)])
        res = put_sync(self.store, BatchToStore("B", 2, 0, 1, ("10.0.0.1", 1), ("127.0.0.1", 10911), body,
                                                "CLUSTER\x01c1"))
        self.assertEqual((res.status, res.msg_num, res.queue_offset), (PutStatus.PUT_OK, 3, 1))
        self.assertEqual(len(res.msg_id.split(",")), 3)
        r = self.store.get_message("B", 2, 1, 32)
        recs = [decode_record(m) for m in r.messages]
        self.assertEqual([x.queue_offset for x in recs], [1, 2, 3])
        self.assertEqual(recs[1].properties, "KEYS\x01kb1\x02TAGS\x01TB\x02CLUSTER\x01c1")
        found, _, _ = self.store.query_message("B", "kb2", 10, 0, 2**62)
        self.assertEqual([decode_record(x).body for x in found], [b"b2"])

    def test_max_message_size_and_bad_input(self) -> None:
        res = put_sync(self.store, msg("M", 0, b"x" * (4 * 1024 * 1024 + 1)))
        self.assertEqual(res.status, PutStatus.MESSAGE_ILLEGAL)
        self.assertIn("maxMessageSize", res.remark)
        res = put_sync(self.store, msg("M", 0, b"x", extra={"big": "y" * 40000}))
        self.assertEqual(res.status, PutStatus.PROPERTIES_SIZE_EXCEEDED)
        res = put_sync(self.store, msg("M" * 200, 0, b"x"))
        self.assertEqual(res.status, PutStatus.MESSAGE_ILLEGAL)
        self.assertEqual(put_sync(self.store, msg("M", 0, b"ok")).queue_offset, 0)

    def test_body_of_max_message_size_with_properties(self) -> None:
        """maxMessageSize limits the body; the record holds the properties on top (Apache's MessageExtEncoder)."""
        ts = TempStore(max_message_size=1000)
        self.addCleanup(ts.close)
        full = put_sync(ts.store, msg("M", 0, b"x" * 1000, keys="k1 k2", extra={"p": "v" * 500}))
        self.assertEqual(full.status, PutStatus.PUT_OK)
        self.assertGreater(full.wrote_bytes, 1500)
        self.assertEqual(decode_record(ts.store.get_message("M", 0, 0, 1).messages[0]).body, b"x" * 1000)
        over = put_sync(ts.store, msg("M", 0, b"x" * 1001))
        self.assertEqual((over.status, over.remark), (PutStatus.MESSAGE_ILLEGAL,
                                                      "message body size 1001 exceeds maxMessageSize 1000"))

    def test_record_larger_than_a_commit_log_file(self) -> None:
        """A legal body that no commit log file can hold (files smaller than maxMessageSize) is an error
        answer, not an exception, and the store goes on."""
        res = put_sync(self.store, msg("M", 0, b"x" * (70 * 1024)))  # the test store's files: 64 KiB
        self.assertEqual(res.status, PutStatus.UNKNOWN_ERROR)
        self.assertIn("does not fit", res.remark)
        self.assertEqual(put_sync(self.store, msg("M", 0, b"ok")).status, PutStatus.PUT_OK)

    def test_transactions_skip_queue(self) -> None:
        put_sync(self.store, msg("X", 0, b"prepared", sys_flag=0x4, keys="kp"))
        put_sync(self.store, msg("X", 0, b"rollback", sys_flag=0xC, keys="kr"))
        put_sync(self.store, msg("X", 0, b"commit", sys_flag=0x8, keys="kc"))
        self.assertEqual(self.store.get_max_offset_in_queue("X", 0), 1)
        self.assertEqual(len(self.store.query_message("X", "kp", 5, 0, 2**62)[0]), 1)
        self.assertEqual(len(self.store.query_message("X", "kr", 5, 0, 2**62)[0]), 0)

    def test_schedule_topic_tag_is_delivery_time(self) -> None:
        res = put_sync(self.store, msg("SCHEDULE_TOPIC_XXXX", 1, b"d", extra={"DELAY": "2"}))
        units = self.store.consume_queues[("SCHEDULE_TOPIC_XXXX", 1)]
        self.assertEqual(units.unit_at(0)[2], res.store_timestamp + 5000)

    def test_lock_refuses_second_store(self) -> None:
        other = MessageStore(small_config(self.ts.root))
        with self.assertRaises(StoreLockedError) as cm:
            other.load()
        self.assertIn(self.ts.root, str(cm.exception))
        self.assertIn("locked", str(cm.exception))


class ClockStoreTest(unittest.TestCase):
    """Time-dependent reads with an injected clock."""

    def setUp(self) -> None:
        self.now = 1_800_000_000.0
        self.ts = TempStore()
        self.ts.store.shutdown()
        self.store = self.ts.store = self.ts.open(clock=lambda: self.now)

    def tearDown(self) -> None:
        self.ts.close()

    def test_offset_by_time_and_query_range(self) -> None:
        for i in range(30):
            self.now = 1_800_000_000.0 + i * 10
            put_sync(self.store, msg("O", 0, b"%d" % i, keys="same", uniq=f"u{i}"))
        base = 1_800_000_000_000
        s = self.store
        self.assertEqual(s.get_offset_in_queue_by_time("O", 0, base + 100_000), 10)
        self.assertEqual(s.get_offset_in_queue_by_time("O", 0, base + 104_000), 10)
        self.assertEqual(s.get_offset_in_queue_by_time("O", 0, base + 106_000), 11)
        self.assertEqual(s.get_offset_in_queue_by_time("O", 0, base - 5), 0)
        self.assertEqual(s.get_offset_in_queue_by_time("O", 0, base + 10**9), 29)
        self.assertEqual(s.get_earliest_message_time("O", 0), base)
        self.assertEqual(s.get_earliest_message_time("O", 9), -1)
        recs, last_ts, last_phy = s.query_message("O", "same", 64, base + 50_000, base + 120_000)
        self.assertEqual(sorted(int(decode_record(r).body) for r in recs), list(range(5, 13)))
        self.assertEqual(last_ts, base + 290_000)
        recs, _, _ = s.query_message("O", "u7", 64, 0, 2**62)
        self.assertEqual([decode_record(r).body for r in recs], [b"7"])
        self.assertEqual(s.get_commit_log_offset_in_queue("O", 0, 7), decode_record(recs[0]).physical_offset)


class RetentionTest(unittest.TestCase):
    def setUp(self) -> None:
        self.now = time.time()
        self.ts = TempStore()
        self.ts.store.shutdown()
        self.store = self.ts.store = self.ts.open(clock=lambda: self.now)

    def tearDown(self) -> None:
        self.ts.close()

    def test_expired_files_deleted_but_not_current(self) -> None:
        for i in range(300):
            put_sync(self.store, msg("R", i % 2, os.urandom(900), keys=f"k{i}"))
        self.store.flush.flush_commit_log_now()
        cl = self.store.commitlog.queue
        n_files = len(cl.files)
        self.assertGreater(n_files, 3)
        self.store.run_retention_now()  # nothing is old yet
        self.assertEqual(len(cl.files), n_files)
        self.now += 73 * 3600
        self.store.retention.run()  # 73 h later, but not at deleteWhen hour unless it happens to be 04
        if time.localtime(self.now).tm_hour != 4:
            self.assertEqual(len(cl.files), n_files)
        self.store.run_retention_now()
        self.assertEqual(len(cl.files), 1)
        min_phy = self.store.min_phy_offset
        self.assertGreater(min_phy, 0)
        for q in (0, 1):
            lo = self.store.get_min_offset_in_queue("R", q)
            self.assertGreater(lo, 0)
            r = self.store.get_message("R", q, lo, 1)
            self.assertEqual(r.status, GetStatus.FOUND)
            self.assertGreaterEqual(decode_record(r.messages[0]).physical_offset, min_phy)
            self.assertEqual(self.store.get_message("R", q, 0, 1).status, GetStatus.OFFSET_TOO_SMALL)
            cq = self.store.consume_queues[("R", q)]
            self.assertTrue(all(mf.end_offset > lo * 20 for mf in cq.queue.files))
        self.assertTrue(all(f.end_phy >= min_phy for f in self.store.index.files[:-1]))
        self.store.shutdown()
        self.store = self.ts.store = self.ts.open()
        self.assertEqual(self.store.min_phy_offset, min_phy)

    def test_no_pass_over_the_queues_until_the_commit_log_lost_its_head(self) -> None:
        """As Java's lastPhysicalMinOffset (0 at start): a queue is visited only once commit log files went."""
        for i in range(300):
            put_sync(self.store, msg("R", i % 2, os.urandom(900)))
        self.store.flush.flush_commit_log_now()
        from rmqtx.store.consume_queue import ConsumeQueue

        visited: list[int] = []
        real = ConsumeQueue.delete_expired

        def counted(cq: ConsumeQueue, phy: int) -> object:
            visited.append(phy)
            return real(cq, phy)

        ConsumeQueue.delete_expired = counted  # type: ignore[method-assign,assignment]
        self.addCleanup(setattr, ConsumeQueue, "delete_expired", real)
        self.store.run_retention_now()  # nothing old: the commit log still starts at 0
        self.assertEqual(visited, [])
        self.now += 73 * 3600
        self.store.run_retention_now()
        self.assertGreater(self.store.min_phy_offset, 0)
        self.assertEqual(visited, [self.store.min_phy_offset] * 2)

    def test_disk_space_triggers_deletion(self) -> None:
        for i in range(200):
            put_sync(self.store, msg("R", 0, os.urandom(900)))
        self.store.flush.flush_commit_log_now()
        n = len(self.store.commitlog.queue.files)
        self.store.retention.disk_usage = lambda path: 0.80  # above 75 %: delete expired files any hour
        self.store.retention.run()
        self.assertEqual(len(self.store.commitlog.queue.files), n)
        self.store.retention.disk_usage = lambda path: 0.87  # above 85 %: delete regardless of age
        self.store.retention.run()
        self.assertLess(len(self.store.commitlog.queue.files), n)
        self.store.retention.disk_usage = lambda path: 0.95  # above 90 %: refuse puts
        self.store.retention.run()
        self.assertEqual(put_sync(self.store, msg("R", 0, b"z")).status, PutStatus.SERVICE_NOT_AVAILABLE)


class FileDeletionThreadTest(unittest.TestCase):
    """Unlinking files (retention, topic deletion) happens in the store's allocator thread, not the caller's."""

    def setUp(self) -> None:
        self.now = time.time()
        self.ts = TempStore()
        self.ts.store.shutdown()
        self.store = self.ts.store = self.ts.open(clock=lambda: self.now)
        self.destroyed_in: list[tuple[str, str]] = []
        real = mapped_file.MappedFile.destroy

        def recording_destroy(mf: mapped_file.MappedFile) -> None:
            self.destroyed_in.append((os.path.basename(mf.path), threading.current_thread().name))
            real(mf)

        self.real_destroy = real
        mapped_file.MappedFile.destroy = recording_destroy

    def tearDown(self) -> None:
        mapped_file.MappedFile.destroy = self.real_destroy
        self.ts.close()

    def test_retention_and_topic_deletion_unlink_off_the_caller_thread(self) -> None:
        for i in range(300):
            put_sync(self.store, msg("R", 0, os.urandom(900)))
            put_sync(self.store, msg("Gone", i % 2, b"x"))
        self.store.flush.flush_commit_log_now()
        cl_dir = self.store.config.commit_log_dir
        before = set(os.listdir(cl_dir))
        self.now += 73 * 3600
        self.store.run_retention_now()
        self.store.delete_topics({"Gone"})
        # written again at once, while the old files of the same names may still wait for deletion
        put_sync(self.store, msg("Gone", 0, b"again"))
        self.store.wait_for_file_jobs()
        after = set(os.listdir(cl_dir))
        queue = self.store.commitlog.queue
        self.assertEqual(len(queue.files), 1)
        live = {os.path.basename(queue.files[0].path)}
        if queue.next_pending:  # the file after the current one, made ahead of need
            live.add(mapped_file.file_name(queue.files[0].end_offset))
        self.assertEqual(after, live)
        self.assertEqual(os.listdir(os.path.join(self.ts.root, "consumequeue", "Gone")), ["0"])
        self.assertEqual(os.listdir(os.path.join(self.ts.root, "consumequeue", "Gone", "0")),
                         [os.path.basename(self.store.consume_queues[("Gone", 0)].queue.files[0].path)])
        self.assertTrue(os.path.isdir(os.path.join(self.ts.root, "consumequeue", "R", "0")))
        deleted = {name for name, _ in self.destroyed_in}
        self.assertLessEqual(before - after, deleted)
        threads_used = {thread for _, thread in self.destroyed_in}
        self.assertTrue(threads_used and all(t.startswith("rmqtx-store-alloc") for t in threads_used), threads_used)
        self.assertEqual(self.store.get_message("Gone", 0, 0, 1).status, GetStatus.FOUND)
        self.store.shutdown()
        self.store = self.ts.store = self.ts.open()
        self.assertEqual(decode_record(self.store.get_message("Gone", 0, 0, 1).messages[0]).body, b"again")


class DiskFullTest(unittest.TestCase):
    def setUp(self) -> None:
        self.ts = TempStore()
        self.store = self.ts.store
        self.real_create = mapped_file.MappedFile.create

    def tearDown(self) -> None:
        mapped_file.MappedFile.create = self.real_create
        self.ts.close()

    def test_enospc_fails_cleanly(self) -> None:
        ok = [put_sync(self.store, msg("D", 0, b"%06d" % i + os.urandom(1000))) for i in range(20)]
        self.assertTrue(all(r.ok for r in ok))

        def no_space(*a, **kw):
            raise OSError(errno.ENOSPC, "No space left on device")
        mapped_file.MappedFile.create = classmethod(lambda cls, *a, **kw: no_space())
        statuses = []
        for i in range(200):
            statuses.append(put_sync(self.store, msg("D", 0, b"%06d" % (20 + i) + os.urandom(1000))).status)
        self.assertIn(PutStatus.CREATE_MAPPED_FILE_FAILED, statuses)
        good = statuses.index(PutStatus.CREATE_MAPPED_FILE_FAILED)
        self.assertTrue(all(s is PutStatus.CREATE_MAPPED_FILE_FAILED for s in statuses[good:]))
        mapped_file.MappedFile.create = self.real_create
        res = put_sync(self.store, msg("D", 0, b"after"))
        self.assertTrue(res.ok)
        self.assertEqual(res.queue_offset, 20 + good)
        self.store.shutdown()
        recs, _ = read_commit_log(os.path.join(self.ts.root, "commitlog"))
        self.assertEqual([r["body"][:6] for r in recs[:-1]], [b"%06d" % i for i in range(20 + good)])
        self.assertEqual(recs[-1]["body"], b"after")
        self.store = self.ts.store = self.ts.open()
        self.assertEqual(self.store.get_max_offset_in_queue("D", 0), 21 + good)


class _GroupCommit:
    """SYNC_FLUSH's group commit on the reactor, run with each twin of the committer thread
    (trial runs the reactor for returned Deferreds)."""

    committer_type: object = None  # set by each concrete class

    def setUp(self) -> None:
        self.ts = self._open()
        self.store = self.ts.store

    def _open(self, file_size: int = 1024 * 1024, keep_fds: bool = True, **kw) -> TempStore:
        """A started SYNC_FLUSH store using this class's committer; ``keep_fds`` False: commit log files
        keep only their mapping (each is opened by path to be handed over)."""
        ts = TempStore(flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=file_size, **kw)
        ts.store.commitlog.queue.keep_fds = keep_fds
        ts.store.flush.committer_type = self.committer_type
        ts.store.start(reactor)
        return ts

    def tearDown(self) -> None:
        self.ts.close()

    @defer.inlineCallbacks
    def test_group_commit(self):
        arrivals = []
        self.store.add_arrival_listener(lambda t, q, m: arrivals.append((t, q, m)))
        before = self.store.flush.sync_count
        results = yield defer.gatherResults([self.store.put_message(msg("S", i % 4, os.urandom(1024)))
                                             for i in range(64)])
        syncs = self.store.flush.sync_count - before
        self.assertTrue(all(r.status is PutStatus.PUT_OK for r in results))
        self.assertLess(syncs, 64)
        self.assertLessEqual(syncs, 2)
        q = self.store.commitlog.queue
        self.assertGreaterEqual(q.flushed_where, max(r.wrote_offset + r.wrote_bytes for r in results))
        # listeners hear once per grown queue per reactor turn, with its new max offset
        self.assertEqual(sorted(arrivals), [("S", q, 16) for q in range(4)])
        # a second wave while nothing is in flight also shares syncs
        results = yield defer.gatherResults([self.store.put_message(msg("S", 0, b"x")) for _ in range(64)])
        self.assertLessEqual(self.store.flush.sync_count - before, 4)
        # the store time of the last synced record: the checkpoint's physic time
        self.assertEqual(self.store.flush.flushed_store_ts, self.store.commitlog.last_store_timestamp)

    @defer.inlineCallbacks
    def test_stalled_sync_times_out_and_later_puts_succeed(self):
        """A sync that hangs past syncFlushTimeout answers FLUSH_DISK_TIMEOUT; the next ones get through."""
        self.ts.close()
        self.ts = self._open(sync_flush_timeout=300)
        self.store = self.ts.store
        first = yield self.store.put_message(msg("S", 0, b"warm"))  # the commit log file exists now
        self.assertIs(first.status, PutStatus.PUT_OK)
        committer = self.store.flush.committer
        committer.hold()  # the committer's next fdatasync waits: a disk that hangs
        try:
            stalled = yield self.store.put_message(msg("S", 0, b"stalled"))
            self.assertTrue(committer.held())
        finally:
            committer.release()
        self.assertIs(stalled.status, PutStatus.FLUSH_DISK_TIMEOUT)
        after = yield self.store.put_message(msg("S", 1, b"after"))
        self.assertIs(after.status, PutStatus.PUT_OK)
        self.assertGreaterEqual(self.store.commitlog.queue.flushed_where, after.wrote_offset + after.wrote_bytes)

    @defer.inlineCallbacks
    def test_puts_are_timed_until_their_sync(self):
        """brokerStatus's put times cover the group commit a SYNC_FLUSH put waits for, as Java's future does."""
        yield self.store.put_message(msg("S", 0, b"warm"))
        times = self.store.times
        slow_before = sum(times.counts[bucket(150):])
        committer = self.store.flush.committer
        committer.hold()  # the next sync waits until release()
        try:
            slow = self.store.put_message(msg("S", 0, b"slow"))
            waited = []
            sent = self.store.append_message(msg("S", 1, b"send path"), None, TIME_AT_SYNC)
            self.store.call_when_flushed(sent, lambda res, arg: waited.append(res.status), None)
            yield task.deferLater(reactor, 0.2, lambda: None)
            self.assertEqual(waited, [])
        finally:
            committer.release()
        self.assertIs((yield slow).status, PutStatus.PUT_OK)
        yield defer.ensureDeferred(wait_until(lambda: bool(waited), 5))
        self.assertEqual(waited, [PutStatus.PUT_OK])
        self.assertEqual(sum(times.counts[bucket(150):]) - slow_before, 2)
        self.assertGreaterEqual(times.put_max, 150)
        self.assertEqual(times.put_failed, 0)
        # a caller that does not wait for the sync (the timer's delivery) is timed at once
        count = sum(times.counts)
        self.assertIs(self.store.append_message(msg("S", 2, b"unwaited")).status, PutStatus.PUT_OK)
        self.assertEqual(sum(times.counts), count + 1)

    @defer.inlineCallbacks
    def test_rolling_files_are_handed_over(self):
        """Puts that fill several commit log files are acknowledged only once each file is synced."""
        self.ts.close()
        self.ts = self._open(64 * 1024, keep_fds=False)
        self.store = self.ts.store
        results = []
        for wave in range(6):  # each wave ~40 KiB: the files roll while syncs run
            results += (yield defer.gatherResults([self.store.put_message(msg("R", i % 2, os.urandom(2000)))
                                                   for i in range(20)]))
        self.assertTrue(all(r.status is PutStatus.PUT_OK for r in results))
        q = self.store.commitlog.queue
        self.assertGreaterEqual(len(q.files), 3)
        self.assertTrue(all(mf.fd < 0 for mf in q.files))
        self.assertGreaterEqual(q.flushed_where, max(r.wrote_offset + r.wrote_bytes for r in results))

    @defer.inlineCallbacks
    def test_failing_sync_times_out_once_logged_then_recovers(self):
        """A sync that fails (EINVAL from a pipe handed over as a commit log file) moves nothing: puts
        time out, one error line is logged however often it is retried, and syncs work again after."""
        self.ts.close()
        self.ts = self._open(sync_flush_timeout=300)
        self.store = self.ts.store
        first = yield self.store.put_message(msg("S", 0, b"warm"))
        self.assertIs(first.status, PutStatus.PUT_OK)
        committer = self.store.flush.committer
        r, w = os.pipe()
        self.addCleanup(os.close, w)
        self.addCleanup(os.close, r)
        committer.add_file(r, 2**62)  # every sync from now on fails, until a rebase forgets it
        with self.assertLogs("rmqtx.store.flush", "WARNING") as logged:
            failed = yield self.store.put_message(msg("S", 0, b"failed"))
            self.assertIs(failed.status, PutStatus.FLUSH_DISK_TIMEOUT)
            self.assertEqual(committer.synced()[2], errno.EINVAL)
            self.assertLess(self.store.commitlog.queue.flushed_where, failed.wrote_offset + failed.wrote_bytes)
            q = self.store.commitlog.queue
            self.store.flush.truncated(q.max_offset)  # forgets the pipe (nothing is cut)
            after = yield self.store.put_message(msg("S", 1, b"after"))
            self.assertIs(after.status, PutStatus.PUT_OK)
        errors = [r.getMessage() for r in logged.records if r.levelname == "ERROR"]
        self.assertEqual(len(errors), 1, errors)
        self.assertIn(os.strerror(errno.EINVAL), errors[0])
        self.assertEqual(committer.synced()[2], 0)
        self.assertGreaterEqual(q.flushed_where, after.wrote_offset + after.wrote_bytes)

    @defer.inlineCallbacks
    def test_store_time_while_syncs_lag(self):
        """While a sync hangs, each reactor turn's puts leave an (offset, store time) mark, a bounded number;
        once synced, the flushed store time (the checkpoint's physic time) is the last record's."""
        flush = self.store.flush
        committer = flush.committer
        committer.hold()
        puts = []
        for i in range(300):  # one put per reactor turn
            puts.append(self.store.put_message(msg("S", 0, b"%d" % i)))
            yield task.deferLater(reactor, 0, lambda: None)
        yield defer.ensureDeferred(wait_until(committer.held, timeout=10, step=0.005))
        self.assertLessEqual(len(flush._marks), 256)
        committer.release()
        results = yield defer.gatherResults(puts)
        self.assertTrue(all(r.status is PutStatus.PUT_OK for r in results))
        self.assertEqual(flush.flushed_store_ts, self.store.commitlog.last_store_timestamp)
        self.assertEqual(len(flush._marks), 0)

    @defer.inlineCallbacks
    def test_truncation_rebases_the_committer(self):
        """A replica's truncation cuts the log while a sync past the cut is in flight: that sync reports
        nothing, its put is answered at once, the deleted file's descriptor goes, and the file made
        again under its name is synced."""
        self.ts.close()
        self.ts = self._open(64 * 1024)
        self.store = store = self.ts.store
        q = store.commitlog.queue
        results = yield defer.gatherResults([store.put_message(msg("T", i % 2, os.urandom(2000))) for i in range(50)])
        self.assertTrue(all(r.status is PutStatus.PUT_OK for r in results))
        self.assertEqual(len(q.files), 2)
        second = q.files[1].path
        cut = results[10].wrote_offset
        committer = store.flush.committer
        committer.hold()
        in_flight = store.put_message(msg("T", 0, b"in flight"))
        yield defer.ensureDeferred(wait_until(committer.held, timeout=10, step=0.005))
        truncate_log(store, cut)
        self.assertEqual((q.max_offset, q.flushed_where), (cut, cut))
        cut_off = yield in_flight  # its bytes are gone: answered now, as never synced
        self.assertIs(cut_off.status, PutStatus.FLUSH_DISK_TIMEOUT)
        synced_before = committer.synced()[1]
        committer.release()
        yield defer.ensureDeferred(wait_until(lambda: committer.synced()[1] > synced_before, step=0.005))
        yield task.deferLater(reactor, 0.05, lambda: None)  # its signal (if any) was read
        self.assertEqual(q.flushed_where, cut)
        results = yield defer.gatherResults([store.put_message(msg("T", i % 2, os.urandom(2000))) for i in range(40)])
        self.assertTrue(all(r.status is PutStatus.PUT_OK for r in results))
        self.assertEqual(q.files[1].path, second)  # made again
        self.assertGreaterEqual(q.flushed_where, max(r.wrote_offset + r.wrote_bytes for r in results))

        def links() -> list[str]:
            out = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    out.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:
                    pass
            return out
        yield defer.ensureDeferred(wait_until(lambda: f"{second} (deleted)" not in links(), step=0.005))
        self.assertGreaterEqual(links().count(second), 2)  # the store's descriptor and the committer's

    def test_stop_leaves_no_thread_reader_or_descriptor(self):
        flush = self.store.flush
        committer, wakeup = flush.committer, flush._wakeup
        self.assertIn(wakeup, reactor.getReaders())
        self.store.shutdown()
        self.assertIsNone(flush.committer)
        self.assertNotIn(wakeup, reactor.getReaders())
        self.assertEqual(wakeup.fileno(), -1)
        committer.stop()  # again: nothing
        self.assertFalse(any(t.name == "rmqtx-committer" for t in threading.enumerate()))


@pyunit.skipIf(_accel is None, "rmqtx._accel not built (tests/remoting/test_accel.py says whether it should be)")
class GroupCommitCTest(_GroupCommit, unittest.TestCase):
    committer_type = getattr(_accel, "Committer", None)


class GroupCommitPyTest(_GroupCommit, unittest.TestCase):
    committer_type = PyCommitter


class FlushTest(unittest.TestCase):
    """Reactor-driven flushing (trial runs the reactor for returned Deferreds)."""

    def setUp(self) -> None:
        self.ts = TempStore(flush_interval_commit_log=50, flush_interval_consume_queue=50)
        self.store = self.ts.store
        self.store.start(reactor)

    def tearDown(self) -> None:
        self.ts.close()

    @defer.inlineCallbacks
    def test_async_flush_loop(self):
        r = yield self.store.put_message(msg("A", 0, b"x"))
        self.assertTrue(r.ok)
        end = r.wrote_offset + r.wrote_bytes
        cp = self.store.checkpoint
        yield defer.ensureDeferred(wait_until(lambda: self.store.commitlog.queue.flushed_where == end and cp.physic_ts > 0
                                              and cp.logics_ts > 0, timeout=30))
        self.assertEqual(self.store.commitlog.queue.flushed_where, end)
        self.assertGreater(self.store.checkpoint.physic_ts, 0)
        self.assertGreater(self.store.checkpoint.logics_ts, 0)


class ArrivalsTest(unittest.TestCase):
    """Arrival listeners hear once per grown queue per batch of puts: the reactor turn, or a remoting
    read, which holds its puts' arrivals (scheduling nothing) and tells them at its end."""

    def setUp(self) -> None:
        self.ts = TempStore()
        self.store = self.ts.store
        self.store.start(reactor)
        self.told: list[tuple[str, int, int]] = []
        self.store.add_arrival_listener(lambda t, q, m: self.told.append((t, q, m)))

    def tearDown(self) -> None:
        self.ts.close()

    @defer.inlineCallbacks
    def test_a_turn_then_a_read_then_a_turn(self):
        for _ in range(2):
            self.assertTrue(self.store.append_message(msg("T", 0)).ok)
        self.assertEqual(self.told, [])
        yield task.deferLater(reactor, 0, lambda: None)
        self.assertEqual(self.told, [("T", 0, 2)])
        self.store.hold_arrivals()  # a read begins
        self.assertTrue(self.store.append_message(msg("T", 1)).ok)
        yield task.deferLater(reactor, 0.05, lambda: None)  # nothing was scheduled for the held put
        self.assertEqual(self.told, [("T", 0, 2)])
        self.store.flush_arrivals()  # the read's end
        self.assertEqual(self.told, [("T", 0, 2), ("T", 1, 1)])
        self.assertTrue(self.store.append_message(msg("T", 1)).ok)  # after the read, the turn's call again
        yield task.deferLater(reactor, 0, lambda: None)
        self.assertEqual(self.told[-1], ("T", 1, 2))


class FileCreationThreadTest(unittest.TestCase):
    """A running store makes consume queue and index files in its allocator thread, and the reactor never
    waits for one: every file creation here is held until the reactor itself lets it go, so a reactor
    waiting for a file would wait in vain (and the creation records that it was not let go)."""

    #: 10 units per queue file, 16 entries per index file
    store_kw: dict = {"max_hash_slot_num": 8, "max_index_num": 16}

    def setUp(self) -> None:
        self.ts = TempStore(**self.store_kw)
        self.store = self.ts.store
        self.store.start(reactor)
        self.hold = False
        self.gate = threading.Event()
        self.made: list[tuple[str, str, bool]] = []  # (file, thread, whether the reactor let it go)
        real = mapped_file.MappedFile.create.__func__

        def held_create(cls, path: str, file_size: int, from_offset: int = 0, preallocate: bool = False,
                        keep_fd: bool = True, readahead: bool = True):
            released = not self.hold or self.gate.wait(3)
            self.gate.clear()  # the next creation waits for the reactor's next turn
            self.made.append((path, threading.current_thread().name, released))
            return real(cls, path, file_size, from_offset, preallocate, keep_fd, readahead)

        self.real_create = mapped_file.MappedFile.create
        mapped_file.MappedFile.create = classmethod(held_create)
        self.opener = task.LoopingCall(self.gate.set)  # runs only while the reactor is free
        self.opener.start(0.02)

    def tearDown(self) -> None:
        self.opener.stop()
        mapped_file.MappedFile.create = self.real_create
        self.hold = False
        self.gate.set()
        self.ts.close()

    @defer.inlineCallbacks
    def test_queue_and_index_files_are_made_off_the_reactor(self) -> None:
        yield self.store.put_message(msg("Warm", 0, b"w", keys="w"))  # the commit log's first file (made on demand)
        yield defer.ensureDeferred(wait_until(lambda: not self.store.files_pending, timeout=10))
        self.made.clear()
        self.hold = True
        results = []
        waited: set[str] = set()
        for i in range(30):  # new queues, queue files filling every 10 units, index files every 16 entries
            results.append(self.store.append_message(msg("New", i % 3, b"%d" % i, keys=f"k{i}", uniq=f"u{i}")))
            # readable and found at once, whether or not its files are made yet
            got = self.store.get_message("New", i % 3, i // 3, 1)
            self.assertEqual([decode_record(m).body for m in got.messages], [b"%d" % i])
            found, _, _ = self.store.query_message("New", f"k{i}", 4, 0, 2 ** 62)
            self.assertEqual([decode_record(m).body for m in found], [b"%d" % i])
            waited |= {"queue"} if self.store.waiting_cqs else set()
            waited |= {"index"} if self.store.index.waiting else set()
            if i % 4 == 3:
                yield task.deferLater(reactor, 0.01, lambda: None)  # let files be made and waiting units written
        self.assertTrue(all(r.status is PutStatus.PUT_OK for r in results))
        self.assertEqual(waited, {"queue", "index"})  # reads above were served while files were being made
        yield defer.ensureDeferred(wait_until(
            lambda: not self.store.files_pending and all(self.store.get_max_offset_in_queue("New", q) == 10 for q in range(3)),
            timeout=10))
        cq_files = [p for p, _, _ in self.made if os.sep + "consumequeue" + os.sep in p]
        if self.store_kw.get("enable_consume_queue_ext"):
            self.assertGreaterEqual(len([p for p, _, _ in self.made if "consumequeue_ext" in p]), 6)
        index_files = [p for p, _, _ in self.made if os.sep + "index" + os.sep in p]
        self.assertGreaterEqual(len(cq_files), 3)
        self.assertGreaterEqual(len(index_files), 2)
        self.assertEqual([(p, t) for p, t, _ in self.made if not t.startswith("rmqtx-store-alloc")], [])
        self.assertEqual([p for p, _, released in self.made if not released], [])
        # order kept: each queue reads back 0..9 in put order, and the index finds every key
        for q in range(3):
            got = self.store.get_message("New", q, 0, 32)
            self.assertEqual([decode_record(m).body for m in got.messages], [b"%d" % i for i in range(q, 30, 3)])
        for i in range(30):
            found, _, _ = self.store.query_message("New", f"k{i}", 4, 0, 2 ** 62)
            self.assertEqual([decode_record(m).body for m in found], [b"%d" % i], i)
        # a clean restart finds the same
        self.store.shutdown()
        self.store = self.ts.store = self.ts.open()
        self.assertEqual(self.store.get_max_offset_in_queue("New", 2), 10)


class ExtFileCreationThreadTest(FileCreationThreadTest):
    """The same with consume queue ext files (9 units each): they too are made off the reactor."""

    store_kw = {**FileCreationThreadTest.store_kw, "enable_consume_queue_ext": True, "mapped_file_size_consume_queue_ext": 200}
