"""Index files: hash slots chaining 20-byte entries, for lookup by message key and time."""
from __future__ import annotations

import logging
import os
import re
import struct
import time
from concurrent.futures import Executor, Future
from typing import Callable

from rmqtx.accel import accel
from rmqtx.common.message import PROPERTY_KEYS, PROPERTY_UNIQ_KEY
from rmqtx.common.sysflag import TRANSACTION_MASK, TRANSACTION_ROLLBACK

from . import record as R
from .dispatch_request import DispatchRequest
from .mapped_file import MappedFile, StoreError, remove_leftovers, retire

log = logging.getLogger(__name__)

HEADER = struct.Struct(">qqqqii")  # beginTs, endTs, beginPhy, endPhy, hashSlotCount, indexCount
ENTRY = struct.Struct(">iqii")  # keyHash, phyOffset, timeDiff (s), prevIndex
SLOT = struct.Struct(">i")
HEADER_SIZE = 40
_NAME = re.compile(r"^\d{17}$")
_INT_MAX = 0x7FFFFFFF


def index_put_py(buf: R.WriteBuffer, slot_num: int, index_num: int, count: int, begin_ts: int, key_hash: int, phy: int,
              store_ts: int) -> int:
    """Write entry ``count`` and point its hash slot at it: the slot's previous entry (0: none), -1 if full."""
    if count >= index_num:
        return -1
    slot_pos = HEADER_SIZE + (key_hash % slot_num) * 4
    prev = SLOT.unpack_from(buf, slot_pos)[0]
    if prev <= 0 or prev > count:
        prev = 0
    if begin_ts <= 0:
        diff = 0
    else:
        diff = (store_ts - begin_ts) // 1000
        diff = _INT_MAX if diff > _INT_MAX else 0 if diff < 0 else diff
    ENTRY.pack_into(buf, HEADER_SIZE + slot_num * 4 + count * 20, key_hash, phy, diff, prev)
    SLOT.pack_into(buf, slot_pos, count)
    return prev


index_put = index_put_py
if accel is not None:
    index_put = accel.index_put  # noqa: F811


def index_put_keys(f: "IndexFile", prefix: str, uniq_key: str | None, keys: str | None, phy: int,
                   store_ts: int) -> int:
    """Put a record's entries (prefix + UNIQ_KEY, then prefix + each KEYS word) into f and write its
    header: how many went in; ``-1 - how many`` when f filled up first (its header is then left to the caller)."""
    hash2 = R.index_key_hash2
    done = 0
    if uniq_key:
        if not f.put_key(hash2(prefix, uniq_key), phy, store_ts):
            return -1
        done = 1
    if keys:
        for k in keys.split(" "):
            if k:
                if not f.put_key(hash2(prefix, k), phy, store_ts):
                    return -1 - done
                done += 1
    f.write_header()
    return done


index_put_keys_py = index_put_keys
if accel is not None:
    index_put_keys = accel.index_put_keys  # noqa: F811


def index_file_name(ms: float) -> str:
    """yyyyMMddHHmmssSSS in local time, as Java names index files."""
    secs = int(ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(secs)) + f"{int(ms) % 1000:03d}"


