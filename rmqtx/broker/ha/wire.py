"""The 4.x HA wire format: the slave sends bare 8-byte offsets, the master 12-byte headed frames."""

from __future__ import annotations

import struct

#: Slave -> master: its commit log max offset, big-endian signed 64-bit, nothing else.
REPORT = struct.Struct(">q")
#: Master -> slave: commit log offset of the body (8 bytes) and body size (4 bytes); size 0 is a heartbeat.
HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def last_report(buf: bytearray, processed: int) -> tuple[int | None, int]:
    """The last whole 8-byte report among new bytes (Java reads only the newest), and the new processed mark."""
    end = len(buf) - len(buf) % 8
    if end - processed < 8:
        return None, processed
    return REPORT.unpack_from(buf, end - 8)[0], end

