"""The SYNC_FLUSH group commit thread: syncs the commit log back to back, off the reactor.

The reactor sets the offset to reach once per turn (:meth:`~PyCommitter.written`); the thread syncs
every file holding bytes past what it synced last, then signals the reactor through a descriptor it
watches (:class:`Wakeup`), and the reactor reads the result (:meth:`~PyCommitter.synced`). Nothing
is handed from thread to reactor but that signal, so the thread needs no Python object of the reactor's.

``rmqtx._accel.Committer`` is the same thread in C, which never takes the GIL at all: a Python thread
needs the GIL again after every fdatasync, and waits for the reactor to let it go. A prototype of the
C one gave about 30% more sends/s at SYNC_FLUSH with 8 producer threads (docs/benchmarks.md).
:data:`Committer` is the C one when the accelerator is loaded, else :class:`PyCommitter`.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Protocol

from twisted.internet.interfaces import IReadDescriptor
from zope.interface import implementer

from rmqtx.accel import accel

#: a failed sync is tried again after this long (a failing disk must not spin the thread)
RETRY_SECONDS = 0.1
_ONE = (1).to_bytes(8, sys.byteorder)  # what an eventfd takes: a native 64-bit count


class CommitterAPI(Protocol):
    """What FlushService calls; both twins have it."""

    def add_file(self, fd: int, end_offset: int) -> None: ...
    def written(self, offset: int) -> None: ...
    def synced(self) -> tuple[int, int, int]: ...
    def rebase(self, offset: int) -> None: ...
    def hold(self) -> None: ...
    def release(self) -> None: ...
    def held(self) -> bool: ...
    def stop(self) -> None: ...


class PyCommitter:
    """``PyCommitter(efd, synced)``: a thread syncing the files handed to it up to the written offset.

    ``efd`` is where each result is signalled (an eventfd or a pipe's write end, non-blocking, kept open
    until :meth:`stop`); ``synced`` is the offset already on disk. Shared state lives under one lock;
    while the thread runs, only it closes descriptors, so a sync in flight never has one closed (or its
    number reused) under it.
    """

    def __init__(self, efd: int, synced: int) -> None:
        if efd < 0:
            raise ValueError("efd must be an open descriptor")
        self._efd = efd
        self._cond = threading.Condition(threading.Lock())
        self._running = True
        self._hold = False
        self._parked = False
        self._target = self._synced = synced
        self._syncs = 0
        self._err = 0
        self._gen = 0  # bumped by rebase(): a sync started before it reports nothing
        self._files: list[tuple[int, int, int]] = []  # (dup'ed fd, end offset, gen)
        self._stopping = threading.Lock()
        self._thread: threading.Thread | None = threading.Thread(target=self._main, name="rmqtx-committer",
                                                                 daemon=True)
        self._thread.start()

    def add_file(self, fd: int, end_offset: int) -> None:
        """Sync a duplicate of ``fd`` (a commit log file) from now on: the store may close or delete the
        file meanwhile, and the sync must still go to the file it wrote. Hand a file over before
        :meth:`written` covers bytes in it."""
        dup = os.dup(fd)
        with self._cond:
            if self._running:
                self._files.append((dup, end_offset, self._gen))
                return
        os.close(dup)
        raise ValueError("the committer is stopped")

    def written(self, offset: int) -> None:
        """Sync up to ``offset`` (called once per reactor turn, so a turn's puts share one sync)."""
        with self._cond:
            if offset > self._target:
                self._target = offset
                self._cond.notify_all()

    def synced(self) -> tuple[int, int, int]:
        """``(offset synced, syncs done, errno of the last sync or 0)``; a failed sync leaves the offset."""
        with self._cond:
            return self._synced, self._syncs, self._err

    def rebase(self, offset: int) -> None:
        """The log was cut at ``offset`` (a truncation): forget every file (hand the tail again) and
        claim nothing past the cut, not even from a sync that was in flight."""
        with self._cond:
            self._synced = self._target = min(self._synced, offset)
            self._gen += 1
            self._cond.notify_all()

    def hold(self) -> None:
        """Test control: the next sync waits, started, before its fdatasync (a disk that hangs)."""
        self._set_hold(True)

    def release(self) -> None:
        """Test control: undo :meth:`hold`."""
        self._set_hold(False)

    def held(self) -> bool:
        """Test control: a sync waits at :meth:`hold` now."""
        with self._cond:
            return self._parked

    def _set_hold(self, hold: bool) -> None:
        with self._cond:
            self._hold = hold
            self._cond.notify_all()

    def stop(self) -> None:
        """End the thread (a sync in flight finishes first) and close the files; again, nothing."""
        with self._stopping:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            with self._cond:
                self._running = False
                self._cond.notify_all()
            thread.join()
            files, self._files = self._files, []
            for fd, _, _ in files:
                os.close(fd)

    # ---- the thread ---------------------------------------------------------------------------

    def _prune(self) -> None:
        """Close the files a rebase forgot and the wholly synced ones (never the last); with the lock."""
        files = self._files
        keep = []
        for i, f in enumerate(files):
            if f[2] != self._gen or (f[1] <= self._synced and i < len(files) - 1):
                os.close(f[0])
            else:
                keep.append(f)
        self._files = keep

    def _main(self) -> None:
        cond = self._cond
        with cond:
            while self._running:
                self._prune()
                if self._target <= self._synced:
                    cond.wait()
                    continue
                target, gen = self._target, self._gen
                fds = [f[0] for f in self._files if f[1] > self._synced]
                while self._hold and self._running:
                    self._parked = True
                    cond.wait()
                self._parked = False
                if not self._running:
                    break
                cond.release()
                err = 0
                try:
                    for fd in fds:
                        os.fdatasync(fd)  # without the GIL
                except OSError as e:
                    err = e.errno or -1
                finally:
                    cond.acquire()
                if not err:
                    self._syncs += 1
                if self._gen != gen:  # rebased meanwhile: target may lie past the cut
                    continue
                tell = not err or err != self._err  # a new errno is told once: the reactor logs it
                self._err = err
                if not err and target > self._synced:
                    self._synced = target
                if tell:
                    cond.release()  # a reader behind on a blocking pipe must not stall written()
                    try:
                        _signal(self._efd)
                    finally:
                        cond.acquire()
                if err:
                    until = time.monotonic() + RETRY_SECONDS
                    while self._running and self._gen == gen:
                        left = until - time.monotonic()
                        if left <= 0:
                            break
                        cond.wait(left)


def _signal(efd: int) -> None:
    try:
        os.write(efd, _ONE)
    except BlockingIOError:
        pass  # the counter (or pipe) is full, and the reactor reads it anyway


#: the committer FlushService makes: the compiled one when the accelerator is loaded
Committer: Callable[[int, int], CommitterAPI] = PyCommitter
if accel is not None:
    Committer = accel.Committer


@implementer(IReadDescriptor)
class Wakeup:
    """The committer's signal to the reactor: an eventfd the reactor watches (a pipe where Python has
    no ``os.eventfd``); each read drains it and calls ``on_signal`` once, however many syncs ended."""

    def __init__(self, on_signal: Callable[[], object], eventfd: bool = hasattr(os, "eventfd")) -> None:
        self.on_signal = on_signal
        if eventfd:
            self.read_fd = self.write_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        else:
            self.read_fd, self.write_fd = os.pipe()  # not inherited (PEP 446)
            os.set_blocking(self.read_fd, False)
            os.set_blocking(self.write_fd, False)

    def fileno(self) -> int:
        return self.read_fd

    def doRead(self) -> None:
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass
        self.on_signal()

    def connectionLost(self, reason: object) -> None:
        pass

    def logPrefix(self) -> str:
        return "committer"

    def close(self) -> None:
        """Close the descriptors (after the committer stopped: it writes to one)."""
        fds = {self.read_fd, self.write_fd}
        self.read_fd = self.write_fd = -1
        for fd in fds - {-1}:
            os.close(fd)
