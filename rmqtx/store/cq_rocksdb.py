"""storeType=defaultRocksDB: every consume queue's units in one RocksDB database (PyPI ``rocksdict``,
the ``rocksdb`` extra) in the consumequeue directory, as Apache 5.x keeps them for brokers of a
million queues: no file, mapping or descriptor per queue.

Keys and values are Apache 5.x's (RocksDBConsumeQueueTable / RocksDBConsumeQueueOffsetTable):
a unit is ``len(topic) 01 topic 01 queueId 01 cqOffset`` -> ``phys, size, tagsCode, storeTime``
in the default column family; the ``offset`` column family holds each queue's ``max`` and ``min``
(``len 01 topic 01 max|min 01 queueId`` -> ``phys, cqOffset``) and, under topic CHECKPOINT_TOPIC,
the end of the last record whose units are written. Units dispatched on the reactor wait in memory
(readable) and are written once per reactor turn, as one WriteBatch, in a thread of their own.
"""
from __future__ import annotations

import logging
import os
import struct
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from .consume_queue import UNIT, UNIT_SIZE
from .mapped_file import StoreError

log = logging.getLogger(__name__)

CTRL_1 = b"\x01"
_LEN = struct.Struct(">i")
_QID = struct.Struct(">i")
_UNIT_TAIL = struct.Struct(">iBq")  # queue id, CTRL_1, cq offset
VALUE = struct.Struct(">qiqq")  # commit log offset, size, tags code, store time
OFFSET_VALUE = struct.Struct(">qq")  # commit log offset, cq offset
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"
OFFSET_CF = "offset"
#: units read from the database for one pull at most (a pull takes 32 messages by default)
READ_UNITS = 256

rocksdict: Any
try:  # the optional extra: MessageStore refuses storeType=defaultRocksDB without it
    import rocksdict
except ImportError:  # pragma: no cover - depends on the install
    rocksdict = None


def topic_prefix(topic: str) -> bytes:
    raw = topic.encode()
    return _LEN.pack(len(raw)) + CTRL_1 + raw + CTRL_1


def unit_key(prefix: bytes, queue_id: int, cq_offset: int) -> bytes:
    return prefix + _UNIT_TAIL.pack(queue_id, 1, cq_offset)


def offset_key(prefix: bytes, kind: bytes, queue_id: int) -> bytes:
    return prefix + kind + CTRL_1 + _QID.pack(queue_id)


def parse_offset_key(key: bytes) -> tuple[str, bytes, int] | None:
    """(topic, b"max" or b"min", queue id) of an offset-family key, None for another shape."""
    n = _LEN.unpack_from(key, 0)[0]
    if len(key) != 4 + 1 + n + 1 + 3 + 1 + 4:
        return None
    return key[5:5 + n].decode(), key[6 + n:9 + n], _QID.unpack_from(key, 10 + n)[0]


_CHECKPOINT_KEY = offset_key(topic_prefix(CHECKPOINT_TOPIC), b"max", 0)


class _NoFiles:
    """What the flush service asks a queue's files: a RocksDB queue has none (its units are written by
    :class:`RocksUnits`)."""

    __slots__ = ()
    files: list = []
    max_offset = 0
    flushed_where = 0
    first = None
    last = None

    def dirty_files(self) -> list:
        return []

    def __setattr__(self, name: str, value: Any) -> None:
        pass  # recovery levels flushed_where: nothing to level


_NO_FILES = _NoFiles()


