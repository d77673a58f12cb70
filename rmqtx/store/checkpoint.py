"""The 4 KiB checkpoint file: how far each structure was known durable, as store timestamps."""
from __future__ import annotations

import os
import struct

_CKPT = struct.Struct(">qqq")
#: Apache 5.x's confirmPhyOffset, after masterFlushedOffset (24)
_CONFIRM = struct.Struct(">q")
_CONFIRM_AT = 32
FILE_SIZE = 4096


class Checkpoint:
    """physicMsgTimestamp, logicsMsgTimestamp and indexMsgTimestamp at offsets 0, 8 and 16; in controller mode
    also confirmPhyOffset at 32, as Apache 5.x writes it."""

    def __init__(self, path: str) -> None:
        self.path = path
        exists = os.path.exists(path)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not exists or os.fstat(self.fd).st_size < FILE_SIZE:
            os.ftruncate(self.fd, FILE_SIZE)
        raw = os.pread(self.fd, _CKPT.size, 0)
        self.physic_ts, self.logics_ts, self.index_ts = _CKPT.unpack(raw)
        #: the confirm offset last written (controller mode); only written once set (a 4.x store leaves it)
        self.stored_confirm_offset: int = _CONFIRM.unpack(os.pread(self.fd, _CONFIRM.size, _CONFIRM_AT))[0]
        self.confirm_offset: int | None = None

    def min_timestamp(self, with_index: bool) -> int:
        """The store time before which everything was flushed everywhere (3 s of slack, as Java)."""
        low = min(self.physic_ts, self.logics_ts)
        if with_index:
            low = min(low, self.index_ts)
        return max(0, low - 3000)

    def flush(self) -> None:
        """Write the three values and sync; safe to call from a worker thread."""
        os.pwrite(self.fd, _CKPT.pack(self.physic_ts, self.logics_ts, self.index_ts), 0)
        confirm = self.confirm_offset
        if confirm is not None:
            os.pwrite(self.fd, _CONFIRM.pack(confirm), _CONFIRM_AT)
        os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)
