"""The 4.x HA wire format: the slave sends bare 8-byte offsets, the master 12-byte headed frames."""

from __future__ import annotations

import struct
from typing import Iterator

#: Slave -> master: its commit log max offset, big-endian signed 64-bit, nothing else.
REPORT = struct.Struct(">q")
#: Master -> slave: commit log offset of the body (8 bytes) and body size (4 bytes); size 0 is a heartbeat.
HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def encode_frame(offset: int, body: bytes = b"") -> bytes:
    return HEADER.pack(offset, len(body)) + body


def last_report(buf: bytearray, processed: int) -> tuple[int | None, int]:
    """The last whole 8-byte report among new bytes (Java reads only the newest), and the new processed mark."""
    end = len(buf) - len(buf) % 8
    if end - processed < 8:
        return None, processed
    return REPORT.unpack_from(buf, end - 8)[0], end


class FrameError(ValueError):
    """A master frame no slave can accept (negative size)."""


def split_frames(buf: bytearray, pos: int) -> Iterator[tuple[int, int, int]]:
    """(offset, body start, body size) of each complete frame from pos; stops at an incomplete one."""
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        offset, size = HEADER.unpack_from(buf, pos)
        if size < 0:
            raise FrameError(f"negative body size {size} at offset {offset}")
        if n - pos - HEADER_SIZE < size:
            return
        yield offset, pos + HEADER_SIZE, size
        pos += HEADER_SIZE + size
