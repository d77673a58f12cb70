"""Commit log replication at the store level: the master's reads for transfer, the slave's appends.

A slave's commit log is a byte copy of its master's: bytes are appended at exactly the master's
offsets, then the complete records among them are dispatched to consume queues and index, as
Java's reput service does on a slave. New files come from the store's allocator thread only.
"""
from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rmqtx.common.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK

from . import record as R
from .consume_queue import ConsumeQueue
from .dispatch_request import request_from_record

if TYPE_CHECKING:
    from .message_store import MessageStore

log = logging.getLogger(__name__)

_NO_QUEUE = (TRANSACTION_PREPARED, TRANSACTION_ROLLBACK)


def transfer_start(store: "MessageStore", slave_offset: int) -> int:
    """Where the master starts for a slave: its offset, or the last file's start when it has nothing (0)."""
    if slave_offset != 0:
        return slave_offset
    size = store.config.mapped_file_size_commit_log
    top = store.commitlog.max_offset
    return max(0, top - top % size)


def read_for_transfer(store: "MessageStore", offset: int, max_size: int) -> bytes | None:
    """Up to max_size written bytes from offset, never past the end of the file holding it."""
    mf = store.commitlog.queue.find(offset)
    if mf is None:
        return None
    pos = offset - mf.from_offset
    end = min(mf.wrote, pos + max_size)
    if end <= pos:
        return None
    return mf.mm[pos:end]


class ReplicaAppender:
    """The slave side: append what the master sent, dispatch every complete record once."""

    def __init__(self, store: "MessageStore") -> None:
        self.store = store
        self.dispatched = store.commitlog.max_offset  # recovery dispatched everything before this
        if store.gate is not None:  # controller mode: from where the confirm offset let dispatch get
            self.dispatched = store.gate.attach_slave_reader(self)

    def file_pending(self, offset: int) -> Future | None:
        """A file creation the append at offset must wait for (off the reactor), else None."""
        q = self.store.commitlog.queue
        last = q.last
        if last is not None and last.wrote < last.file_size:
            return None
        fut = q.next_future()
        if fut is None:
            q.prepare_next(offset)
            fut = q.next_future()
        if fut is None or fut.done():
            return None
        return fut

    def append(self, offset: int, data: bytes) -> str | None:
        """Append data at offset; a reason string when it cannot be (nothing is written then)."""
        store = self.store
        if not store.running:
            return "message store is not running"
        q = store.commitlog.queue
        top = q.max_offset
        if q.files and offset != top:
            return f"offset {offset} is not the slave's max offset {top}"
        if not data:
            return None
        try:
            mf = q.last_for_write(offset)
        except OSError as e:
            return f"cannot create a commit log file: {e}"
        if mf.from_offset + mf.wrote != offset:
            return f"offset {offset} does not continue file {mf.from_offset} at {mf.wrote}"
        if mf.wrote + len(data) > mf.file_size:
            return f"{len(data)} bytes at {offset} do not fit the file starting at {mf.from_offset}"
        mf.mm[mf.wrote:mf.wrote + len(data)] = data
        mf.wrote += len(data)
        if mf.wrote >= mf.file_size or not q.next_pending:
            q.prepare_next()
        if self.dispatched < q.min_offset:  # an empty slave starts at the master's last file
            self.dispatched = q.min_offset
        if store.gate is not None:
            store.gate.release()
        else:
            self.dispatch()
        if store.config.sync_flush:  # no periodic commit log flush runs then: kick a group commit (Java's runs every 10 ms)
            store.flush.wait_flushed(q.max_offset)
        return None

    def dispatch(self, limit: int | None = None) -> None:
        """Dispatch the complete records between the dispatched mark and the end of written data (and ending
        at or before ``limit``, the confirm offset in controller mode)."""
        store = self.store
        q = store.commitlog.queue
        notify: dict[tuple[str, int], ConsumeQueue] = {}
        while True:
            mf = q.find(self.dispatched)
            if mf is None:
                last = q.last
                if last is not None and self.dispatched < last.from_offset:  # files were removed meanwhile
                    self.dispatched = q.min_offset
                    continue
                break
            pos = self.dispatched - mf.from_offset
            if pos + 8 > mf.wrote:
                break
            size, magic = R.SIZE_MAGIC.unpack_from(mf.mm, pos)
            if magic == R.BLANK_MAGIC:
                if mf.wrote < mf.file_size:
                    break  # the end-of-file blank is still arriving
                self.dispatched = mf.end_offset
                continue
            if magic != R.MESSAGE_MAGIC or size <= 0 or pos + size > mf.file_size:
                log.error("replica: unreadable record at %d (size %d, magic %#x); dispatch stops there",
                          self.dispatched, size, magic & 0xFFFFFFFF)
                break
            if pos + size > mf.wrote or (limit is not None and self.dispatched + size > limit):
                break
            try:
                rec = R.decode_record(mf.mm, pos, pos + size)
            except R.RecordError as e:
                log.error("replica: undecodable record at %d: %s", self.dispatched, e)
                break
            store.pipeline.dispatch(request_from_record(self.dispatched, rec))
            if (rec.sys_flag & TRANSACTION_MASK) not in _NO_QUEUE:
                key = (rec.topic, rec.queue_id)
                store.commitlog.topic_queue_table[key] = rec.queue_offset + 1
                cq = store.consume_queues.get(key)
                if cq is not None:
                    notify[key] = cq
            store.commitlog.last_store_timestamp = rec.store_timestamp
            self.dispatched += size
        for (topic, qid), cq in notify.items():
            store.notify_arrival(topic, qid, cq.max_offset)


def truncate_log(store: "MessageStore", offset: int) -> None:
    """Cut the commit log at ``offset`` while the store runs (a rejoining replica dropping what its new master
    never had): later files go, the holding file's tail is zeroed, and consume queues and index forget the
    records past it, as recovery cuts a torn tail."""
    from .recovery import zero_tail

    cl = store.commitlog
    if offset >= cl.max_offset:
        return
    log.warning("replica: truncating the commit log from %d to %d", cl.max_offset, offset)
    cl.queue.discard_prepared()
    cl.queue.truncate_dirty(offset)
    holder = cl.queue.find(offset)
    if holder is not None:
        zero_tail(holder, offset - holder.from_offset, cl.max_record_size + 8)
    store.flush.truncated(offset)  # the group commit thread syncs the files as they are now
    for cq in store.consume_queues.values():
        if cq.max_physic_offset > offset:
            cq.truncate_dirty(offset)
    store.index.truncate(offset)
    for key, cq in store.consume_queues.items():
        cl.topic_queue_table[key] = cq.max_offset
