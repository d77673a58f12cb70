"""The epoch file of 5.x controller mode (Apache's EpochFileCache over a CheckpointFile), ``epochFileCheckpoint``.

Each master term (epoch) starts at a commit log offset; the file lists ``epoch-startOffset`` lines after a
line with their count and one with the CRC32 of those lines (Java's UtilAll.crc32: the value masked to 31
bits). Brokers compare these lists at the HA handshake to find where a rejoining replica's log diverged.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from typing import Iterable

from rmqtx.common.files import write_like_string2file

#: An end offset not known yet (the last entry's, until set from the log's end).
OPEN_END = (1 << 63) - 1


@dataclass
class EpochEntry:
    epoch: int
    start: int
    end: int = OPEN_END


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8")) & 0x7FFFFFFF


def encode_entries(entries: Iterable[EpochEntry]) -> str:
    lines = "".join(f"{e.epoch}-{e.start}\n" for e in entries)
    count = lines.count("\n")
    return f"{count}\n{_crc(lines)}\n{lines}"


def decode_entries(text: str) -> list[EpochEntry]:
    """Raise ValueError when the count or the CRC (unless 0) disagree, as Java's read does."""
    lines = text.split("\n")
    expected, crc = int(lines[0]), int(lines[1])
    body = [line for line in lines[2:] if line.strip()]
    entries = []
    for line in body:
        epoch, _, start = line.strip().partition("-")
        entries.append(EpochEntry(int(epoch), int(start)))
    if len(entries) != expected:
        raise ValueError(f"expected {expected} epoch entries, found {len(entries)}")
    if crc != 0 and _crc("".join(f"{line.strip()}\n" for line in body)) != crc:
        raise ValueError("epoch entries' crc32 does not match")
    return entries


class EpochCache:
    """Epoch -> entry, in epoch order; each entry's end is the next one's start (the last one's is open)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.entries: list[EpochEntry] = []

    # -- file ----------------------------------------------------------------------------------------
    def load(self) -> None:
        """Blocking (start-up): the file, else its ``.bak``, else nothing."""
        if self.path is None:
            return
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, encoding="utf-8") as f:
                    text = f.read()
                entries = decode_entries(text) if text.strip() else []
            except (FileNotFoundError, ValueError, IndexError):
                continue
            if entries:
                self.set_entries(entries)
                return

    def flush(self) -> None:
        """Small and rare (a new term, a truncation): written at once, as Java does under its lock."""
        if self.path is not None and self.entries:
            write_like_string2file(self.path, encode_entries(self.entries))

    # -- reads ---------------------------------------------------------------------------------------
    def set_entries(self, entries: Iterable[EpochEntry]) -> None:
        self.entries = [EpochEntry(e.epoch, e.start) for e in sorted(entries, key=lambda e: e.epoch)]
        for prev, nxt in zip(self.entries, self.entries[1:]):
            prev.end = nxt.start

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else -1

    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    def first(self) -> EpochEntry | None:
        return self.entries[0] if self.entries else None

    def get(self, epoch: int) -> EpochEntry | None:
        for e in self.entries:
            if e.epoch == epoch:
                return e
        return None

    def next_after(self, epoch: int) -> EpochEntry | None:
        for e in self.entries:
            if e.epoch > epoch:
                return e
        return None

    def find_by_offset(self, offset: int) -> EpochEntry | None:
        for e in self.entries:
            if e.start <= offset < e.end:
                return e
        return None

    def set_last_end(self, end: int) -> None:
        if self.entries and self.entries[-1].start <= end:
            self.entries[-1].end = end

    def consistent_point(self, other: "EpochCache") -> int:
        """Where this log and ``other`` agree up to: newest common epoch with the same start, the lesser end; -1 if none."""
        for mine in reversed(self.entries):
            theirs = other.get(mine.epoch)
            if theirs is not None and theirs.start == mine.start:
                return min(mine.end, theirs.end)
        return -1

    # -- writes --------------------------------------------------------------------------------------
    def append(self, epoch: int, start: int) -> bool:
        """Refused (False) unless both the epoch and the start grow, as Java's appendEntry: a term in which
        nothing was written leaves no entry, so every replica's file lists the same terms."""
        last = self.last()
        if last is not None:
            if last.epoch >= epoch or last.start >= start:
                return False
            last.end = start
        self.entries.append(EpochEntry(epoch, start))
        self.flush()
        return True

    def truncate_from_epoch(self, epoch: int) -> None:
        self.entries = [e for e in self.entries if e.epoch < epoch]
        if self.entries:
            self.entries[-1].end = OPEN_END
        self.flush()

    def truncate_from_offset(self, offset: int) -> None:
        """Drop terms starting at or after ``offset``; the one holding it then ends open (Java's truncateSuffixByOffset)."""
        self.entries = [e for e in self.entries if e.start < offset]
        if self.entries:
            self.entries[-1].end = OPEN_END
        if not self.entries and self.path is not None:
            for p in (self.path, self.path + ".bak"):
                if os.path.exists(p):
                    os.unlink(p)
            return
        self.flush()
