"""Flushing on Twisted: periodic async flush, group-commit sync flush, never syncing on the reactor."""
from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.python.failure import Failure

from .mapped_file import MappedFile

if TYPE_CHECKING:
    from .message_store import MessageStore

log = logging.getLogger(__name__)
_PAGE = 4096


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

    def __init__(self, store: "MessageStore") -> None:
        self.store = store
        self.reactor: Any = None
        self.sync_count = 0  # commit log sync jobs run (group commit shares one among many puts)
        self.flushed_store_ts = 0
        # (offset, fn, arg): fn(synced: bool, arg) once the commit log is synced past offset (or timed out)
        self._waiters: deque[tuple[int, Any, Any]] = deque()
        self._cl_busy = False
        self._logics_busy = False
        self._kick: Any = None
        self._loops: list[LoopingCall] = []
        self._last_thorough = float("-inf")  # ms; the first consume queue flush syncs everything

    def start(self, reactor: Any) -> None:
        self.reactor = reactor
        cfg = self.store.config
        if not cfg.sync_flush:
            self._loop(self._async_tick, cfg.flush_interval_commit_log)
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

    def _in_thread(self, fn: Any, *args: Any) -> Deferred:
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn, *args)

    # ---- commit log ---------------------------------------------------------------------------

    def _flush_commit_log(self) -> Deferred | None:
        """Sync the commit log up to its current end in a thread; fires with the covered offset."""
        q = self.store.commitlog.queue
        target = q.max_offset
        if target <= q.flushed_where or self._cl_busy:
            return None
        files = q.dirty_files()
        ts = self.store.commitlog.last_store_timestamp
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
        q = self.store.commitlog.queue
        if offset <= q.flushed_where:
            fn(True, arg)
            return
        if self.reactor is None:  # not started (offline use): sync inline
            self.flush_commit_log_now()
            fn(True, arg)
            return
        self._waiters.append((offset, fn, arg))
        if not self._cl_busy and self._kick is None:
            self._kick = self.reactor.callLater(0, self._group_commit)

    def _group_commit(self) -> None:
        """One sync for every put waiting now; puts arriving meanwhile share the next one."""
        self._kick = None
        job = self._flush_commit_log()
        if job is None:
            self._release_waiters()
            return
        timer = self.reactor.callLater(self.store.config.sync_flush_timeout / 1000.0, self._timeout,
                                       self.store.commitlog.queue.max_offset)

        def after(result: Any) -> None:
            if timer.active():
                timer.cancel()
            if isinstance(result, Failure):
                log.error("commit log sync failed: %s", result.value)
            self._release_waiters()
            if self._waiters and self._kick is None and self.reactor is not None:
                self._kick = self.reactor.callLater(0, self._group_commit)
        job.addBoth(after)

    def _release_waiters(self) -> None:
        flushed = self.store.commitlog.queue.flushed_where
        while self._waiters and self._waiters[0][0] <= flushed:
            _call(self._waiters.popleft(), True)

    def _timeout(self, covered: int) -> None:
        while self._waiters and self._waiters[0][0] <= covered:
            _call(self._waiters.popleft(), False)

    def flush_commit_log_now(self) -> None:
        """Blocking sync of the whole commit log tail (offline use and shutdown)."""
        cl = self.store.commitlog
        q = cl.queue
        _sync_all(q.dirty_files())
        q.flushed_where = q.max_offset
        self.flushed_store_ts = max(self.flushed_store_ts, cl.last_store_timestamp)
        self._release_waiters()

    # ---- consume queues, index, checkpoint ----------------------------------------------------

    def _collect_logics(self, thorough: bool = True) -> tuple[list[MappedFile], list[tuple[Any, int]]]:
        """What to sync now: every dirty queue when thorough, else (as Java) only queues with at least
        flushConsumeQueueLeastPages unsynced pages; the checkpoint's logics time moves on thorough ones."""
        store = self.store
        files: list[MappedFile] = []
        marks = []
        least = 0 if thorough else store.config.flush_consume_queue_least_pages * _PAGE
        if least:
            picked = [cq for cq in store.dirty_cqs if cq.queue.max_offset - cq.queue.flushed_where >= least]
            store.dirty_cqs.difference_update(picked)
        else:
            picked = list(store.dirty_cqs)
            store.dirty_cqs.clear()
        for cq in picked:
            files.extend(cq.queue.dirty_files())
            marks.append((cq.queue, cq.queue.max_offset))
            if cq.ext is not None:
                files.extend(cq.ext.queue.dirty_files())
                marks.append((cq.ext.queue, cq.ext.queue.max_offset))
        files.extend(store.index.take_dirty())
        ckpt = store.checkpoint
        assert ckpt is not None
        if self.flushed_store_ts:
            ckpt.physic_ts = self.flushed_store_ts
        if store.dispatched_ts and thorough and not store.files_pending:  # units waiting for a file are not on disk yet
            ckpt.logics_ts = store.dispatched_ts
        if store.index.files:
            ckpt.index_ts = store.index.files[-1].end_ts or ckpt.index_ts
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
        thorough = now >= self._last_thorough + self.store.config.flush_consume_queue_thorough_interval
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
        self._in_thread(self._sync_logics, files, self.store.checkpoint).addBoth(done)

    def flush_all_now(self) -> None:
        """Blocking final flush of everything (shutdown)."""
        self.flush_commit_log_now()
        files, marks = self._collect_logics()
        self._sync_logics(files, self.store.checkpoint)
        self._mark(marks)
        while self._waiters:
            _call(self._waiters.popleft(), True)
