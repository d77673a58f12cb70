"""Consume queues: per topic and queue, 20-byte units pointing into the commit log."""
from __future__ import annotations

import logging
import mmap
import os
import struct
from concurrent.futures import Executor, Future
from typing import Callable

from rmqtx.accel import accel

from .consume_queue_ext import ConsumeQueueExt, is_ext_addr
from .cq_maps import MappedQueues
from .mapped_file import MappedFile, MappedFileQueue, StoreError

log = logging.getLogger(__name__)

UNIT = struct.Struct(">qiq")  # commit log offset, size, tag hash code
UNIT_SIZE = 20
_PRE_BLANK = UNIT.pack(0, 0x7FFFFFFF, 0)


def batch_limits(max_count: int, max_bytes: int, memory_count: int, disk_bytes: int,
                 disk_count: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Java's isTheBatchFull, as limits: ((count, bytes) for records still in memory, the same for
    records on disk). A batch of ``count`` records and ``total`` bytes is full before one more of
    ``size`` when ``count >= limit_count or total + size > limit_bytes`` (and it holds one at least).
    ``memory_count`` and ``disk_count`` are the configured maxTransferCount minus one, as Java compares.
    Computed once per read: the per-record test is then two comparisons, no call."""
    return ((min(max_count, memory_count + 1), max_bytes), (min(max_count, disk_count + 1), disk_bytes))


def scan_units_py(units: bytes, i: int, n: int, mm: mmap.mmap, mm_from: int, mm_wrote: int, max_phy: int, memory: int,
                  count: int, total: int, mem_n: int, mem_b: int, disk_n: int, disk_b: int,
                  tags: frozenset | None, ext_max: int, messages: list, qofs: list,
                  base: int) -> tuple[int, int, int, int]:
    """The plain run of a pull from unit ``i``: copy each unit's record out of one commit log file
    (``mm``, starting at store offset ``mm_from``, ``mm_wrote`` bytes written), skipping units whose
    tags code is not in ``tags``, until the batch is full (the :func:`batch_limits` for records in
    memory, ``mem_n`` records or ``mem_b`` bytes, and on disk) or a unit needs get_message's general path: an ext address (tag <= ``ext_max``), a
    record outside ``mm`` or an empty one. Returns (next i, count, total bytes, last commit log
    offset seen or -1); ``messages`` and ``qofs`` (queue offsets, ``base`` + unit number) grow."""
    unpack = UNIT.unpack_from
    last = -1
    n = min(n, len(units))
    mm_wrote = min(mm_wrote, len(mm))
    while 0 <= i and i + UNIT_SIZE <= n:
        phy, size, tag = unpack(units, i)
        if total and count and (count >= disk_n or total + size > disk_b if max_phy - phy > memory
                                else count >= mem_n or total + size > mem_b):
            break  # batch_limits: the batch is full
        if tag <= ext_max:
            break
        if tags is not None and tag not in tags:
            last = phy
            i += UNIT_SIZE
            continue
        pos = phy - mm_from
        if pos < 0 or size <= 0 or pos + size > mm_wrote:
            break
        messages.append(mm[pos:pos + size])
        qofs.append(base + i // UNIT_SIZE)
        count += 1
        total += size
        last = phy
        i += UNIT_SIZE
    return i, count, total, last


scan_units = scan_units_py
if accel is not None:
    scan_units = accel.scan_units  # noqa: F811


_HEAD_READ = 4096


def _valid(off: int, size: int) -> bool:
    return off >= 0 and size > 0


def _units_end(mf: MappedFile) -> tuple[int, tuple[int, int] | None, int, bool]:
    """Where the valid units of an unmapped file end, the last one's (offset, size), the first
    one's offset (-1 when none) and whether bytes follow the end (a half-written unit), read with
    pread: its first page, which holds all of a queue of few messages, else a binary search
    (units are written in order, the rest of the file is zeros)."""
    size = mf.file_size
    fd = os.open(mf.path, os.O_RDONLY)
    try:
        actual = os.fstat(fd).st_size
        if actual != size:
            raise StoreError(f"{mf.path}: size {actual} differs from the configured {size}")
        head = os.pread(fd, min(_HEAD_READ, size), 0)
        pos = 0
        last = None
        first = -1
        n = len(head) - len(head) % UNIT_SIZE
        while pos < n:
            off, length, _ = UNIT.unpack_from(head, pos)
            if not _valid(off, length):
                return pos, last, first, any(head[pos:pos + UNIT_SIZE])
            if last is None:
                first = off
            last = (off, length)
            last = (off, length)
            pos += UNIT_SIZE
        lo, hi = pos // UNIT_SIZE, size // UNIT_SIZE  # unit lo - 1 is valid; find the first invalid one
        while lo < hi:
            mid = (lo + hi) // 2
            off, length, _ = UNIT.unpack(os.pread(fd, UNIT_SIZE, mid * UNIT_SIZE))
            if _valid(off, length):
                lo = mid + 1
            else:
                hi = mid
        if lo > 0:
            off, length, _ = UNIT.unpack(os.pread(fd, UNIT_SIZE, (lo - 1) * UNIT_SIZE))
            last = (off, length)
        torn = lo * UNIT_SIZE < size and any(os.pread(fd, UNIT_SIZE, lo * UNIT_SIZE))
        return lo * UNIT_SIZE, last, first, torn
    finally:
        os.close(fd)


class ConsumeQueue:
    """One topic/queue's index of commit log positions, numbered by consume queue offset.

    With an ext root (enableConsumeQueueExt) each unit's tag field holds the address of an ext unit.
    """

    # slots: one per queue that has had a message, tens of thousands on a busy broker (docs/many-queues.md)
    __slots__ = ("topic", "queue_id", "file_size", "queue", "ext", "max_physic_offset", "min_logic_offset",
                 "_prealloc_mark", "later", "_pending", "mapped", "used", "charged", "maps", "min_unit_phys")

    def __init__(self, topic: str, queue_id: int, root_dir: str, file_size: int,
                 allocator: Executor | None = None, ext_root: str | None = None, ext_file_size: int = 0,
                 preallocate: bool = False) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        # no descriptor kept per file (a broker of 16,000 queues held 32,000) and no readahead on a
        # fault (a new queue's first unit faulted in megabytes): see MappedFile.sync and mapped_file._map
        self.queue = MappedFileQueue(os.path.join(root_dir, topic, str(queue_id)), file_size, allocator, preallocate,
                                     keep_fds=False, readahead=False)
        self.ext = (ConsumeQueueExt(topic, queue_id, ext_root, ext_file_size, allocator, preallocate)
                    if ext_root else None)
        self.max_physic_offset = -1  # end (offset + size) of the last record indexed
        self.min_logic_offset = 0
        self._prealloc_mark = file_size // 2
        #: Set by a running store: called with (queue, future) when a unit must wait for its file,
        #: which the allocator thread makes; the store then calls :meth:`write_pending` on the reactor.
        #: The future is None when making it failed (the store retries later).
        self.later: Callable[["ConsumeQueue", Future | None], None] | None = None
        #: Units (in order) that wait for a file being made; None when none waits.
        self._pending: list[tuple] | None = None
        #: False while the files are not mapped (loaded lazily, or unmapped as idle): :meth:`use` maps them.
        self.mapped = False
        self.used = False  # used since the bound's ring last passed (cq_maps)
        self.charged = 0  # files the bound counts for this queue
        #: The store's bound on mapped files, or None: then files stay mapped once mapped.
        self.maps: MappedQueues | None = None
        #: Commit log offset of the first readable unit, -1 when not known: retention's look at an
        #: unmapped queue need not map it while the commit log has not been cut past this.
        self.min_unit_phys = -1

    # ---- lifecycle ------------------------------------------------------------------------

    def load(self, mapped: bool = True) -> None:
        """List (and with ``mapped`` map) the files; with ext files, always mapped."""
        if self.ext is not None:
            mapped = True
        self.queue.load(mapped)
        self.mapped = mapped
        if self.ext is not None:
            self.ext.load()

    def use(self) -> None:
        """Map the files if they are not (reactor thread): before any access to a file's ``mm``."""
        self.used = True
        if not self.mapped:
            for mf in self.queue.files:
                mf.map(self.queue.readahead)
            self.mapped = True
            if self.maps is not None:
                self.maps.add(self, len(self.queue.files) or 1)

    def unmap(self, dispose: Callable[[mmap.mmap], object] | None = None) -> bool:
        """Unmap the files (an idle queue); False when it cannot be now (ext files are kept mapped)."""
        if self.ext is not None:
            return False
        for mf in self.queue.files:
            mf.unmap(dispose)
        self.mapped = False
        return True

    def recover(self) -> None:
        """Find the end of valid units in the last files (units must have offset >= 0, size > 0).

        An unmapped queue's files are read, not mapped (a broker of 100,000 queues restarts
        without mapping them): the last file's first page, and a binary search when it is fuller.
        """
        files = self.queue.files
        if not files:
            return
        if not self.mapped:
            self._recover_unmapped()
            return
        start = max(0, len(files) - 3)
        end = files[start].from_offset
        for mf in files[start:]:
            pos = 0
            while pos < self.file_size:
                off, size, _ = UNIT.unpack_from(mf.mm, pos)
                if off < 0 or size <= 0:
                    break
                self.max_physic_offset = off + size
                pos += UNIT_SIZE
            end = mf.from_offset + pos
            if pos < self.file_size:
                break
        self.queue.truncate_dirty(end)
        last = self.queue.last
        if last is not None:
            self._zero_garbage(last, last.wrote)
        self.queue.flushed_where = self.queue.max_offset
        if self.ext is not None:
            self.ext.recover(self._last_ext_addr())

    def _recover_unmapped(self) -> None:
        files = self.queue.files
        start = max(0, len(files) - 3)
        end = files[start].from_offset
        torn = False
        for mf in files[start:]:
            pos, last, first, torn = _units_end(mf)
            if last is not None:
                self.max_physic_offset = last[0] + last[1]
            if mf is files[0] and self.min_logic_offset <= mf.from_offset:
                self.min_unit_phys = first  # the first readable unit, once correct_min_offset has run
            end = mf.from_offset + pos
            if pos < self.file_size:
                break
        self.queue.truncate_dirty(end)
        last_mf = self.queue.last
        if torn and last_mf is not None and last_mf.wrote < self.file_size:  # a half-written unit past the end
            self.use()
            self._zero_garbage(last_mf, last_mf.wrote)
        self.queue.flushed_where = self.queue.max_offset

    def _last_ext_addr(self) -> int | None:
        """The ext address in the last unit's tag field, if it holds one."""
        last = self.queue.last
        if last is None or last.wrote < UNIT_SIZE:
            return None
        tag = UNIT.unpack_from(last.mm, last.wrote - UNIT_SIZE)[2]
        return tag if is_ext_addr(tag) else None

    def _zero_garbage(self, mf: MappedFile, pos: int) -> None:
        """Clear units past the end that a crash may have half written."""
        mm = mf.mm
        zero = bytes(UNIT_SIZE)
        while pos < self.file_size and mm[pos:pos + UNIT_SIZE] != zero:
            mm[pos:pos + UNIT_SIZE] = zero
            pos += UNIT_SIZE

    def close(self) -> None:
        if self.maps is not None:
            self.maps.forget(self)
        self.queue.close()
        if self.ext is not None:
            self.ext.close()

    def destroy(self) -> None:
        """Forget this queue; its files and emptied directories are deleted off the reactor."""
        self._pending = None
        if self.maps is not None:
            self.maps.forget(self)
        if self.ext is not None:
            self.ext.destroy()
        self.queue.destroy(parents=(os.path.dirname(self.queue.directory),))

    # ---- write ----------------------------------------------------------------------------

    @property
    def needs_file(self) -> bool:
        """True when the next unit needs a new file (or waits for one being made)."""
        last = self.queue.files[-1] if self.queue.files else None
        return last is None or last.wrote >= self.file_size or self._pending is not None

    @property
    def waiting(self) -> bool:
        """Units wait for a file the allocator thread is making (readable from memory meanwhile)."""
        return self._pending is not None

    def ensure_room(self, cq_offset: int) -> None:
        """Make sure the unit for cq_offset can be written (raises OSError if no file can be made).

        With ``later`` set (a running store) the file is made in the allocator thread instead and
        the unit waits for it: the reactor never waits for a file to be created.
        """
        self.use()
        last = self.queue.last
        if last is None or last.wrote >= self.file_size:
            if self.later is None:
                self._new_file(cq_offset)
            elif self._pending is None and self._start_file(cq_offset) is None:
                self._pending = []

    def _start_file(self, cq_offset: int) -> MappedFile | None:
        """The next file if the allocator already made it; else None, its making under way and the store told."""
        self.queue.prepare_next(cq_offset * UNIT_SIZE)
        fut = self.queue.next_future()
        if fut is not None and not fut.done():
            assert self.later is not None
            self.later(self, fut)
            return None
        if fut is not None and fut.exception() is not None:
            self.queue.discard_prepared()
            log.error("consume queue %s/%d: making a file failed: %s", self.topic, self.queue_id, fut.exception())
            assert self.later is not None
            self.later(self, None)
            return None
        return self._new_file(cq_offset)

    def _new_file(self, cq_offset: int) -> MappedFile:
        expect = cq_offset * UNIT_SIZE
        first = not self.queue.files
        mf = self.queue.last_for_write(expect)
        if not first and self.maps is not None:
            self.maps.grew(self)
        if first and cq_offset != 0 and mf.wrote == 0:
            # A queue whose history is gone starts mid-file: pad up to the expected unit.
            pad = expect - mf.from_offset
            mf.mm[0:pad] = _PRE_BLANK * (pad // UNIT_SIZE)
            mf.wrote = pad
            self.min_logic_offset = expect
            self.queue.flushed_where = mf.from_offset
        return mf

    def put_next(self, phys_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """The common case of :meth:`put`, for the put path: a unit already there, or (ext off) one
        next in the last file with room. False when :meth:`put` must take it."""
        if phys_offset + size <= self.max_physic_offset:
            return True
        if self.ext is not None or self._pending is not None or not self.mapped:
            return False
        self.used = True
        files = self.queue.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote >= self.file_size or mf.from_offset + mf.wrote != cq_offset * UNIT_SIZE:
            return False
        UNIT.pack_into(mf.mm, mf.wrote, phys_offset, size, tags_code)
        mf.wrote += UNIT_SIZE
        self.max_physic_offset = phys_offset + size  # above it, as checked first
        if mf.wrote >= self._prealloc_mark and not self.queue.next_pending:
            self.queue.prepare_next()
        return True

    def put(self, phys_offset: int, size: int, tags_code: int, cq_offset: int, store_ts: int = 0,
            bitmap: bytes | None = None) -> None:
        """Append the unit for cq_offset unless it is already there (with ext: its ext unit first)."""
        if phys_offset + size <= self.max_physic_offset:
            return
        self.use()
        if self._pending is not None:  # behind units that wait for a file: keep the order
            self._pending.append((phys_offset, size, tags_code, cq_offset, store_ts, bitmap))
            self.max_physic_offset = phys_offset + size
            return
        self._append(phys_offset, size, tags_code, cq_offset, store_ts, bitmap)

    def _append(self, phys_offset: int, size: int, tags_code: int, cq_offset: int, store_ts: int,
                bitmap: bytes | None) -> bool:
        """Write one unit; False when it must wait for a file (then it is the first pending one)."""
        files = self.queue.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote >= self.file_size:
            mf = self._new_file(cq_offset) if self.later is None else self._start_file(cq_offset)
            if mf is None:
                self._pending = [(phys_offset, size, tags_code, cq_offset, store_ts, bitmap)]
                self.max_physic_offset = max(self.max_physic_offset, phys_offset + size)
                return False
        if self.ext is not None and self.later is not None:
            making = self.ext.file_future(bitmap)
            if making is not None:  # the ext unit's file is not made yet: wait for it, as for our own
                self._pending = [(phys_offset, size, tags_code, cq_offset, store_ts, bitmap)]
                self.max_physic_offset = max(self.max_physic_offset, phys_offset + size)
                self.later(self, making)
                return False
        cur = mf.from_offset + mf.wrote
        expect = cq_offset * UNIT_SIZE
        if expect != cur:
            if expect < cur:
                return True
            log.warning("consume queue %s/%d: unit %d written at %d", self.topic, self.queue_id,
                        cq_offset, cur // UNIT_SIZE)
        if self.ext is not None:
            addr = self.ext.put(tags_code, store_ts, bitmap)
            if addr is not None:
                tags_code = addr
        UNIT.pack_into(mf.mm, mf.wrote, phys_offset, size, tags_code)
        mf.wrote += UNIT_SIZE
        self.max_physic_offset = max(self.max_physic_offset, phys_offset + size)
        if mf.wrote >= self._prealloc_mark and not self.queue.next_pending:
            self.queue.prepare_next()
        return True

    def write_pending(self) -> bool:
        """Write the units that waited for a file (reactor thread); False if they wait for another one."""
        pending, self._pending = self._pending, None
        if not pending:
            return True
        self.use()
        for i, unit in enumerate(pending):
            if not self._append(*unit):
                assert self._pending is not None
                self._pending.extend(pending[i + 1:])
                return False
        return True

    # ---- read -----------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        if self._pending:  # units waiting for their file are readable already
            return self._pending[-1][3] + 1
        return self.queue.max_offset // UNIT_SIZE

    @property
    def min_offset(self) -> int:
        if self._pending and not self.queue.files:
            return self._pending[0][3]
        return self.min_logic_offset // UNIT_SIZE

    def read_units(self, cq_offset: int, max_bytes: int) -> bytes | None:
        """Units from cq_offset to the end of its file (at most max_bytes), or None if absent."""
        offset = cq_offset * UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.queue.find(offset)
        if mf is None:
            return self._pending_units(cq_offset, max_bytes) if self._pending else None
        pos = offset - mf.from_offset
        if pos >= mf.wrote:
            return self._pending_units(cq_offset, max_bytes) if self._pending else None
        mm = mf.mm
        if mm is None or not self.mapped:
            self.use()
            mm = mf.mm
            assert mm is not None
        self.used = True
        return mm[pos:min(mf.wrote, pos + max_bytes)]

    def _pending_units(self, cq_offset: int, max_bytes: int) -> bytes | None:
        """Units still waiting for their file, from cq_offset on, encoded as the file will hold them
        (the tags code itself where an ext address will be: readers take it as a tags code)."""
        pending = self._pending
        assert pending
        i = cq_offset - pending[0][3]
        if i < 0 or i >= len(pending) or pending[i][3] != cq_offset:
            return None
        out = bytearray()
        for phys, size, tags, _, _, _ in pending[i:i + max(1, max_bytes // UNIT_SIZE)]:
            out += UNIT.pack(phys, size, tags)
        return bytes(out)

    def unit_at(self, cq_offset: int) -> tuple[int, int, int] | None:
        raw = self.read_units(cq_offset, UNIT_SIZE)
        return UNIT.unpack(raw) if raw else None

    def roll_next_file(self, cq_offset: int) -> int:
        per_file = self.file_size // UNIT_SIZE
        return cq_offset + per_file - cq_offset % per_file

    def _first_unit_at_or_after(self, mf: MappedFile, phys: int) -> int:
        """Byte position in mf of the first unit pointing at or after phys (units are ordered)."""
        lo, hi = 0, mf.wrote // UNIT_SIZE
        mm = mf.mm
        while lo < hi:
            mid = (lo + hi) // 2
            if UNIT.unpack_from(mm, mid * UNIT_SIZE)[0] < phys:
                lo = mid + 1
            else:
                hi = mid
        return lo * UNIT_SIZE

    # ---- maintenance ------------------------------------------------------------------------

    def truncate_dirty(self, phys_end: int) -> None:
        """Drop units pointing at or past phys_end (the commit log was cut there)."""
        if self._pending is not None:
            self._pending = [u for u in self._pending if u[0] < phys_end]
        self.use()
        self.min_unit_phys = -1
        while self.queue.files:
            mf = self.queue.files[-1]
            pos = self._first_unit_at_or_after(mf, phys_end)
            if pos == 0 and mf.wrote > 0 and len(self.queue.files) > 1:
                self.queue.files.pop().destroy()
                continue
            if pos < mf.wrote:
                mf.mm[pos:mf.wrote] = bytes(mf.wrote - pos)
                mf.wrote = pos
                self.queue.flushed_where = min(self.queue.flushed_where, mf.from_offset + pos)
            break
        self.max_physic_offset = -1
        last = self.queue.last
        if last is not None and last.wrote:
            off, size, _ = UNIT.unpack_from(last.mm, last.wrote - UNIT_SIZE)
            self.max_physic_offset = off + size
        if self._pending:
            self.max_physic_offset = self._pending[-1][0] + self._pending[-1][1]
        if self.ext is not None:
            ext_addr = self._last_ext_addr()
            if ext_addr is not None:
                self.ext.truncate_by_max_address(ext_addr)

    def correct_min_offset(self, min_phys: int) -> None:
        """Move the first readable unit past units whose records were deleted."""
        first = self.queue.first
        if first is None:
            return
        self.min_logic_offset = max(self.min_logic_offset, first.from_offset)
        if 0 <= min_phys <= self.min_unit_phys:
            return  # the first readable unit's record is still there: nothing moves
        if not self.mapped and self.min_unit_phys < 0:
            at = self.min_logic_offset - first.from_offset
            if at < first.wrote:
                phys = UNIT.unpack(first.pread(at, UNIT_SIZE))[0]
                if phys >= min_phys:
                    self.min_unit_phys = phys
                    return
        self.use()
        pos = self._first_unit_at_or_after(first, min_phys)
        self.min_logic_offset = max(self.min_logic_offset, first.from_offset + pos)
        if pos < first.wrote:
            self.min_unit_phys = UNIT.unpack_from(first.mm, pos)[0]
        elif first is self.queue.last:  # every unit is gone: units to come point past the last one
            self.min_unit_phys = max(self.max_physic_offset, -1)
        else:
            self.min_unit_phys = -1
        if self.ext is not None and pos < first.wrote:
            tag = UNIT.unpack_from(first.mm, pos)[2]
            if is_ext_addr(tag):
                self.ext.truncate_by_min_address(tag)

    def delete_expired(self, min_phys: int) -> int:
        """Delete whole files whose last unit points below min_phys; never the last file."""
        count = 0
        files = self.queue.files
        while len(files) - count > 1:
            mf = files[count]
            off, _, _ = UNIT.unpack_from(mf.pread(self.file_size - UNIT_SIZE, UNIT_SIZE), 0)
            if off >= min_phys:
                break
            count += 1
        if count:
            self.queue.remove_first(count)
            if self.maps is not None:
                self.maps.grew(self, -count)
        self.correct_min_offset(min_phys)
        return count


def load_consume_queues(root_dir: str, file_size: int, allocator: Executor | None = None,
                        ext_root: str | None = None, ext_file_size: int = 0,
                        preallocate: bool = False, maps: MappedQueues | None = None
                        ) -> dict[tuple[str, int], ConsumeQueue]:
    """Every consumequeue/{topic}/{queueId} directory found on disk (with its ext files when ext_root is set).

    With ``maps`` (the store's bound) files are listed, not mapped: a queue maps them on use."""
    table: dict[tuple[str, int], ConsumeQueue] = {}
    if not os.path.isdir(root_dir):
        return table
    for topic in sorted(os.listdir(root_dir)):
        tdir = os.path.join(root_dir, topic)
        if not os.path.isdir(tdir):
            continue
        for qid in sorted(os.listdir(tdir)):
            if not qid.isdigit():
                continue
            cq = ConsumeQueue(topic, int(qid), root_dir, file_size, allocator, ext_root, ext_file_size, preallocate)
            cq.maps = maps
            cq.load(mapped=maps is None)
            table[(topic, int(qid))] = cq
    return table
