"""The commit log: every message, back to back, in 4.x record layout."""
from __future__ import annotations

import logging
from concurrent.futures import Executor
from typing import Iterator, NamedTuple

from rmqtx.common.sysflag import (
    SYSFLAG_BORN_HOST_V6,
    SYSFLAG_STORE_HOST_V6,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
)
from rmqtx.common.validation import body_too_large, max_record_size

from . import record as R
from .config import StoreConfig
from .dispatch_request import DispatchRequest
from .mapped_file import MappedFile, MappedFileQueue
from .results import BatchToStore, MessageToStore, PutResult, PutStatus

log = logging.getLogger(__name__)

_HOST_BITS = SYSFLAG_BORN_HOST_V6 | SYSFLAG_STORE_HOST_V6
_NO_QUEUE = (TRANSACTION_PREPARED, TRANSACTION_ROLLBACK)
_HEADER_SIZES = {flags: R.header_struct(flags).size for flags in (0, 0x10, 0x20, 0x30)}
_encode_host = R.encode_host
_write_record = R.write_record
_offset_msg_id = R.offset_msg_id
_PUT_OK = PutStatus.PUT_OK


_new_tuple = tuple.__new__


class ScanItem(NamedTuple):
    """One step of a commit log scan: kind is "msg", "blank", "end" or an error kind."""

    offset: int
    kind: str
    size: int
    record: R.Record | None


