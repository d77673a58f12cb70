"""Flushing on Twisted: periodic async flush, group-commit sync flush, never syncing on the reactor."""
from __future__ import annotations

import logging
import os
from collections import deque
from typing import Any, Callable

from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.python.failure import Failure

from .checkpoint import Checkpoint
from .commitlog import CommitLog
from .committer import Committer, CommitterAPI, Wakeup
from .config import StoreConfig
from .consume_queue import ConsumeQueue
from .dispatch import DispatchPipeline
from .index import IndexService
from .mapped_file import MappedFile

log = logging.getLogger(__name__)
_PAGE = 4096
#: (offset, store time) pairs kept for the checkpoint's physic time while syncs lag (one per reactor turn)
_MAX_MARKS = 256


def _sync_all(files: list[MappedFile]) -> None:
    for mf in files:
        mf.sync()


def _fire(synced: bool, d: Deferred) -> None:
    d.callback(synced)


def _call(waiter: tuple[int, Any, Any], synced: bool) -> None:
    """Run one waiter; a failing one must not keep the others waiting."""
    try:
        waiter[1](synced, waiter[2])
    except Exception:
        log.exception("flush waiter failed")


class FlushService:
    """Commit log flushing (async interval or sync group commit) and the 1 s queue/index/checkpoint flush."""

    def __init__(self, config: StoreConfig, commitlog: CommitLog, dirty_cqs: set[ConsumeQueue], index: IndexService,
                 pipeline: DispatchPipeline, files_pending: Callable[[], bool]) -> None:
        self.config = config
        self.commitlog = commitlog
        #: consume queues written since their last flush: the store's set, emptied here
        self.dirty_cqs = dirty_cqs
        self.index = index
        self.pipeline = pipeline  # its dispatched_ts becomes the checkpoint's logics time
        self.files_pending = files_pending  # units or index entries still wait for a file
        #: set by the store once loaded
        self.checkpoint: Checkpoint | None = None
        self.reactor: Any = None
        self.sync_count = 0  # commit log sync jobs run (group commit shares one among many puts)
        self.flushed_store_ts = 0
        # (offset, fn, arg): fn(synced: bool, arg) once the commit log is synced past offset (or timed out)
        self._waiters: deque[tuple[int, Any, Any]] = deque()
        self._cl_busy = False
        self._logics_busy = False
        self._kick: Any = None
        self._loops: list[LoopingCall] = []
        #: called with a thunk that releases flushed waiters: the broker wraps it so that every
        #: connection's answers leave in one write (see rmqtx.remoting.protocol.batch_writes)
        self.release_hook: Any = None
        #: what makes the group commit thread (SYNC_FLUSH): either twin of rmqtx.store.committer
        self.committer_type: Callable[[int, int], CommitterAPI] = Committer
        #: the running group commit thread (SYNC_FLUSH, between start and stop), else None
        self.committer: CommitterAPI | None = None
        self._wakeup: Wakeup | None = None  # its signal, watched by the reactor
        self._handed: MappedFile | None = None  # the newest commit log file handed to it
        #: (offset, last store timestamp) of each written() not yet synced: the checkpoint's physic time
        self._marks: deque[tuple[int, int]] = deque()
        self._sync_errno = 0  # of the last failed sync reported (logged when it changes)
        self._stuck: tuple[int, float, int] | None = None  # (flushed, since, covered) for the timeout watch
        self._last_thorough = float("-inf")  # ms; the first consume queue flush syncs everything

    def start(self, reactor: Any) -> None:
        self.reactor = reactor
        cfg = self.config
        if not cfg.sync_flush:
            self._loop(self._async_tick, cfg.flush_interval_commit_log)
        else:
            self._start_committer()
            self._loop(self._watch, min(1000, max(10, cfg.sync_flush_timeout // 4)))
        self._loop(self._logics_tick, cfg.flush_interval_consume_queue)

    def _loop(self, fn: Any, interval_ms: int) -> None:
        lc = LoopingCall(fn)
        lc.clock = self.reactor
        lc.start(interval_ms / 1000.0, now=False).addErrback(lambda f: log.error("flush loop died: %s", f))
        self._loops.append(lc)

    def stop(self) -> None:
        for lc in self._loops:
            if lc.running:
                lc.stop()
        self._loops.clear()
        if self._kick is not None and self._kick.active():
            self._kick.cancel()
        self._kick = None
        committer, wakeup = self.committer, self._wakeup
        self.committer = self._wakeup = None
        if committer is not None and wakeup is not None:
            self.reactor.removeReader(wakeup)
            committer.stop()
            wakeup.close()

    @property
    def busy(self) -> bool:
        """A flush of the commit log or of the queues runs in a thread now (a truncation waits for it to end)."""
        return self._cl_busy or self._logics_busy

    def _in_thread(self, fn: Any, *args: Any) -> Deferred:
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn, *args)

    # ---- commit log ---------------------------------------------------------------------------

    def _flush_commit_log(self) -> Deferred | None:
        """Sync the commit log up to its current end in a thread; fires with the covered offset."""
        q = self.commitlog.queue
        target = q.max_offset
        if target <= q.flushed_where or self._cl_busy:
            return None
        files = q.dirty_files()
        ts = self.commitlog.last_store_timestamp
        self._cl_busy = True
        self.sync_count += 1

        def done(result: Any) -> Any:
            self._cl_busy = False
            if not isinstance(result, Failure):
                q.flushed_where = max(q.flushed_where, target)
                self.flushed_store_ts = max(self.flushed_store_ts, ts)
            return result
        return self._in_thread(_sync_all, files).addBoth(done)

    def _async_tick(self) -> None:
        d = self._flush_commit_log()
        if d is not None:
            d.addErrback(lambda f: log.error("commit log flush failed: %s", f.value))

    def wait_flushed(self, offset: int) -> Deferred:
        """Fires True once the commit log is synced past offset, False on timeout or sync error."""
        d: Deferred = Deferred()
        self.call_when_flushed(offset, _fire, d)
        return d

    def call_when_flushed(self, offset: int, fn: Any, arg: Any) -> None:
        """``fn(synced, arg)`` once the commit log is synced past offset (synced False on timeout);
        the Deferred-free form of :meth:`wait_flushed` for the send path."""
        q = self.commitlog.queue
        if offset <= q.flushed_where:
            fn(True, arg)
            return
        if self.reactor is None or self.committer is None:  # not started (offline use): sync inline
            self.flush_commit_log_now()
            fn(True, arg)
            return
        self._waiters.append((offset, fn, arg))
        if self._kick is None:
            # at the end of this reactor turn, so every frame of the read shares the sync
            self._kick = self.reactor.callLater(0, self._hand_over)

    # ---- the group commit thread (SYNC_FLUSH) -------------------------------------------------

    def _start_committer(self) -> None:
        wakeup = Wakeup(self._on_synced)
        try:
            self.committer = self.committer_type(wakeup.write_fd, self.commitlog.queue.flushed_where)
        except BaseException:
            wakeup.close()
            raise
        self._wakeup = wakeup
        self.reactor.addReader(wakeup)

    def _hand_over(self) -> None:
        """Once per reactor turn with new waiters: the committer gets the files it has not seen, then
        the offset to sync to (a new file must be there before written() covers bytes in it)."""
        self._kick = None
        committer = self.committer
        if committer is None:
            return
        cl = self.commitlog
        q = cl.queue
        files = q.files
        if files and files[-1] is not self._handed:
            new = []
            for mf in reversed(files):
                if mf is self._handed or mf.end_offset <= q.flushed_where:
                    break
                new.append(mf)
            for mf in reversed(new):
                self._add_file(committer, mf)
            self._handed = files[-1]
        target = q.max_offset
        marks = self._marks
        if not marks or target > marks[-1][0]:
            if len(marks) < _MAX_MARKS:
                marks.append((target, cl.last_store_timestamp))
            else:  # a disk that fails or hangs for long: the time then moves on later, never early
                marks[-1] = (target, cl.last_store_timestamp)
        committer.written(target)

    @staticmethod
    def _add_file(committer: CommitterAPI, mf: MappedFile) -> None:
        if mf.closed:  # its descriptor number may be another file's now
            return
        if mf.fd >= 0:
            committer.add_file(mf.fd, mf.end_offset)
            return
        fd = os.open(mf.path, os.O_RDWR | os.O_CLOEXEC)  # mapped without a kept descriptor
        try:
            committer.add_file(fd, mf.end_offset)
        finally:
            os.close(fd)

    def _on_synced(self) -> None:
        """The committer signalled: a sync ended (or failed with a new errno)."""
        committer = self.committer
        if committer is None:
            return
        offset, self.sync_count, err = committer.synced()
        if err != self._sync_errno:
            self._sync_errno = err
            if err:
                log.error("commit log sync failed: %s (retried every 100 ms; puts time out meanwhile)",
                          os.strerror(err))
            else:
                log.warning("commit log sync works again")
        ts = 0
        marks = self._marks
        while marks and marks[0][0] <= offset:
            ts = marks.popleft()[1]
        self._synced(offset, ts)

    def truncated(self, offset: int) -> None:
        """The commit log was cut back to ``offset`` while running (a replica's truncation): the
        committer forgets its files (later ones are deleted, and may be made again under the same
        name) and any sync in flight past the cut; the tail is handed over again. Waiters past the cut
        are answered False now: their bytes are gone, and the waiters after them (in offset order)
        would wait behind them."""
        cut = []
        waiters = self._waiters
        while waiters and waiters[-1][0] > offset:
            cut.append(waiters.pop())
        committer = self.committer
        if committer is not None:
            committer.rebase(offset)
            self._handed = None
            marks = self._marks
            while marks and marks[-1][0] > offset:
                marks.pop()
            if self._kick is None:
                self._kick = self.reactor.callLater(0, self._hand_over)
        for waiter in reversed(cut):
            _call(waiter, False)

    def _synced(self, target: int, ts: int) -> None:
        q = self.commitlog.queue
        if target > q.flushed_where:
            q.flushed_where = target
        if ts > self.flushed_store_ts:
            self.flushed_store_ts = ts
        if self._waiters:
            hook = self.release_hook
            if hook is None:
                self._release_waiters()
            else:
                hook(self._release_waiters)

    def _release_waiters(self) -> None:
        flushed = self.commitlog.queue.flushed_where
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            _call(waiters.popleft(), True)

    def _watch(self) -> None:
        """FLUSH_DISK_TIMEOUT for puts whose sync has not moved for syncFlushTimeout (a stalled disk)."""
        if not self._waiters:
            self._stuck = None
            return
        q = self.commitlog.queue
        now = self.reactor.seconds()
        if self._stuck is None or self._stuck[0] != q.flushed_where:
            self._stuck = (q.flushed_where, now, q.max_offset)
        elif now - self._stuck[1] >= self.config.sync_flush_timeout / 1000.0:
            self._timeout(self._stuck[2])
            self._stuck = None

    def _timeout(self, covered: int) -> None:
        while self._waiters and self._waiters[0][0] <= covered:
            _call(self._waiters.popleft(), False)

    def flush_commit_log_now(self) -> None:
        """Blocking sync of the whole commit log tail (offline use and shutdown)."""
        cl = self.commitlog
        q = cl.queue
        _sync_all(q.dirty_files())
        q.flushed_where = q.max_offset
        self.flushed_store_ts = max(self.flushed_store_ts, cl.last_store_timestamp)
        self._release_waiters()

    # ---- consume queues, index, checkpoint ----------------------------------------------------

    def _collect_logics(self, thorough: bool = True) -> tuple[list[MappedFile], list[tuple[Any, int]]]:
        """What to sync now: every dirty queue when thorough, else (as Java) only queues with at least
        flushConsumeQueueLeastPages unsynced pages; the checkpoint's logics time moves on thorough ones."""
        files: list[MappedFile] = []
        marks = []
        least = 0 if thorough else self.config.flush_consume_queue_least_pages * _PAGE
        dirty = self.dirty_cqs
        if least:
            picked = [cq for cq in dirty if cq.queue.max_offset - cq.queue.flushed_where >= least]
            dirty.difference_update(picked)
        else:
            picked = list(dirty)
            dirty.clear()
        for cq in picked:
            files.extend(cq.queue.dirty_files())
            marks.append((cq.queue, cq.queue.max_offset))
            if cq.ext is not None:
                files.extend(cq.ext.queue.dirty_files())
                marks.append((cq.ext.queue, cq.ext.queue.max_offset))
        files.extend(self.index.take_dirty())
        ckpt = self.checkpoint
        assert ckpt is not None
        if self.flushed_store_ts:
            ckpt.physic_ts = self.flushed_store_ts
        dispatched_ts = self.pipeline.dispatched_ts
        if dispatched_ts and thorough and not self.files_pending():  # units waiting for a file are not on disk yet
            ckpt.logics_ts = dispatched_ts
        if self.index.files:
            ckpt.index_ts = self.index.files[-1].end_ts or ckpt.index_ts
        return files, marks

    @staticmethod
    def _sync_logics(files: list[MappedFile], ckpt: Any) -> None:
        _sync_all(files)
        ckpt.flush()

    @staticmethod
    def _mark(marks: list[tuple[Any, int]]) -> None:
        for q, offset in marks:
            q.flushed_where = max(q.flushed_where, offset)

    def _logics_tick(self) -> None:
        if self._logics_busy:
            return
        now = self.reactor.seconds() * 1000
        thorough = now >= self._last_thorough + self.config.flush_consume_queue_thorough_interval
        if thorough:
            self._last_thorough = now
        files, marks = self._collect_logics(thorough)
        self._logics_busy = True

        def done(result: Any) -> None:
            self._logics_busy = False
            if isinstance(result, Failure):
                log.error("consume queue/index flush failed: %s", result.value)
            else:
                self._mark(marks)
        self._in_thread(self._sync_logics, files, self.checkpoint).addBoth(done)

    def flush_all_now(self) -> None:
        """Blocking final flush of everything (shutdown)."""
        self.flush_commit_log_now()
        files, marks = self._collect_logics()
        self._sync_logics(files, self.checkpoint)
        self._mark(marks)
        while self._waiters:
            _call(self._waiters.popleft(), True)
