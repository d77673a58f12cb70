"""The timer store files of RocketMQ 5.x: ``timerwheel``, ``timerlog/``, ``timercheck``, ``timermetrics``.

Layouts (big-endian, as Java's ByteBuffer writes them):
- timerwheel: ``2 * 7 * 86400`` slots of 32 bytes: slot time / precision (long), first and last timer
  log position (long, long), unit count (int), magic (int).
- timerlog/NNN: 52-byte units chained per slot by their previous position: size 52 (int), previous
  position (long), magic (int), write time ms (long), due time minus write time (int), commit log
  offset (long), record size (int), real topic's Java hash (int), reserved (long).
- timercheck: one 4 KiB page; lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset,
  masterTimerQueueOffset and the data version (state version, timestamp, counter), longs from byte 0.
  rmqtx adds, at byte 56 (Java reads only the first 56), how many units of the slot at
  lastReadTimeMs are already delivered, so a restart in the middle of a slot repeats none.
- timermetrics: JSON, ``{"dataVersion":{...},"timingCount":{topic:{"count":n,"timeStamp":ms}}}``.

Every file is memory-mapped and changed in place on the reactor (a killed process leaves its pages
to the kernel); syncing to disk happens in a thread (:meth:`TimerFiles.sync`).
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import struct
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from rmqtx.common.properties import bool_setting, int_setting
from rmqtx.store.mapped_file import MappedFile, MappedFileQueue

SLOT = struct.Struct(">qqqii")
UNIT = struct.Struct(">iqiqiqiiq")
UNIT_SIZE = UNIT.size  # 52
BLANK = struct.Struct(">iqi")
BLANK_MAGIC = (0xBBCCDDEE ^ (1880681586 + 8)) - (1 << 32)  # Java's int of that expression
CHECK = struct.Struct(">qqqqqqqq")
#: Java's TimerCheckpoint.encode, what GET_TIMER_CHECK_POINT answers: the first seven (no slot progress).
CHECKPOINT_WIRE = struct.Struct(">7q")
CHECK_PAGE = 4096
WHEEL_TTL_DAYS = 7
SLOTS_TOTAL = WHEEL_TTL_DAYS * 24 * 3600
BLANK_SLOTS = 60
MAGIC_DEFAULT, MAGIC_ROLL, MAGIC_DELETE = 1, 2, 4
_PAGE = 4096  # a multiple of the slot size


@dataclass(frozen=True)
class TimerConfig:
    """The timer keys of Java 5.x's MessageStoreConfig (broker.conf names), with its defaults."""

    timerWheelEnable: bool = True
    timerMaxDelaySec: int = 3 * 24 * 3600
    timerPrecisionMs: int = 1000
    timerRollWindowSlot: int = 2 * 24 * 3600
    timerFlushIntervalMs: int = 1000
    mappedFileSizeTimerLog: int = 100 * 1024 * 1024
    timerEnableDisruptor: bool = False  # accepted; rmqtx has one reactor thread, no queues between threads
    timerSkipUnknownError: bool = False
    timerStopEnqueue: bool = False
    timerStopDequeue: bool = False
    timerCongestNumEachSlot: int = 2**31 - 1

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "TimerConfig":
        """Each key when present, Java's default otherwise; a value of the wrong kind raises ValueError."""
        values: dict[str, Any] = {}
        for name, default in vars(cls()).items():
            if name in props:
                parse = bool_setting if isinstance(default, bool) else int_setting
                values[name] = parse(props, name, default)
        values["timerPrecisionMs"] = max(1, values.get("timerPrecisionMs", cls.timerPrecisionMs))
        return cls(**values)

    @property
    def roll_window_slots(self) -> int:
        """Java's rule: a window outside [2, slots - 60] means slots - 60."""
        if self.timerRollWindowSlot > SLOTS_TOTAL - BLANK_SLOTS or self.timerRollWindowSlot < 2:
            return SLOTS_TOTAL - BLANK_SLOTS
        return self.timerRollWindowSlot


KEYS = frozenset(vars(TimerConfig()))