def gets_queue_entry(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records never enter a consume queue."""
    return (sys_flag & TRANSACTION_MASK) not in _NO_QUEUE


class CommitLog:
    """Appends records into mapped files and hands out stored bytes."""

    def __init__(self, config: StoreConfig, allocator: Executor | None) -> None:
        self.config = config
        self.file_size = config.mapped_file_size_commit_log
        self.queue = MappedFileQueue(config.commit_log_dir, self.file_size, allocator, config.warm_maped_file_enable,
                                     tail_readahead=not config.sync_flush)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.max_message_size = config.max_message_size  # of a body; a record may be 64 KiB longer
        self.max_record_size = max_record_size(config.max_message_size)
        self._topics: dict[str, bytes] = {}
        self.last_store_timestamp = 0

    # ---- append -------------------------------------------------------------------------

    def topic_bytes(self, topic: str) -> bytes | None:
        tb = self._topics.get(topic)
        if tb is None:
            tb = topic.encode()
            if not tb or len(tb) > 127:
                return None
            self._topics[topic] = tb
        return tb

    def _room_for(self, total: int) -> MappedFile:
        """A file with room for total bytes; fills the current one with a blank if needed."""
        queue = self.queue
        files = queue.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote >= mf.file_size:
            mf = queue.last_for_write(0)
        remaining = mf.file_size - mf.wrote
        if total + R.END_FILE_MIN_BLANK_LENGTH > remaining:
            R.SIZE_MAGIC.pack_into(mf.mm, mf.wrote, remaining, R.BLANK_MAGIC)
            mf.wrote = mf.file_size
            mf = queue.last_for_write(0)
            queue.prepare_next()
        elif queue._next is None:
            queue.prepare_next()
        return mf

    def put_message(self, msg: MessageToStore, store_ts: int,
                    parsed: dict[str, str] | None = None) -> tuple[PutResult, DispatchRequest | None]:
        """Write one message and say what to dispatch (``parsed``: msg.properties parsed, if the
        caller has it); raises OSError only when no file could be created."""
        tb = self._topics.get(msg.topic) or self.topic_bytes(msg.topic)
        if tb is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="topic length must be 1..127 bytes"), None
        props = msg.properties.encode()
        if len(props) > 32767:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, remark="properties longer than 32767 bytes"), None
        born_ip, born_v6 = _encode_host(msg.born_host[0])
        store_ip, store_v6 = _encode_host(msg.store_host[0])
        sys_flag = msg.sys_flag & ~_HOST_BITS
        if born_v6:
            sys_flag |= SYSFLAG_BORN_HOST_V6
        if store_v6:
            sys_flag |= SYSFLAG_STORE_HOST_V6
        body = msg.body
        total = _HEADER_SIZES[sys_flag & _HOST_BITS] + len(body) + 3 + len(tb) + len(props)
        if total > self.max_message_size:  # as Java: the body against maxMessageSize, then the whole record
            if body_too_large(len(body), self.max_message_size):
                return PutResult(PutStatus.MESSAGE_ILLEGAL,
                                 remark=f"message body size {len(body)} exceeds maxMessageSize {self.max_message_size}"), None
            if total > self.max_record_size:
                return PutResult(PutStatus.MESSAGE_ILLEGAL,
                                 remark=f"message size {total} exceeds {self.max_record_size}"), None
        if total + R.END_FILE_MIN_BLANK_LENGTH > self.file_size:  # no file could ever hold it (a small mappedFileSizeCommitLog)
            return PutResult(PutStatus.UNKNOWN_ERROR,
                             remark=f"message size {total} does not fit a commit log file of {self.file_size}"), None
        key = (msg.topic, msg.queue_id)
        queued = (sys_flag & TRANSACTION_MASK) not in _NO_QUEUE
        qo = self.topic_queue_table.get(key, 0) if queued else 0
        mf = self._room_for(total)
        phys = mf.from_offset + mf.wrote
        store_port = msg.store_host[1]
        _write_record(mf.mm, mf.wrote, total, sys_flag, msg.queue_id, msg.flag, qo, phys,
                      msg.born_timestamp, born_ip, msg.born_host[1], store_ts, store_ip, store_port,
                      msg.reconsume_times, msg.prepared_transaction_offset, body, tb, props)
        mf.wrote += total
        if queued:
            self.topic_queue_table[key] = qo + 1
        self.last_store_timestamp = store_ts
        return (PutResult(_PUT_OK, phys, total, _offset_msg_id(store_ip, store_port, phys), qo, 1, store_ts),
                _new_tuple(DispatchRequest, (msg.topic, msg.queue_id, phys, total, msg.tags_code, store_ts, qo, sys_flag,
                                             msg.properties, parsed)))  # DispatchRequest(...) without its Python __new__

    def put_batch(self, batch: BatchToStore, store_ts: int) -> tuple[PutResult, list[DispatchRequest]]:
        """Write every message of a client batch body into one file, consecutive queue offsets."""
        tb = self.topic_bytes(batch.topic)
        if tb is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="topic length must be 1..127 bytes"), []
        born_ip, born_v6 = R.encode_host(batch.born_host[0])
        store_ip, store_v6 = R.encode_host(batch.store_host[0])
        sys_flag = batch.sys_flag & ~_HOST_BITS
        sys_flag |= (SYSFLAG_BORN_HOST_V6 if born_v6 else 0) | (SYSFLAG_STORE_HOST_V6 if store_v6 else 0)
        extra = batch.properties.encode()
        try:
            items = list(R.iter_batch_body(batch.body))
        except R.RecordError as e:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=f"bad batch body: {e}"), []
        if not items:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="empty batch"), []
        encoded = []
        grand = 0
        for flag, body, props in items:
            if extra:
                props = props + b"\x02" + extra if props and not props.endswith(b"\x02") else props + extra
            if len(props) > 32767:
                return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, remark="properties longer than 32767 bytes"), []
            total = R.record_length(sys_flag, len(body), len(tb), len(props))
            if total > self.max_message_size:
                return PutResult(PutStatus.MESSAGE_ILLEGAL,
                                 remark=f"message size {total} exceeds maxMessageSize {self.max_message_size}"), []
            encoded.append((total, flag, body, props))
            grand += total
        if grand > self.max_message_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL,
                             remark=f"batch size {grand} exceeds maxMessageSize {self.max_message_size}"), []
        key = (batch.topic, batch.queue_id)
        queued = (sys_flag & TRANSACTION_MASK) not in _NO_QUEUE
        first_qo = qo = self.topic_queue_table.get(key, 0) if queued else 0
        mf = self._room_for(grand)
        first = mf.from_offset + mf.wrote
        out: list[DispatchRequest] = []
        ids = []
        port = batch.store_host[1]
        for total, flag, body, props in encoded:
            phys = mf.from_offset + mf.wrote
            R.write_record(mf.mm, mf.wrote, total, sys_flag, batch.queue_id, flag, qo, phys,
                           batch.born_timestamp, born_ip, batch.born_host[1], store_ts, store_ip, port,
                           0, 0, body, tb, props)
            mf.wrote += total
            out.append(DispatchRequest(batch.topic, batch.queue_id, phys, total, None, store_ts, qo, sys_flag,
                                       props.decode("utf-8", "replace"), None))
            ids.append(R.offset_msg_id(store_ip, port, phys))
            if queued:
                qo += 1
        if queued:
            self.topic_queue_table[key] = qo
        self.last_store_timestamp = store_ts
        return (PutResult(PutStatus.PUT_OK, first, grand, ",".join(ids), first_qo, len(out), store_ts), out)

    # ---- read ---------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    def read(self, offset: int, size: int) -> bytes | None:
        """size stored bytes at offset, if they lie within written data of one file."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.from_offset
        if size <= 0 or pos + size > mf.wrote:
            return None
        return mf.mm[pos:pos + size]

    def read_record(self, offset: int) -> bytes | None:
        """The whole record starting at offset (its size read from the record)."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.from_offset
        if pos + 8 > mf.wrote:
            return None
        size, magic = R.SIZE_MAGIC.unpack_from(mf.mm, pos)
        if magic != R.MESSAGE_MAGIC or size <= 0 or pos + size > mf.wrote:
            return None
        return mf.mm[pos:pos + size]

    def store_timestamp_at(self, offset: int, size: int) -> int:
        """storeTimestamp of the record at offset, -1 if unreadable."""
        mf = self.queue.find(offset)
        if mf is None:
            return -1
        pos = offset - mf.from_offset
        if pos + R.HOSTS_POS > mf.wrote or pos + size > mf.wrote:
            return -1
        sys_flag = R.INT32.unpack_from(mf.mm, pos + R.SYSFLAG_POS)[0]
        ts_pos = pos + R.HOSTS_POS + (20 if sys_flag & SYSFLAG_BORN_HOST_V6 else 8)
        return R.INT64.unpack_from(mf.mm, ts_pos)[0]

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    def scan(self, start: int, end: int | None = None, check_crc: bool = True) -> Iterator[ScanItem]:
        """Walk records from start, moving to the next file after a blank; stops at the first bad one."""
        files = self.queue.files
        i = next((k for k, mf in enumerate(files) if mf.from_offset <= start < mf.end_offset), None)
        if i is None:
            return
        pos = start - files[i].from_offset
        while i < len(files):
            mf = files[i]
            mm = mf.mm
            limit = mf.file_size
            while True:
                off = mf.from_offset + pos
                if end is not None and off >= end:
                    return
                kind, size, rec = check_at(mm, pos, limit, check_crc)
                if kind == "msg":
                    yield ScanItem(off, kind, size, rec)
                    pos += size
                    if pos >= limit:
                        break
                elif kind == "blank":
                    yield ScanItem(off, kind, size, None)
                    break
                else:
                    yield ScanItem(off, kind, size, None)
                    return
            i += 1
            pos = 0


def check_at(buf: R.ReadBuffer, pos: int, limit: int, check_crc: bool) -> tuple[str, int, R.Record | None]:
    """Classify the bytes at pos: ("msg", size, record), ("blank", size, None) or an error kind."""
    if pos + 8 > limit:
        return "end", 0, None
    size, magic = R.SIZE_MAGIC.unpack_from(buf, pos)
    if magic == R.BLANK_MAGIC:
        return ("blank", size, None) if 0 < size == limit - pos else ("bad_size", size, None)
    if magic != R.MESSAGE_MAGIC:
        return ("end", 0, None) if size == 0 and magic == 0 else ("bad_magic", size, None)
    if size <= 0 or pos + size > limit:
        return "bad_size", size, None
    try:
        rec = R.decode_record(buf, pos, pos + size)
    except R.RecordError:
        return "bad_size", size, None
    if check_crc and R.body_crc(rec.body) != rec.body_crc:
        return "bad_crc", size, None
    return "msg", size, rec
