"""The store's file thread: makes and deletes files in the order asked, fed in batches.

A burst of first sends to new queues asks for thousands of consume-queue files within a few reactor
turns. Through a ``ThreadPoolExecutor`` each request cost the reactor a work-queue put, a semaphore
and a wake-up of the thread (and the GIL hand-offs those bring): over a third of its time at 100,000
new queues. Here a request is an append under a lock; the thread, once woken, takes everything
queued before it sleeps again.
"""

from __future__ import annotations

import collections
import threading
from concurrent.futures import Executor, Future
from typing import Any, Callable


class FileAllocator(Executor):
    """A one-thread ``Executor`` that runs its calls in submission order, woken once per batch."""

    def __init__(self, name: str) -> None:
        self._calls: collections.deque[tuple[Future, Callable[..., Any], tuple, dict]] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._idle = False  # the thread waits on _cond and must be notified
        self._closed = False
        self._name = name
        self._thread: threading.Thread | None = None  # started by the first call, as a pool's are

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return self._queue(False, fn, args, kwargs)

    def submit_first(self, fn: Callable[..., Any], /, *args: Any) -> Future:
        """Like :meth:`submit`, but ahead of every call still waiting: for work that releases
        resources (closing evicted mappings frees their descriptors), which must not queue behind a
        burst of thousands of file creations."""
        return self._queue(True, fn, args, {})

    def _queue(self, first: bool, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Future:
        fut: Future = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if first:
                self._calls.appendleft((fut, fn, args, kwargs))
            else:
                self._calls.append((fut, fn, args, kwargs))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif self._idle:
                self._idle = False
                self._cond.notify()
        return fut

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
                fut, fn, args, kwargs = calls.popleft()
                if not fut.set_running_or_notify_cancel():
                    continue
                try:
                    result = fn(*args, **kwargs)
                except BaseException as e:  # handed to whoever waits on the future, as an executor does
                    fut.set_exception(e)
                else:
                    fut.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._closed = True
            if cancel_futures:
                while self._calls:
                    self._calls.popleft()[0].cancel()
            self._idle = False
            self._cond.notify()
            thread = self._thread
        if wait and thread is not None and threading.current_thread() is not thread:
            thread.join()