class TimerWheel:
    """The slot file: each slot keeps the head and tail of its chain in the timer log."""

    def __init__(self, path: str, precision_ms: int, slots_total: int = SLOTS_TOTAL) -> None:
        self.precision = precision_ms
        self.slots = slots_total * 2
        length = self.slots * SLOT.size
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self.fd).st_size
        if size not in (0, length):
            os.close(self.fd)
            raise ValueError(f"{path}: timer wheel length {size} != expected {length}")
        if size == 0:
            os.ftruncate(self.fd, length)  # sparse: pages appear as slots are used
        self.mm = mmap.mmap(self.fd, length)

    def _pos(self, time_ms: int) -> int:
        return (time_ms // self.precision % self.slots) * SLOT.size

    def get(self, time_ms: int) -> tuple[int, int, int, int, int]:
        """(slot time ms, first, last, num, magic); (-1, -1, -1, 0, 0) when the slot holds another time."""
        t, first, last, num, magic = SLOT.unpack_from(self.mm, self._pos(time_ms))
        if t != time_ms // self.precision:
            return -1, -1, -1, 0, 0
        return t * self.precision, first, last, num, magic

    def put(self, time_ms: int, first: int, last: int, num: int, magic: int = 0) -> None:
        SLOT.pack_into(self.mm, self._pos(time_ms), time_ms // self.precision, first, last, num, magic)

    def revise(self, time_ms: int, last: int, delta: int = 1) -> None:
        """Recovery: a unit at ``last`` belongs to this slot (a slot of another time is replaced);
        ``delta`` is what it adds to the count (-1 for a unit that cancels another, as Java counts)."""
        t, first, old_last, num, magic = SLOT.unpack_from(self.mm, self._pos(time_ms))
        if t != time_ms // self.precision:
            self.put(time_ms, last, last, delta)
        elif last > old_last:
            self.put(time_ms, first if first >= 0 else last, last, num + delta, magic)

    def count_from(self, time_ms: int) -> int:
        """Units counted in the slots of ``time_ms`` and the whole wheel after it (Java's getAllNum).

        Reads only the file's data extents, and of those only pages that hold a slot: a wheel file is
        sparse, and faulting in all of its zero pages took ~0.1 s of every start."""
        start = time_ms // self.precision
        end = start + self.slots
        zero = bytes(_PAGE)
        total = 0
        with memoryview(self.mm) as view:
            for lo, hi in self._data_extents(len(view)):
                for at in range(lo, hi, _PAGE):
                    with view[at:at + _PAGE] as page:
                        if page == zero:
                            continue
                        for t, _, _, num, _ in SLOT.iter_unpack(page):
                            if start <= t < end:
                                total += num
        return total

    def _data_extents(self, length: int) -> list[tuple[int, int]]:
        """Page-aligned (start, end) ranges of the file that hold data (SEEK_DATA/SEEK_HOLE); the
        whole file where the file system cannot tell. Pages written since are in the page cache and
        counted as data by Linux's lseek."""
        seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
        if seek_data is None or seek_hole is None:
            return [(0, length)]
        extents: list[tuple[int, int]] = []
        at = 0
        try:
            while at < length:
                try:
                    lo = os.lseek(self.fd, at, seek_data)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # no data past ``at``
                        break
                    raise
                hi = min(os.lseek(self.fd, lo, seek_hole), length)
                lo -= lo % _PAGE
                hi = min(-(-hi // _PAGE) * _PAGE, length)
                extents.append((lo, hi))
                at = hi
        except OSError:
            return [(0, length)]
        return extents

    def sync(self) -> None:
        """fdatasync, not ``mm.flush()``: CPython's msync holds the GIL, which would stall the reactor for the
        whole write-back; Linux's fdatasync also writes pages dirtied through the mapping and releases it."""
        os.fdatasync(self.fd)

    def close(self) -> None:
        self.mm.close()
        os.close(self.fd)


class TimerLog:
    """Append-only 52-byte units in mapped files; a unit that would not fit is preceded by a blank."""

    def __init__(self, directory: str, file_size: int, allocator: Executor | None) -> None:
        self.queue = MappedFileQueue(directory, file_size, allocator)
        self.file_size = file_size

    def load(self) -> None:
        self.queue.load()

    def ready(self) -> bool:
        """True when an append needs no file to be made on the caller's thread."""
        last = self.queue.last
        if last is not None and last.wrote + UNIT_SIZE + BLANK.size <= last.file_size:
            if last.wrote * 10 > last.file_size * 9:
                self.queue.prepare_next()  # the next file is made in a thread while this one fills up
            return True
        fut = self.queue.next_future()
        if fut is None:
            self.queue.prepare_next(0)
            fut = self.queue.next_future()
        return fut is None or fut.done()

    def append(self, unit: bytes) -> int:
        mf = self.queue.last
        if mf is None or mf.wrote + len(unit) + BLANK.size > mf.file_size:
            if mf is not None and mf.wrote < mf.file_size:
                BLANK.pack_into(mf.mm, mf.wrote, mf.file_size - mf.wrote, 0, BLANK_MAGIC)
                mf.wrote = mf.file_size
            mf = self.queue.last_for_write(0)
        pos = mf.from_offset + mf.wrote
        mf.mm[mf.wrote:mf.wrote + len(unit)] = unit
        mf.wrote += len(unit)
        return pos

    def unit(self, pos: int) -> tuple | None:
        mf = self.queue.find(pos)
        if mf is None or pos - mf.from_offset + UNIT_SIZE > mf.wrote:
            return None
        return UNIT.unpack_from(mf.mm, pos - mf.from_offset)

    def last_unit_of(self, mf: MappedFile) -> tuple | None:
        """The last sound unit of a full file (units are in commit log order, so it names the file's highest offset)."""
        pos = (min(mf.wrote, mf.file_size) // UNIT_SIZE) * UNIT_SIZE - UNIT_SIZE
        for _ in range(3):
            if pos < 0:
                return None
            size, _, magic = BLANK.unpack_from(mf.mm, pos)
            if size == UNIT_SIZE and magic != 0 and (magic | 0xF) == 0xF:
                return UNIT.unpack_from(mf.mm, pos)
            pos -= UNIT_SIZE
        return None

    @property
    def write_pos(self) -> int:
        return self.queue.max_offset

    def recover(self, from_pos: int) -> Iterator[tuple[int, tuple]]:
        """Yield (position, unit) of every sound unit from the file holding ``from_pos``; cut the rest."""
        files = self.queue.files
        if not files:
            return
        start = 0
        for i, mf in enumerate(files):
            if mf.from_offset <= from_pos:
                start = i
        end = files[start].from_offset
        for mf in files[start:]:
            pos, stop = 0, False
            while pos + BLANK.size <= mf.file_size:
                size, _, magic = BLANK.unpack_from(mf.mm, pos)
                if magic == BLANK_MAGIC:
                    pos = mf.file_size
                    break
                if size != UNIT_SIZE or (magic | 0xF) != 0xF or magic == 0 or pos + UNIT_SIZE > mf.file_size:
                    stop = True
                    break
                yield mf.from_offset + pos, UNIT.unpack_from(mf.mm, pos)
                pos += UNIT_SIZE
            mf.wrote = pos
            end = mf.from_offset + pos
            if stop:
                break
        self.queue.truncate_dirty(end)

    def sync(self) -> None:
        for mf in self.queue.files[-2:]:
            mf.sync()

    def close(self) -> None:
        self.queue.close()


class TimerCheckpoint:
    """``timercheck``: where reading, the timer log and the timer topic queue had got to."""

    FIELDS = ("last_read_time_ms", "last_flush_pos", "last_queue_offset", "master_queue_offset",
              "state_version", "version_timestamp", "version_counter", "slot_done")

    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fresh = os.fstat(self.fd).st_size < CHECK_PAGE
        if fresh:
            os.ftruncate(self.fd, CHECK_PAGE)
        self.mm = mmap.mmap(self.fd, CHECK_PAGE)
        self.values = list(CHECK.unpack_from(self.mm, 0))
        if fresh:
            self.values = [0, 0, 0, 0, 0, int(time.time() * 1000), 0, 0]
            self.write()

    def __getattr__(self, name: str) -> int:
        try:
            return self.values[TimerCheckpoint.FIELDS.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def set(self, **changes: int) -> None:
        for name, value in changes.items():
            self.values[self.FIELDS.index(name)] = value
        self.write()

    def write(self) -> None:
        CHECK.pack_into(self.mm, 0, *self.values)

    def sync(self) -> None:
        os.fdatasync(self.fd)  # as TimerWheel.sync: no GIL held while it waits for the disk

    def close(self) -> None:
        self.mm.close()
        os.close(self.fd)


class TimerMetrics:
    """``timermetrics``: timer messages waiting per real topic (Java's timingCount)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.counts: dict[str, list[int]] = {}
        self.version = {"counter": 0, "stateVersion": 0, "timestamp": int(time.time() * 1000)}

    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return
        for topic, metric in (data.get("timingCount") or {}).items():
            count = metric.get("count", 0)
            self.counts[topic] = [int(count.get("value", 0) if isinstance(count, dict) else count),
                                  int(metric.get("timeStamp", 0))]
        self.version.update(data.get("dataVersion") or {})

    def add(self, topic: str, delta: int) -> None:
        metric = self.counts.setdefault(topic, [0, int(time.time() * 1000)])
        metric[0] += delta

    def encode(self) -> str:
        counts = {t: {"count": c, "timeStamp": ts} for t, (c, ts) in sorted(self.counts.items())}
        return json.dumps({"dataVersion": self.version, "timingCount": counts}, separators=(",", ":"))

    def save(self, text: str) -> None:
        """Atomic write (a thread's job)."""
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class TimerFiles:
    """The four timer files of one store root."""

    def __init__(self, root: str, cfg: TimerConfig, allocator: Executor | None) -> None:
        self.wheel = TimerWheel(os.path.join(root, "timerwheel"), cfg.timerPrecisionMs)
        self.log = TimerLog(os.path.join(root, "timerlog"), cfg.mappedFileSizeTimerLog, allocator)
        self.check = TimerCheckpoint(os.path.join(root, "timercheck"))
        self.metrics = TimerMetrics(os.path.join(root, "timermetrics"))

    def load(self) -> None:
        self.log.load()
        self.metrics.load()

    def sync(self, metrics_text: str | None) -> None:
        """Log, wheel, then checkpoint to disk (a thread's job)."""
        self.log.sync()
        self.wheel.sync()
        self.check.sync()
        if metrics_text is not None:
            self.metrics.save(metrics_text)

    def close(self) -> None:
        self.log.close()
        self.wheel.close()
        self.check.close()


__all__ = ["CHECKPOINT_WIRE", "TimerConfig", "TimerFiles", "TimerWheel", "TimerLog", "TimerCheckpoint", "TimerMetrics", "UNIT", "UNIT_SIZE",
           "MAGIC_DEFAULT", "MAGIC_ROLL", "MAGIC_DELETE", "SLOTS_TOTAL", "BLANK_SLOTS", "KEYS"]
