"""Retention: delete old commit log files, then consume queue and index files wholly below them."""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

from twisted.internet.task import LoopingCall

from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueue
from .index import IndexService

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10
CLEAN_FORCIBLY_RATIO = 0.85  # above this, files go regardless of age (Java's diskSpaceCleanForciblyRatio)
WARNING_LEVEL_RATIO = 0.90  # above this, puts are refused (Java's diskSpaceWarningLevelRatio)


def disk_used_ratio(path: str) -> float:
    """Share of the file system's blocks in use, as Java's getDiskPartitionSpaceUsedPercent."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    return (total - st.f_bfree * st.f_frsize) / total if total else -1.0


class RetentionService:
    """Java's CleanCommitLogService + CleanConsumeQueueService, run every cleanResourceInterval."""

    def __init__(self, config: StoreConfig, clock: Callable[[], float], commitlog: CommitLog,
                 consume_queues: dict[tuple[str, int], ConsumeQueue], index: IndexService,
                 disk_full: Callable[[bool], None]) -> None:
        self.config = config
        self.clock = clock
        self.commitlog = commitlog
        self.consume_queues = consume_queues
        self.index = index
        self.disk_full = disk_full  # told after each look at the disk: whether puts must be refused
        self.disk_usage: Callable[[str], float] = disk_used_ratio  # replaceable in tests
        # as Java's lastPhysicalMinOffset: no pass over every queue until the commit log lost its head
        # (a pass at 0 has nothing to correct, and costs a read per queue: 6% of a 100,000-queue burst)
        self._last_min_phy = 0
        self._loop: LoopingCall | None = None

    def start(self, reactor: Any) -> None:
        self._loop = LoopingCall(self.run)
        self._loop.clock = reactor
        self._loop.start(self.config.clean_resource_interval / 1000.0, now=False).addErrback(
            lambda f: log.error("retention loop died: %s", f))

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def _is_time_to_delete(self) -> bool:
        hour = time.localtime(self.clock()).tm_hour
        for part in self.config.delete_when.split(";"):
            part = part.strip()
            if part.isdigit() and int(part) == hour:
                return True
        return False

    def run(self, manual: bool = False) -> None:
        """One pass: commit log first, then whatever points only below its new start."""
        self._clean_commit_log(manual)
        self._clean_logics()

    def _clean_commit_log(self, manual: bool) -> int:
        cfg = self.config
        ratio = self.disk_usage(cfg.commit_log_dir if os.path.isdir(cfg.commit_log_dir) else cfg.store_path_root_dir)
        full = ratio > WARNING_LEVEL_RATIO
        self.disk_full(full)
        if full:
            log.error("disk used ratio %.2f above %.2f: refusing puts", ratio, WARNING_LEVEL_RATIO)
        at_once = ratio > CLEAN_FORCIBLY_RATIO
        space = ratio < 0 or ratio > cfg.disk_max_used_space_ratio / 100.0
        if not (manual or space or self._is_time_to_delete()):
            return 0
        q = self.commitlog.queue
        expire_s = cfg.file_reserved_time * 3600
        now = self.clock()
        count = 0
        for mf in q.files[:-1]:
            if count >= DELETE_FILES_BATCH_MAX or mf.end_offset > q.flushed_where:
                break
            if not (at_once or now >= mf.mtime() + expire_s):
                break
            count += 1
        if count:
            removed = q.remove_first(count)
            log.info("retention: deleted commit log files %s", [os.path.basename(m.path) for m in removed])
        return count

    def _clean_logics(self) -> None:
        min_phy = self.commitlog.min_offset
        if min_phy <= self._last_min_phy:
            return
        self._last_min_phy = min_phy
        for cq in self.consume_queues.values():
            cq.delete_expired(min_phy)
        self.index.delete_expired(min_phy)