class RocksUnits:
    """The database, and the units dispatched but not written yet (one batch per reactor turn)."""

    def __init__(self, path: str) -> None:
        if rocksdict is None:
            raise StoreError("storeType=defaultRocksDB needs the 'rocksdb' extra: pip install 'rmqtx[rocksdb]' "
                             "(No module named 'rocksdict')")
        if os.path.isdir(path) and not os.path.exists(os.path.join(path, "CURRENT")) and any(
                os.path.isdir(os.path.join(path, n)) for n in os.listdir(path)):
            raise StoreError(f"{path} holds consume queue files (storeType=default), not a RocksDB database: "
                             "start with storeType=default, or on a new store")
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        cf_opts = rocksdict.Options(raw_mode=True)
        self.db = rocksdict.Rdict(path, options=opts, column_families={OFFSET_CF: cf_opts})
        self.offsets = self.db.get_column_family(OFFSET_CF)
        raw = self.offsets.get(_CHECKPOINT_KEY)
        #: end of the last record whose units are in the database (Apache's CHECKPOINT_TOPIC entry)
        self.built = struct.unpack(">q", raw[:8])[0] if raw else 0
        self.dirty: dict[RocksConsumeQueue, None] = {}
        self._dead: list[tuple[bytes, int]] = []  # queues deleted: (topic prefix, queue id)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="rmqtx-store-rocksdb")
        self._writing: Future | None = None
        self._scheduled = False
        self.reactor: Any = None  # set by a running store: writes go to the thread, once per turn
        self.built_pending = self.built  # end of the last record dispatched (the next batch's checkpoint)

    # ---- load ---------------------------------------------------------------------------------

    def load_queues(self) -> dict[tuple[str, int], "RocksConsumeQueue"]:
        """Every queue with a ``max`` entry, its offsets read from the offset family (no unit read)."""
        found: dict[tuple[str, int], RocksConsumeQueue] = {}
        mins: dict[tuple[str, int], tuple[int, int]] = {}
        for raw_key, value in self.offsets.items():
            parsed = parse_offset_key(bytes(raw_key))
            if parsed is None or parsed[0] == CHECKPOINT_TOPIC:
                continue
            topic, kind, qid = parsed
            phys, cq_offset = OFFSET_VALUE.unpack(value)
            if kind == b"max":
                cq = RocksConsumeQueue(topic, qid, self)
                cq.next_offset = cq_offset + 1
                cq.written = cq_offset + 1
                cq.max_physic_offset = phys + 1  # its start + 1: puts and truncation compare starts
                cq.min_written = True
                found[(topic, qid)] = cq
            elif kind == b"min":
                mins[(topic, qid)] = (phys, cq_offset)
        for key, (phys, low) in mins.items():
            if key in found:
                found[key].low = low
                found[key].min_unit_phys = phys  # retention need not read the unit to know it
        return found

    # ---- write --------------------------------------------------------------------------------

    def mark(self, cq: "RocksConsumeQueue") -> None:
        self.dirty[cq] = None
        if self.reactor is not None and not self._scheduled and self._writing is None:
            self._scheduled = True
            self.reactor.callLater(0, self._write_turn)

    @property
    def unwritten(self) -> bool:
        return bool(self.dirty) or self._writing is not None or bool(self._dead)

    def _batch(self) -> tuple[Any, list[tuple["RocksConsumeQueue", int]]]:
        """A WriteBatch of every waiting unit, the queues' max and min entries and the checkpoint."""
        wb = rocksdict.WriteBatch(raw_mode=True)
        taken = []
        offsets_cf = self.db.get_column_family_handle(OFFSET_CF)
        for prefix, qid in self._dead:
            wb.delete_range(unit_key(prefix, qid, 0), prefix + _QID.pack(qid) + b"\x02")
            for kind in (b"max", b"min"):
                wb.delete(offset_key(prefix, kind, qid), offsets_cf)
        self._dead = []
        for cq in self.dirty:
            mem = cq.mem
            if not mem:
                continue
            prefix, qid = cq.prefix, cq.queue_id
            first = cq.written
            for i, (phys, size, tags, store_ts) in enumerate(mem):
                wb.put(unit_key(prefix, qid, first + i), VALUE.pack(phys, size, tags, store_ts))
            last = first + len(mem) - 1
            wb.put(offset_key(prefix, b"max", qid), OFFSET_VALUE.pack(mem[-1][0], last), offsets_cf)
            if first == cq.low and not cq.min_written:
                wb.put(offset_key(prefix, b"min", qid), OFFSET_VALUE.pack(mem[0][0], cq.low), offsets_cf)
                cq.min_written = True
            taken.append((cq, len(mem)))
        self.dirty = {}
        wb.put(_CHECKPOINT_KEY, struct.pack(">q", self.built_pending), offsets_cf)
        return wb, taken

    @staticmethod
    def _written(taken: list[tuple["RocksConsumeQueue", int]]) -> None:
        for cq, n in taken:
            del cq.mem[:n]
            cq.written += n

    def _write_turn(self) -> None:
        self._scheduled = False
        if self._writing is not None or not (self.dirty or self._dead):
            return
        wb, taken = self._batch()
        built = self.built_pending
        fut = self._writing = self._thread.submit(self.db.write, wb)
        reactor = self.reactor

        def done(f: Future) -> None:
            reactor.callFromThread(self._wrote, f, taken, built)

        fut.add_done_callback(done)

    def _wrote(self, fut: Future, taken: list[tuple["RocksConsumeQueue", int]], built: int) -> None:
        self._writing = None
        exc = fut.exception()
        if exc is not None:  # units stay in memory: the next turn writes them again with the rest
            log.error("consume queue database: writing a batch failed: %s", exc)
            for cq, _ in taken:
                self.dirty[cq] = None
        else:
            self._written(taken)
            self.built = built
        if (self.dirty or self._dead) and self.reactor is not None and not self._scheduled:
            self._scheduled = True
            self.reactor.callLater(0.01 if exc is not None else 0, self._write_turn)

    def write_now(self) -> None:
        """Write everything waiting, here (load, shutdown): the thread's write first."""
        if self._writing is not None:
            self._writing.exception()  # waits
            self._writing = None
        while self.dirty or self._dead:
            wb, taken = self._batch()
            self.db.write(wb)
            self._written(taken)
        self.built = self.built_pending

    def forget(self, cq: "RocksConsumeQueue") -> None:
        """A deleted queue: its units and offsets go with the next batch."""
        self.dirty.pop(cq, None)
        self._dead.append((cq.prefix, cq.queue_id))
        if self.reactor is not None and not self._scheduled and self._writing is None:
            self._scheduled = True
            self.reactor.callLater(0, self._write_turn)

    def close(self) -> None:
        self.reactor = None
        self.write_now()
        self._thread.shutdown(wait=True)
        self.offsets.close()  # the column family holds the database open too
        self.db.close()

    # ---- read ---------------------------------------------------------------------------------

    def get_units(self, prefix: bytes, queue_id: int, start: int, count: int) -> list[bytes | None]:
        got: list[bytes | None] = self.db.get([unit_key(prefix, queue_id, start + i) for i in range(count)])
        return got


