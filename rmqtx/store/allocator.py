"""The store's file thread: makes and deletes files in the order asked, fed in batches.

A burst of first sends to new queues asks for thousands of consume-queue files within a few reactor
turns. Through a ``ThreadPoolExecutor`` each request cost the reactor a work-queue put, a semaphore
and a wake-up of the thread (and the GIL hand-offs those bring): over a third of its time at 100,000
new queues. Here a request is an append under a lock; the thread, once woken, takes everything
queued before it sleeps again. A request's handle is a :class:`FileJob`, not a ``Future``: a
``Future`` makes a condition and a re-entrant lock of its own, and each callback added to it takes
that lock, shared with the file thread; with the hand-offs of the GIL those brought, they were the
reactor's largest cost per new queue after the send itself in the same burst.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from concurrent.futures import CancelledError, Executor, Future
from typing import Any, Callable

log = logging.getLogger(__name__)

_PENDING, _RUNNING, _OK, _FAILED, _CANCELLED = range(5)


class FileJob(Future):
    """One call queued on a :class:`FileAllocator`, with the ``Future`` interface (``Future.__init__``
    is deliberately not run).

    The reactor adds a callback to each new queue's file job: through a lock shared with the file
    thread, that was a tenth of the reactor's time in a burst of first sends (a blocked acquire
    gives the GIL away). Callbacks go into a list and leave it by ``pop``, each atomic under the
    GIL, so whichever side pops a callback runs it, exactly once, and neither side locks; the state
    is set before the file thread drains the list, and read after the reactor appends to it.
    Only a caller blocked in :meth:`result` (rare: a full file before its successor was made)
    takes the allocator's condition.
    """

    def __init__(self, done: threading.Condition, waiting: list[int]) -> None:  # noqa: D107 - see class
        self._done_cond = done
        self._waiting = waiting  # [count of threads blocked in result()], shared with the allocator
        self._state_ = _PENDING
        self._value: Any = None
        self._callbacks: list[Callable[[Future], object]] = []

    def __repr__(self) -> str:
        return f"<FileJob {('pending', 'running', 'finished', 'failed', 'cancelled')[self._state_]}>"

    def done(self) -> bool:
        return self._state_ >= _OK

    def running(self) -> bool:
        return self._state_ == _RUNNING

    def cancelled(self) -> bool:
        return self._state_ == _CANCELLED

    def cancel(self) -> bool:
        with self._done_cond:
            if self._state_ != _PENDING:
                return self._state_ == _CANCELLED
            self._state_ = _CANCELLED
        self._finish()
        return True

    def set_running_or_notify_cancel(self) -> bool:
        with self._done_cond:  # uncontended but for a shutdown's cancel
            if self._state_ == _CANCELLED:
                return False
            self._state_ = _RUNNING
            return True

    def set_result(self, result: Any) -> None:
        self._value = result
        self._state_ = _OK
        self._finish()

    def set_exception(self, exception: BaseException | None) -> None:
        self._value = exception
        self._state_ = _FAILED
        self._finish()

    def _finish(self) -> None:
        if self._waiting[0]:  # read after the state is set; a waiter counts itself before it reads it
            with self._done_cond:
                self._done_cond.notify_all()
        self._drain()

    def _drain(self) -> None:
        callbacks = self._callbacks
        while callbacks:
            try:
                fn = callbacks.pop(0)
            except IndexError:  # the other side took the last one
                return
            try:
                fn(self)
            except Exception:  # as Future does: a callback's bug is logged, the others still run
                log.exception("a callback of %r failed", self)

    def add_done_callback(self, fn: Callable[[Future], object]) -> None:
        self._callbacks.append(fn)
        if self._state_ >= _OK:
            self._drain()

    def _wait(self, timeout: float | None) -> None:
        if self._state_ >= _OK:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done_cond:
            self._waiting[0] += 1
            try:
                while self._state_ < _OK:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError()
                    self._done_cond.wait(left)
            finally:
                self._waiting[0] -= 1

    def result(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._state_ == _CANCELLED:
            raise CancelledError()
        if self._state_ == _FAILED:
            raise self._value
        return self._value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        if self._state_ == _CANCELLED:
            raise CancelledError()
        return self._value if self._state_ == _FAILED else None


class FileAllocator(Executor):
    """A one-thread ``Executor`` that runs its calls in submission order, woken once per batch."""

    def __init__(self, name: str) -> None:
        self._calls: collections.deque[tuple[FileJob | None, Callable[..., Any], tuple, dict]] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._done = threading.Condition(threading.Lock())  # the jobs' states and their waiters
        self._waiting = [0]
        self._idle = False  # the thread waits on _cond and must be notified
        self._closed = False
        self._name = name
        self._thread: threading.Thread | None = None  # started by the first call, as a pool's are

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> FileJob:
        job = FileJob(self._done, self._waiting)
        self._queue(False, job, fn, args, kwargs)
        return job

    def submit_first(self, fn: Callable[..., Any], /, *args: Any) -> FileJob:
        """Like :meth:`submit`, but ahead of every call still waiting: for work that releases
        resources (closing evicted mappings frees their descriptors), which must not queue behind a
        burst of thousands of file creations."""
        job = FileJob(self._done, self._waiting)
        self._queue(True, job, fn, args, {})
        return job

    def call_first(self, fn: Callable[..., Any], /, *args: Any) -> None:
        """:meth:`submit_first` for a call nobody waits on (no job; a failure is logged)."""
        self._queue(True, None, fn, args, {})

    def _queue(self, first: bool, job: FileJob | None, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if first:
                self._calls.appendleft((job, fn, args, kwargs))
            else:
                self._calls.append((job, fn, args, kwargs))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif self._idle:
                self._idle = False
                self._cond.notify()

    def _run(self) -> None:
        calls = self._calls
        while True:
            with self._cond:
                while not calls:
                    if self._closed:
                        return
                    self._idle = True
                    self._cond.wait()
            while calls:  # appends meanwhile are taken in this same round
                job, fn, args, kwargs = calls.popleft()
                if job is None:
                    try:
                        fn(*args, **kwargs)
                    except Exception:
                        log.exception("%s: %r failed", self._name, fn)
                    continue
                if not job.set_running_or_notify_cancel():
                    continue
                try:
                    result = fn(*args, **kwargs)
                except BaseException as e:  # handed to whoever waits on the job, as an executor does
                    job.set_exception(e)
                else:
                    job.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._closed = True
            cancelled = []
            if cancel_futures:
                while self._calls:
                    job = self._calls.popleft()[0]
                    if job is not None:
                        cancelled.append(job)
            self._idle = False
            self._cond.notify()
            thread = self._thread
        for job in cancelled:
            job.cancel()
        if wait and thread is not None and threading.current_thread() is not thread:
            thread.join()
