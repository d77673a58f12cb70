"""Consume queue extension files (consumequeue_ext/{topic}/{queueId}): tags code, store time, filter bit map.

Layout as RocketMQ's ConsumeQueueExt: variable units (short size | long tagsCode | long msgStoreTime |
short bitMapSize | bitmap), big-endian, a short -1 closing a file that cannot take the next unit.  The
consume queue's tag field then holds the unit's address, offset + Long.MIN_VALUE, so any value at or
below Integer.MIN_VALUE - 1 is an address, never a tag hash.  Like Java's, these files are weakly
reliable: a unit that cannot be written or read only costs the filter its shortcut.
"""
from __future__ import annotations

import logging
import os
import struct
from concurrent.futures import Executor, Future
from typing import NamedTuple

from .mapped_file import MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

HEAD = struct.Struct(">hqqh")  # size, tagsCode, msgStoreTime, bitMapSize
MIN_UNIT_SIZE = HEAD.size  # 20
MAX_UNIT_SIZE = 0x7FFF
END_BLANK = 4  # always left free at a file's end, room for the closing -1
_FILL = struct.pack(">h", -1)
_SHORT = struct.Struct(">h")
_LONG_MIN = -(1 << 63)
MAX_ADDR = -(1 << 31) - 1
MAX_REAL_OFFSET = MAX_ADDR - _LONG_MIN


class ExtUnit(NamedTuple):
    tags_code: int
    store_time: int
    bitmap: bytes | None
    size: int


def is_ext_addr(value: int) -> bool:
    return value <= MAX_ADDR


def decorate(offset: int) -> int:
    return offset + _LONG_MIN


def undecorate(address: int) -> int:
    return address - _LONG_MIN


class ConsumeQueueExt:
    """One topic/queue's extension units, addressed by decorated file offsets."""

    def __init__(self, topic: str, queue_id: int, root_dir: str, file_size: int,
                 allocator: Executor | None = None, preallocate: bool = False) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.queue = MappedFileQueue(os.path.join(root_dir, topic, str(queue_id)), file_size, allocator, preallocate)
        self._prealloc_mark = file_size // 2

    def load(self) -> None:
        self.queue.load()

    def close(self) -> None:
        self.queue.close()

    def destroy(self) -> None:
        self.queue.destroy(parents=(os.path.dirname(self.queue.directory),))

    # ---- write ----------------------------------------------------------------------------

    def put(self, tags_code: int, store_time: int, bitmap: bytes | None) -> int | None:
        """Append a unit; its address, or None when it cannot be stored (the caller keeps the tags code)."""
        bits = bitmap or b""
        size = MIN_UNIT_SIZE + len(bits)
        if size > MAX_UNIT_SIZE or self.queue.max_offset + size > MAX_REAL_OFFSET:
            log.error("consume queue ext %s/%d: unit of %d bytes refused", self.topic, self.queue_id, size)
            return None
        try:
            for _ in range(2):
                mf = self.queue.last_for_write(0)
                pos = mf.wrote
                if size > self.file_size - pos - END_BLANK:
                    mf.mm[pos:pos + 2] = _FILL
                    mf.wrote = self.file_size
                    continue
                HEAD.pack_into(mf.mm, pos, size, tags_code, store_time, len(bits))
                if bits:
                    mf.mm[pos + MIN_UNIT_SIZE:pos + size] = bits
                mf.wrote = pos + size
                if mf.wrote >= self._prealloc_mark and not self.queue.next_pending:
                    self.queue.prepare_next()
                return decorate(mf.from_offset + pos)
        except OSError as e:
            log.warning("consume queue ext %s/%d: %s; storing the tags code only", self.topic, self.queue_id, e)
        return None

    def file_future(self, bitmap: bytes | None) -> Future | None:
        """The making of the file the next unit needs, while it is not done (None: it can be written now)."""
        size = MIN_UNIT_SIZE + len(bitmap or b"")
        last = self.queue.last
        if last is not None and size <= self.file_size - last.wrote - END_BLANK:
            return None
        self.queue.prepare_next(0)
        fut = self.queue.next_future()
        return fut if fut is not None and not fut.done() else None

    # ---- read -----------------------------------------------------------------------------

    def get(self, address: int) -> ExtUnit | None:
        """The unit at address, or None if it is not (or no longer) there."""
        if address > MAX_ADDR:
            return None
        real = address - _LONG_MIN
        mf = self.queue.find(real)
        if mf is None:
            return None
        pos = real - mf.from_offset
        if pos + MIN_UNIT_SIZE > mf.wrote:
            return None
        size, tags_code, store_time, bm_size = HEAD.unpack_from(mf.mm, pos)
        if size < MIN_UNIT_SIZE or pos + size > mf.wrote or bm_size > size - MIN_UNIT_SIZE:
            return None
        bitmap = mf.mm[pos + MIN_UNIT_SIZE:pos + MIN_UNIT_SIZE + bm_size] if bm_size > 0 else None
        return ExtUnit(tags_code, store_time, bitmap, size)

    # ---- recovery and retention -------------------------------------------------------------

    def recover(self, max_address: int | None) -> None:
        """Continue writing after the unit the consume queue's last entry points to (else after the last unit found)."""
        last = self.queue.last
        if last is None:
            return
        unit = self.get(max_address) if max_address is not None else None
        end = undecorate(max_address) + unit.size if unit is not None and max_address is not None else self._scan_end(last)
        self._cut(end)

    def _scan_end(self, mf: MappedFile) -> int:
        """End of the chain of units in the last file (Java's recover walk; earlier files are complete)."""
        mm, pos = mf.mm, 0
        while pos + MIN_UNIT_SIZE <= self.file_size:
            size = _SHORT.unpack_from(mm, pos)[0]
            if size < MIN_UNIT_SIZE or pos + size > self.file_size:
                break
            pos += size
        return mf.from_offset + pos

    def _cut(self, end: int) -> None:
        """Forget everything from end on: later files go, stale units after it are zeroed."""
        self.queue.truncate_dirty(end)
        mf = self.queue.last
        if mf is None:
            return
        mm, pos = mf.mm, end - mf.from_offset
        while pos + 2 <= self.file_size:
            size = _SHORT.unpack_from(mm, pos)[0]
            if size == -1:
                mm[pos:pos + 2] = b"\0\0"
                break
            if size < MIN_UNIT_SIZE or pos + size > self.file_size:
                break
            mm[pos:pos + size] = bytes(size)
            pos += size

    def truncate_by_max_address(self, address: int) -> None:
        """The consume queue was cut: drop units after the one at address (Java's truncateByMaxAddress)."""
        unit = self.get(address)
        if unit is None:
            log.warning("consume queue ext %s/%d: unit %d not found, not truncated", self.topic, self.queue_id, address)
            return
        self._cut(undecorate(address) + unit.size)

    def truncate_by_min_address(self, address: int) -> None:
        """Delete files wholly before the unit the first live consume queue entry points to."""
        real = undecorate(address)
        count = 0
        for mf in self.queue.files[:-1]:
            if mf.end_offset >= real:
                break
            count += 1
        if count:
            self.queue.remove_first(count)