class RocksConsumeQueue:
    """One topic/queue of a RocksDB store, with ConsumeQueue's interface (the dispatcher's, the pull
    path's, recovery's and retention's), so one code path serves both stores."""

    __slots__ = ("topic", "queue_id", "units", "prefix", "next_offset", "written", "low", "mem",
                 "max_physic_offset", "min_written", "later", "min_unit_phys", "used", "mapped", "charged",
                 "maps")

    ext = None
    queue = _NO_FILES
    needs_file = False
    waiting = False

    def __init__(self, topic: str, queue_id: int, units: RocksUnits) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.units = units
        self.prefix = topic_prefix(topic)
        self.next_offset = 0  # the cq offset the next unit gets
        self.written = 0  # units below this cq offset are in the database; mem holds the rest
        self.low = 0  # first readable cq offset
        self.mem: list[tuple[int, int, int, int]] = []
        self.max_physic_offset = -1
        self.min_written = False
        self.later: Callable | None = None
        self.min_unit_phys = -1
        self.used = self.mapped = True
        self.charged = 0
        self.maps = None

    # ---- write ----------------------------------------------------------------------------

    def ensure_room(self, cq_offset: int) -> None:
        pass  # no file to make

    def put_next(self, phys_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        self.put(phys_offset, size, tags_code, cq_offset)
        return True

    def put(self, phys_offset: int, size: int, tags_code: int, cq_offset: int, store_ts: int = 0,
            bitmap: bytes | None = None) -> None:
        if phys_offset + size <= self.max_physic_offset:
            return  # there already (recovery dispatches again)
        if cq_offset != self.next_offset:
            if cq_offset < self.next_offset:
                return
            if self.next_offset == 0 and not self.mem:  # a queue whose history is gone starts here
                self.low = self.written = self.next_offset = cq_offset
            else:
                log.warning("consume queue %s/%d: unit %d written at %d", self.topic, self.queue_id,
                            cq_offset, self.next_offset)
        self.mem.append((phys_offset, size, tags_code, store_ts))
        self.next_offset += 1
        self.max_physic_offset = phys_offset + size
        units = self.units
        if phys_offset + size > units.built_pending:
            units.built_pending = phys_offset + size
        units.mark(self)

    def write_pending(self) -> bool:
        return True

    # ---- read -----------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        return self.next_offset

    @property
    def min_offset(self) -> int:
        return self.low

    @property
    def min_logic_offset(self) -> int:
        return self.low * UNIT_SIZE

    def read_units(self, cq_offset: int, max_bytes: int) -> bytes | None:
        if cq_offset < self.low or cq_offset >= self.next_offset:
            return None
        count = min(max(1, max_bytes // UNIT_SIZE), self.next_offset - cq_offset, READ_UNITS)
        out = bytearray()
        written = self.written
        if cq_offset < written:
            n = min(count, written - cq_offset)
            for raw in self.units.get_units(self.prefix, self.queue_id, cq_offset, n):
                if raw is None:
                    break
                phys, size, tags, _ = VALUE.unpack(raw)
                out += UNIT.pack(phys, size, tags)
            else:
                for phys, size, tags, _ in self.mem[:count - n]:
                    out += UNIT.pack(phys, size, tags)
        else:
            i = cq_offset - written
            for phys, size, tags, _ in self.mem[i:i + count]:
                out += UNIT.pack(phys, size, tags)
        return bytes(out) or None

    def unit_at(self, cq_offset: int) -> tuple[int, int, int] | None:
        raw = self.read_units(cq_offset, UNIT_SIZE)
        return UNIT.unpack(raw) if raw else None

    def roll_next_file(self, cq_offset: int) -> int:
        return max(cq_offset + 1, self.low)

    # ---- lifecycle and maintenance -----------------------------------------------------------

    def load(self, mapped: bool = True) -> None:
        pass

    def recover(self) -> None:
        pass  # the offset family says where each queue ends; the commit log fills in past the checkpoint

    def use(self) -> None:
        pass

    def unmap(self) -> bool:
        return False

    def truncate_dirty(self, phys_end: int) -> None:
        """Drop units pointing at or past phys_end (the commit log was cut there)."""
        self.units.write_now()
        cut = self.next_offset
        while cut > self.low:
            unit = self.unit_at(cut - 1)
            if unit is None or unit[0] < phys_end:
                break
            cut -= 1
        if cut == self.next_offset:
            return
        db = self.units.db
        for off in range(cut, self.next_offset):
            db.delete(unit_key(self.prefix, self.queue_id, off))
        self.next_offset = self.written = cut
        self.min_unit_phys = -1
        offsets = self.units.offsets
        last = self.unit_at(cut - 1) if cut > self.low else None
        if last is None:
            offsets.delete(offset_key(self.prefix, b"max", self.queue_id))
            self.max_physic_offset = -1
        else:
            offsets.put(offset_key(self.prefix, b"max", self.queue_id), OFFSET_VALUE.pack(last[0], cut - 1))
            self.max_physic_offset = last[0] + last[1]

    def correct_min_offset(self, min_phys: int) -> None:
        """Move the first readable unit past units whose records were deleted (a binary search)."""
        if 0 <= min_phys <= self.min_unit_phys or self.next_offset <= self.low:
            return
        first = self.unit_at(self.low)
        if first is not None and first[0] >= min_phys:
            self.min_unit_phys = first[0]
            return
        lo, hi = self.low, self.next_offset
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.unit_at(mid)
            if unit is not None and unit[0] >= min_phys:
                hi = mid
            else:
                lo = mid + 1
        self.low = lo
        unit = self.unit_at(lo)
        self.min_unit_phys = unit[0] if unit is not None else self.max_physic_offset
        self.units.offsets.put(offset_key(self.prefix, b"min", self.queue_id),
                               OFFSET_VALUE.pack(unit[0] if unit else -1, lo))

    def delete_expired(self, min_phys: int) -> int:
        """Units below the first readable one are deleted from the database; how many."""
        before = self.low
        self.correct_min_offset(min_phys)
        gone = min(self.low, self.written) - before
        if gone > 0:
            self.units.db.delete_range(unit_key(self.prefix, self.queue_id, before),
                                       unit_key(self.prefix, self.queue_id, before + gone))
        return 0  # no file deleted

    def close(self) -> None:
        pass  # RocksUnits.close writes and closes the database

    def destroy(self) -> None:
        self.mem = []
        self.units.forget(self)
