"""The 4 KiB checkpoint file: how far each structure was known durable, as store timestamps."""
from __future__ import annotations

import os
import struct

_CKPT = struct.Struct(">qqq")
FILE_SIZE = 4096


class Checkpoint:
    """physicMsgTimestamp, logicsMsgTimestamp and indexMsgTimestamp at offsets 0, 8 and 16."""

    def __init__(self, path: str) -> None:
        self.path = path
        exists = os.path.exists(path)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not exists or os.fstat(self.fd).st_size < FILE_SIZE:
            os.ftruncate(self.fd, FILE_SIZE)
        raw = os.pread(self.fd, _CKPT.size, 0)
        self.physic_ts, self.logics_ts, self.index_ts = _CKPT.unpack(raw)

    def min_timestamp(self, with_index: bool) -> int:
        """The store time before which everything was flushed everywhere (3 s of slack, as Java)."""
        low = min(self.physic_ts, self.logics_ts)
        if with_index:
            low = min(low, self.index_ts)
        return max(0, low - 3000)

    def flush(self) -> None:
        """Write the three values and sync; safe to call from a worker thread."""
        os.pwrite(self.fd, _CKPT.pack(self.physic_ts, self.logics_ts, self.index_ts), 0)
        os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)
