"""The 5.x HA wire format (Apache's AutoSwitchHAClient / AutoSwitchHAConnection), all big-endian.

Slave -> master: a handshake ``state(4) flags(2+2) slaveBrokerId(8)`` once per connection, then reports
``state(4) maxOffset(8)``. Master -> slave: a handshake ``state(4) bodySize(4) maxOffset(8) lastEpoch(4)``
followed by ``epoch(4) startOffset(8)`` per epoch entry, then transfer frames ``state(4) bodySize(4)
offset(8) epoch(4) epochStartOffset(8) confirmOffset(8)`` and the log bytes (size 0: a heartbeat).
The state is the ordinal of Java's HAConnectionState.
"""

from __future__ import annotations

import struct

READY, HANDSHAKE, TRANSFER, SUSPEND, SHUTDOWN = range(5)

SLAVE_HANDSHAKE = struct.Struct(">ihhq")
SLAVE_REPORT = struct.Struct(">iq")
MASTER_HANDSHAKE = struct.Struct(">iiqi")
MASTER_TRANSFER = struct.Struct(">iiqiqq")
EPOCH_ENTRY = struct.Struct(">iq")


def slave_handshake(broker_id: int, sync_from_last_file: bool = False, async_learner: bool = False) -> bytes:
    return SLAVE_HANDSHAKE.pack(HANDSHAKE, int(sync_from_last_file), int(async_learner), broker_id)


def slave_report(offset: int) -> bytes:
    return SLAVE_REPORT.pack(TRANSFER, offset)


def master_handshake(max_offset: int, last_epoch: int, entries: list[tuple[int, int]]) -> bytes:
    body = b"".join(EPOCH_ENTRY.pack(epoch, start) for epoch, start in entries)
    return MASTER_HANDSHAKE.pack(HANDSHAKE, len(body), max_offset, last_epoch) + body


def master_transfer_header(size: int, offset: int, epoch: int, epoch_start: int, confirm: int) -> bytes:
    return MASTER_TRANSFER.pack(TRANSFER, size, offset, epoch, epoch_start, confirm)


def parse_epoch_entries(body: bytes | memoryview) -> list[tuple[int, int]]:
    n = len(body) // EPOCH_ENTRY.size
    return [EPOCH_ENTRY.unpack_from(body, i * EPOCH_ENTRY.size) for i in range(n)]