class IndexFile:
    """One index file; the header is kept in attributes and written through after each record."""

    def __init__(self, mf: MappedFile, slot_num: int, index_num: int) -> None:
        self.mf = mf
        self.mm = mf.mm
        self.slot_num = slot_num
        self.index_num = index_num
        self.entries_pos = HEADER_SIZE + slot_num * 4
        (self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
         self.slot_count, self.index_count) = HEADER.unpack_from(self.mm, 0)
        if self.index_count <= 0:
            self.index_count = 1  # entry 0 is never used

    @property
    def name(self) -> str:
        return os.path.basename(self.mf.path)

    @property
    def never_used(self) -> bool:
        """Still all zeros: a rolled-to file has a header (it inherits its predecessor's end)."""
        return self.index_count <= 1 and self.end_phy == 0 and self.begin_ts == 0

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def inherit(self, end_phy: int, end_ts: int) -> None:
        """A new file starts where the previous one ended."""
        if end_phy > 0:
            self.begin_phy = self.end_phy = end_phy
        if end_ts > 0:
            self.begin_ts = self.end_ts = end_ts
        self.write_header()

    def write_header(self) -> None:
        HEADER.pack_into(self.mm, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                         self.slot_count, self.index_count)

    def put_key(self, key_hash: int, phy: int, store_ts: int) -> bool:
        """Add one entry at the head of its slot's chain; False when the file is full."""
        count = self.index_count
        prev = index_put(self.mm, self.slot_num, self.index_num, count, self.begin_ts, key_hash, phy, store_ts)
        if prev < 0:
            return False
        if count <= 1:
            self.begin_phy = phy
            self.begin_ts = store_ts
        if prev == 0:
            self.slot_count += 1
        self.index_count = count + 1
        self.end_phy = phy
        self.end_ts = store_ts
        return True

    def is_time_matched(self, begin: int, end: int) -> bool:
        return ((begin < self.begin_ts and end > self.end_ts)
                or self.begin_ts <= begin <= self.end_ts
                or self.begin_ts <= end <= self.end_ts)

    def select(self, key_hash: int, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append physical offsets of entries with this hash stored within [begin, end]."""
        count = self.index_count
        if count <= 1:
            return
        mm = self.mm
        nxt = SLOT.unpack_from(mm, HEADER_SIZE + (key_hash % self.slot_num) * 4)[0]
        if nxt <= 0 or nxt > count:
            return
        while len(out) < max_num:
            khr, phy, diff, prev = ENTRY.unpack_from(mm, self.entries_pos + nxt * 20)
            if diff < 0:
                break
            t = self.begin_ts + diff * 1000
            if khr == key_hash and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == nxt or t < begin:
                break
            nxt = prev

    def _unlink_entry(self, i: int) -> bool:
        """Undo entry i (the newest of its slot); True if its slot became empty."""
        pos = self.entries_pos + i * 20
        key_hash, _, _, prev = ENTRY.unpack_from(self.mm, pos)
        slot_pos = HEADER_SIZE + (key_hash % self.slot_num) * 4
        if SLOT.unpack_from(self.mm, slot_pos)[0] == i:
            SLOT.pack_into(self.mm, slot_pos, prev)
        self.mm[pos:pos + 20] = bytes(20)
        return prev <= 0

    def repair(self) -> None:
        """Undo entries written past the header's count (a crash between entry and header)."""
        i = self.index_count
        stray = []
        while i < self.index_num:
            if self.mm[self.entries_pos + i * 20:self.entries_pos + i * 20 + 20] == bytes(20):
                break
            stray.append(i)
            i += 1
        for i in reversed(stray):
            self._unlink_entry(i)

    def rollback(self, phys_end: int) -> None:
        """Remove the newest entries pointing at or past phys_end, restoring their slots."""
        while self.index_count > 1:
            i = self.index_count - 1
            _, phy, _, _ = ENTRY.unpack_from(self.mm, self.entries_pos + i * 20)
            if phy < phys_end:
                break
            if self._unlink_entry(i):
                self.slot_count -= 1
            self.index_count = i
        if self.index_count > 1:
            _, phy, diff, _ = ENTRY.unpack_from(self.mm, self.entries_pos + (self.index_count - 1) * 20)
            self.end_phy = phy
            self.end_ts = self.begin_ts + diff * 1000
        self.write_header()


def _entries(prefix: str, uniq_key: str | None, keys: str | None, phy: int, store_ts: int) -> list[tuple[int, int, int]]:
    """A record's index entries as (hash, phy, store time): UNIQ_KEY first, then each KEYS word."""
    hash2 = R.index_key_hash2
    out = [(hash2(prefix, uniq_key), phy, store_ts)] if uniq_key else []
    if keys:
        out.extend((hash2(prefix, k), phy, store_ts) for k in keys.split(" ") if k)
    return out


class IndexService:
    """The index files of a store, oldest first; builds entries for each dispatched record."""

    def __init__(self, directory: str, slot_num: int, index_num: int, max_batch: int,
                 allocator: Executor | None, clock: Callable[[], float], preallocate: bool = False) -> None:
        self.directory = directory
        self.preallocate = preallocate
        self.slot_num = slot_num
        self.index_num = index_num
        self.file_size = HEADER_SIZE + slot_num * 4 + index_num * 20
        self.max_batch = max_batch
        self.allocator = allocator
        self.clock = clock
        self.files: list[IndexFile] = []
        self.dirty: set[IndexFile] = set()
        self._spare: Future | None = None
        #: Set by a running store: called with (self, future) when entries must wait for a file the
        #: allocator thread is making; the store then calls :meth:`write_pending` on the reactor.
        self.later: Callable[["IndexService", Future | None], None] | None = None
        #: (hash, phy, store_ts) entries waiting for a file, in order; None when none waits.
        self._pending: list[tuple[int, int, int]] | None = None
        self._pending_phy = -1

    def load(self) -> None:
        if not os.path.isdir(self.directory):
            return
        remove_leftovers(self.directory)
        for name in sorted(n for n in os.listdir(self.directory) if _NAME.match(n)):
            try:
                mf = MappedFile.open(os.path.join(self.directory, name), self.file_size)
            except StoreError:
                raise StoreError(f"index file {name} does not match maxHashSlotNum/maxIndexNum")
            self.files.append(IndexFile(mf, self.slot_num, self.index_num))
        while len(self.files) > 1 and self.files[-1].never_used:
            self.files.pop().mf.destroy()  # a spare made ahead of a crash; the file in use is the one before
        if self.files:
            self.files[-1].repair()

    @property
    def end_phy_offset(self) -> int:
        return self.files[-1].end_phy if self.files else 0

    def _new_path(self) -> str:
        name = index_file_name(self.clock() * 1000)
        last = self.files[-1].name if self.files else ""
        if name <= last:
            name = f"{int(last) + 1:017d}"
        return os.path.join(self.directory, name)

    def _prepare_spare(self) -> None:
        if self.allocator is None or self._spare is not None:
            return
        self._spare = self.allocator.submit(MappedFile.create, self._new_path(), self.file_size, 0, self.preallocate)

    def _roll(self) -> IndexFile:
        mf = None
        if self._spare is not None:
            fut, self._spare = self._spare, None
            try:
                mf = fut.result()
            except OSError as e:
                log.warning("pre-allocating an index file failed: %s", e)
        if mf is None:
            os.makedirs(self.directory, exist_ok=True)
            mf = MappedFile.create(self._new_path(), self.file_size, 0, self.preallocate)
        f = IndexFile(mf, self.slot_num, self.index_num)
        if self.files:
            prev = self.files[-1]
            prev.write_header()
            self.dirty.add(prev)
            f.inherit(prev.end_phy, prev.end_ts)
        self.files.append(f)
        return f

    @property
    def waiting(self) -> bool:
        """Entries wait for a file the allocator thread is making (not searchable yet)."""
        return self._pending is not None

    def _roll_or_wait(self) -> IndexFile | None:
        """A new current file; with ``later`` set, None instead of waiting for the allocator (the store is told)."""
        if self.later is None:
            return self._roll()
        self._prepare_spare()
        fut = self._spare
        if fut is not None and not fut.done():
            self.later(self, fut)
            return None
        if fut is not None and fut.exception() is not None:
            self._spare = None
            log.error("making an index file failed: %s", fut.exception())
            self.later(self, None)
            return None
        return self._roll()

    def _writable(self) -> IndexFile | None:
        f = self.files[-1] if self.files else None
        if f is None or f.is_full:
            f = self._roll_or_wait()
        elif self._spare is None and f.index_count * 2 > self.index_num:
            self._prepare_spare()
        return f

    def dispatch(self, req: DispatchRequest) -> None:
        """The pipeline's index step (Java's CommitLogDispatcherBuildIndex): index one record under
        topic#UNIQ_KEY and topic#KEY; a file that cannot be made is logged, the record stays unindexed."""
        try:  # one method, no helper: this runs for every message put
            topic, _, phy, _, _, store_ts, _, sys_flag, _, props = req  # at once: cheaper than field by field
            if (sys_flag & TRANSACTION_MASK) == TRANSACTION_ROLLBACK:
                return
            assert props is not None  # the pipeline parses what the writer did not
            uniq_key, keys = props.get(PROPERTY_UNIQ_KEY), props.get(PROPERTY_KEYS)
            prefix = topic + "#"
            if self._pending is not None:  # behind entries that wait for a file: keep the order
                if phy >= self._pending_phy:
                    self._pending.extend(_entries(prefix, uniq_key, keys, phy, store_ts))
                    self._pending_phy = phy
                return
            f = self.files[-1] if self.files else None
            if f is None or f.index_count >= self.index_num or (self._spare is None and f.index_count * 2 > self.index_num):
                f = self._writable()
                if f is None:
                    self._pending, self._pending_phy = _entries(prefix, uniq_key, keys, phy, store_ts), phy
                    return
            if phy < f.end_phy:
                return
            # the header goes into the mapping at once: a killed process leaves one matching its slots
            done = index_put_keys(f, prefix, uniq_key, keys, phy, store_ts)
            if done < 0:  # full: the rest into the next file, or waiting for it
                self._put_all(f, _entries(prefix, uniq_key, keys, phy, store_ts)[-1 - done:])
                return
            if f not in self.dirty:
                self.dirty.add(f)
        except OSError as e:
            log.error("index build failed for offset %d: %s", req.physical_offset, e)

    def _put_all(self, f: IndexFile, entries: list[tuple[int, int, int]]) -> bool:
        """Put entries, rolling to new files as they fill; False when the rest waits for a file."""
        for i, (h, phy, ts) in enumerate(entries):
            while not f.put_key(h, phy, ts):
                nf = self._roll_or_wait()
                if nf is None:
                    self._pending, self._pending_phy = entries[i:], phy
                    break
                f = nf
            else:
                continue
            break
        f.write_header()  # in the mapping at once: a killed process leaves a header matching its slots
        self.dirty.add(f)
        return self._pending is None

    def write_pending(self) -> bool:
        """Put the entries that waited for a file (reactor thread); False if they wait for another one."""
        pending, self._pending = self._pending, None
        if pending is None:
            return True
        f = self._writable()
        if f is None:
            self._pending = pending + (self._pending or [])
            return False
        return self._put_all(f, pending)

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """(physical offsets, last update timestamp, last update offset), newest files first."""
        max_num = min(max_num, self.max_batch)
        out: list[int] = []
        h = R.index_key_hash(f"{topic}#{key}")
        if self._pending:  # the newest entries, waiting for their file: found all the same
            for eh, phy, ts in reversed(self._pending):
                if eh == h and begin <= ts <= end and len(out) < max_num:
                    out.append(phy)
        if not self.files:
            return out, 0, 0
        last = self.files[-1]
        for f in reversed(self.files):
            if f.is_time_matched(begin, end):
                f.select(h, max_num, begin, end, out)
            if f.begin_ts < begin or len(out) >= max_num:
                break
        return out, last.end_ts, last.end_phy

    def truncate(self, phys_end: int) -> None:
        """Drop entries for records at or past phys_end (cut from the commit log)."""
        if self._pending is not None:
            self._pending = [e for e in self._pending if e[1] < phys_end]
        while self.files:
            f = self.files[-1]
            if f.index_count > 1 and f.begin_phy >= phys_end and len(self.files) > 1:
                self.files.pop().mf.destroy()
                self.dirty.discard(f)
                continue
            if f.end_phy >= phys_end:
                f.rollback(phys_end)
                self.dirty.add(f)
            break

    def delete_expired(self, min_phys: int) -> int:
        """Delete files (never the last) whose entries all point below min_phys."""
        expired = []
        while len(self.files) > 1 and self.files[0].end_phy < min_phys:
            f = self.files.pop(0)
            self.dirty.discard(f)
            expired.append(f.mf)
        retire(expired, self.allocator)
        return len(expired)

    def take_dirty(self) -> list[MappedFile]:
        """Files to sync now; their headers are current."""
        out = [f.mf for f in self.dirty]
        self.dirty.clear()
        return out

    def close(self) -> None:
        if self._spare is not None:
            fut, self._spare = self._spare, None
            try:
                fut.result().destroy()
            except OSError:
                pass
        for f in self.files:
            f.write_header()
            f.mf.close()
