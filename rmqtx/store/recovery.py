"""Startup recovery: find the end of the commit log, cut a torn tail, bring queues and index level."""
from __future__ import annotations

import logging
from rmqtx.common.progress import Progress, size_text
from rmqtx.common.sysflag import SYSFLAG_BORN_HOST_V6

from . import record as R
from .checkpoint import Checkpoint
from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueue
from .dispatch import DispatchPipeline
from .dispatch_request import request_from_record
from .index import IndexService
from .mapped_file import MappedFile

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)


def _first_store_timestamp(mf: MappedFile) -> int:
    """storeTimestamp of a file's first record, 0 when it does not start with one."""
    size, magic = R.SIZE_MAGIC.unpack_from(mf.mm, 0)
    if magic != R.MESSAGE_MAGIC:
        return 0
    sys_flag = R.INT32.unpack_from(mf.mm, R.SYSFLAG_POS)[0]
    return R.INT64.unpack_from(mf.mm, R.HOSTS_POS + (20 if sys_flag & SYSFLAG_BORN_HOST_V6 else 8))[0]


def _safe_start_index(files: list[MappedFile], checkpoint: Checkpoint, with_index: bool) -> int:
    """After a crash: the newest file whose first record predates the checkpoint (Java's rule)."""
    limit = checkpoint.min_timestamp(with_index=with_index)
    for i in range(len(files) - 1, -1, -1):
        ts = _first_store_timestamp(files[i])
        if 0 < ts <= limit:
            return i
    return 0


def zero_tail(mf: MappedFile, pos: int, max_run: int) -> int:
    """Zero bytes from pos until a zero run longer than any record proves the rest clean."""
    mm, size = mf.mm, mf.file_size
    run = cleared = 0
    while pos < size and run < max_run:
        n = min(_CHUNK, size - pos)
        if mm[pos:pos + n] == _ZEROS[:n]:
            run += n
        else:
            mm[pos:pos + n] = _ZEROS[:n]
            cleared += n
            run = 0
        pos += n
    return cleared


class Recovery:
    """What recovery works on: the store's parts, not the store (it is made before them all are loaded)."""

    def __init__(self, config: StoreConfig, commitlog: CommitLog, consume_queues: dict[tuple[str, int], ConsumeQueue],
                 index: IndexService, checkpoint: Checkpoint, pipeline: DispatchPipeline,
                 queues_built: int | None = None) -> None:
        self.config = config
        self.commitlog = commitlog
        self.consume_queues = consume_queues  # cleared here when the commit log is empty
        self.index = index
        self.checkpoint = checkpoint
        self.pipeline = pipeline  # every record the queues or the index lack goes through it
        #: RocksDB queues: the end of the last record whose units the database holds (after a crash,
        #: records from there on are dispatched again, whatever the checkpoint file says)
        self.queues_built = queues_built

    def run(self, clean: bool) -> None:
        """Validate the commit log (CRC included), truncate, then dispatch what queues and index lack.

        Logs how far it is every few seconds and one summary line at the end.
        """
        progress = Progress("store recovery" if not clean else "store load", say=log.info, interval=5.0)
        checked, dispatched, end = _recover(self, clean, progress)
        kind = "recovered after an abnormal shutdown" if not clean else "loaded after a clean shutdown"
        progress.done(f"{self.config.store_path_root_dir} {kind}: {checked} records checked, {dispatched} dispatched "
                      f"to {len(self.consume_queues)} consume queues and the index, commit log ends at offset {end}")


def _recover(parts: Recovery, clean: bool, progress: Progress) -> tuple[int, int, int]:
    """Recovery proper; returns (records checked, records dispatched, end offset of the commit log)."""
    cl = parts.commitlog
    files = cl.queue.files
    for cq in parts.consume_queues.values():
        cq.recover()
    if not files:
        if parts.consume_queues:
            log.warning("commit log is empty: removing consume queues")
        for cq in parts.consume_queues.values():
            cq.destroy()
        parts.consume_queues.clear()
        parts.index.truncate(0)
        cl.queue.flushed_where = 0
        return 0, 0, 0
    start_idx = (max(0, len(files) - 3) if clean
                 else _safe_start_index(files, parts.checkpoint, parts.config.message_index_enable))
    scan_from = files[start_idx].from_offset
    if clean:
        built = max((cq.max_physic_offset for cq in parts.consume_queues.values()), default=-1)
        if parts.queues_built is not None:  # RocksDB's checkpoint: deleted queues' records stay dispatched
            built = max(built, parts.queues_built)
        dispatch_from = max(built, cl.min_offset)
    else:
        dispatch_from = scan_from
        if parts.queues_built is not None and parts.queues_built < dispatch_from:
            holder = cl.queue.find(parts.queues_built)
            dispatch_from = holder.from_offset if holder is not None else cl.min_offset
    begin = min(scan_from, dispatch_from)
    end = begin
    bad = None
    checked = dispatched = 0
    total = files[-1].end_offset - begin
    if total > 64 << 20:
        log.info("store recovery: checking %s of commit log from offset %d", size_text(total), begin)
    for item in cl.scan(begin, check_crc=parts.config.check_crc_on_recover):
        if item.kind == "msg":
            end = item.offset + item.size
            checked += 1
            if not checked & 4095:
                progress.tick(end - begin, total, "of the commit log checked")
            if item.offset >= dispatch_from:
                assert item.record is not None
                parts.pipeline.dispatch(request_from_record(item.offset, item.record))
                dispatched += 1
        elif item.kind == "blank":
            end = item.offset + item.size
        else:
            if item.kind != "end":
                bad = item
            break
    if bad is not None:
        log.warning("commit log: %s at offset %d, cutting the tail there", bad.kind, bad.offset)
    elif not clean:
        log.info("commit log recovered after abnormal shutdown up to offset %d", end)
    cl.queue.truncate_dirty(end)
    holder = cl.queue.find(end)
    if holder is not None:
        cleared = zero_tail(holder, end - holder.from_offset, cl.max_record_size + 8)
        if cleared:
            log.warning("commit log: zeroed %d bytes of torn tail at offset %d", cleared, end)
    cl.queue.flushed_where = end
    for cq in parts.consume_queues.values():
        if cq.max_physic_offset > end:
            cq.truncate_dirty(end)
    parts.index.truncate(end)
    min_phy = cl.min_offset
    for (topic, qid), cq in parts.consume_queues.items():
        cq.correct_min_offset(min_phy)
        cq.queue.flushed_where = cq.queue.max_offset
        cl.topic_queue_table[(topic, qid)] = cq.max_offset
    return checked, dispatched, end
