"""The group commit thread's two twins (rmqtx._accel.Committer in C, PyCommitter in Python) on real
files, real threads and a real reactor: every test runs against both."""
from __future__ import annotations

import errno
import gc
import os
import select
import tempfile
import threading
import time
import unittest as pyunit

from twisted.internet import defer, reactor
from twisted.trial import unittest

from rmqtx.store.committer import PyCommitter, Wakeup

try:
    from rmqtx import _accel  # the compiled twin, whether or not RMQTX_PURE_PYTHON turned it off
except ImportError:
    _accel = None

NAME = "rmqtx-committer"


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.002)


def committer_threads() -> int:
    """Committer threads alive: the C one by its OS name, the Python one by its thread name."""
    named = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                named += f.read().strip() == NAME
        except FileNotFoundError:
            pass  # ended meanwhile
    return named + sum(t.name == NAME and t.is_alive() for t in threading.enumerate())


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def drain(efd: int) -> int:
    """The eventfd's count (signals since the last drain), 0 when none."""
    try:
        return os.eventfd_read(efd)
    except BlockingIOError:
        return 0


def told(efd: int, timeout: float = 10.0) -> int:
    """The eventfd's count once it has one: the thread publishes a result before it signals it."""
    select.select([efd], [], [], timeout)
    return drain(efd)


class _Twin:
    """The committer's contract; ``make`` is the twin under test."""

    make: object = None

    def setUp(self) -> None:
        self.efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.addCleanup(os.close, self.efd)
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-committer-")
        self.addCleanup(self.tmp.cleanup)

    def committer(self, synced: int = 0):
        c = self.make(self.efd, synced)
        self.addCleanup(c.stop)  # before the eventfd closes (cleanups run last first)
        return c

    def data_file(self, name: str = "f", size: int = 4096) -> int:
        fd = os.open(os.path.join(self.tmp.name, name), os.O_RDWR | os.O_CREAT, 0o644)
        self.addCleanup(os.close, fd)
        os.pwrite(fd, b"x" * size, 0)
        return fd

    def test_synced_follows_written_and_signals(self) -> None:
        c = self.committer(10)
        self.assertEqual(c.synced(), (10, 0, 0))
        c.add_file(self.data_file(), 4096)
        c.written(100)
        wait_for(lambda: c.synced()[0] == 100)
        self.assertEqual(c.synced(), (100, 1, 0))
        self.assertGreaterEqual(told(self.efd), 1)
        c.written(50)  # below the target: nothing to do
        c.written(100)
        time.sleep(0.05)
        self.assertEqual(c.synced(), (100, 1, 0))
        self.assertEqual(drain(self.efd), 0)
        c.written(4000)
        wait_for(lambda: c.synced()[0] == 4000)
        self.assertEqual(c.synced()[1:], (2, 0))

    def test_many_written_share_few_syncs(self) -> None:
        c = self.committer()
        c.add_file(self.data_file(), 1 << 20)
        c.hold()
        c.written(1)
        wait_for(c.held)  # the first sync has started, for offset 1, and waits at the disk
        for offset in range(2, 1001):
            c.written(offset)
        c.release()
        wait_for(lambda: c.synced()[0] == 1000)
        self.assertEqual(c.synced(), (1000, 2, 0))  # one for offset 1, one for all the rest

    def test_failing_sync_keeps_the_offset_and_reports_once(self) -> None:
        """A pipe's descriptor fails fdatasync with EINVAL, as a failing disk fails it with EIO."""
        c = self.committer(100)
        c.add_file(self.data_file(), 4096)
        r, w = os.pipe()
        self.addCleanup(os.close, w)
        self.addCleanup(os.close, r)
        c.add_file(r, 8192)
        c.written(500)
        wait_for(lambda: c.synced()[2] == errno.EINVAL)
        self.assertEqual(c.synced(), (100, 0, errno.EINVAL))
        self.assertEqual(told(self.efd), 1)
        time.sleep(0.35)  # about three retries, each failing again with the same errno: not signalled
        self.assertEqual(c.synced(), (100, 0, errno.EINVAL))
        self.assertEqual(drain(self.efd), 0)
        c.rebase(100)  # forgets both files; the good one comes back
        c.add_file(self.data_file("g"), 4096)
        c.written(500)
        wait_for(lambda: c.synced()[0] == 500)
        self.assertEqual(c.synced(), (500, 1, 0))

    def test_rebase_drops_a_sync_in_flight(self) -> None:
        c = self.committer()
        fd = self.data_file()
        c.add_file(fd, 4096)
        c.written(100)
        wait_for(lambda: c.synced()[0] == 100)
        c.hold()
        c.written(500)
        wait_for(c.held)  # a sync to 500 is in flight
        c.rebase(200)  # the log was cut at 200: 500 must never be reported
        self.assertEqual(c.synced(), (100, 1, 0))
        c.release()
        wait_for(lambda: c.synced()[1] == 2)  # the stale sync ended (the disk did it: counted)
        time.sleep(0.05)
        self.assertEqual(c.synced(), (100, 2, 0))
        c.rebase(50)  # below what is synced: synced comes down
        self.assertEqual(c.synced()[0], 50)
        c.written(300)  # its file was forgotten: no sync may claim it before it is handed again
        c.add_file(fd, 4096)
        c.written(300)
        wait_for(lambda: c.synced()[0] == 300)

    def test_synced_files_are_closed_but_the_last(self) -> None:
        c = self.committer()
        fds = [self.data_file(str(i)) for i in range(3)]
        before = open_fds()
        for i, fd in enumerate(fds):
            c.add_file(fd, (i + 1) * 100)
        self.assertEqual(open_fds(), before + 3)  # duplicates: the store may close its own
        c.written(300)
        wait_for(lambda: c.synced()[0] == 300)
        wait_for(lambda: open_fds() == before + 1)
        c.stop()
        self.assertEqual(open_fds(), before)

    def test_stop_is_idempotent_and_leaves_no_thread(self) -> None:
        before, fds = committer_threads(), open_fds()
        c = self.make(self.efd, 0)
        self.assertEqual(committer_threads(), before + 1)
        c.add_file(self.data_file(), 4096)
        c.hold()
        c.written(10)
        wait_for(c.held)  # stop does not wait for a held sync
        c.stop()
        self.assertEqual(committer_threads(), before)
        self.assertEqual(open_fds(), fds + 1)  # the data file's own descriptor is the test's
        c.stop()
        c.written(20)
        c.rebase(0)
        self.assertEqual(c.synced()[0], 0)
        with self.assertRaises(ValueError):
            c.add_file(self.efd, 1)

    def test_stop_from_two_threads_at_once(self) -> None:
        before = committer_threads()
        c = self.make(self.efd, 0)
        c.add_file(self.data_file(), 4096)
        stopper = threading.Thread(target=c.stop)
        stopper.start()
        c.stop()
        stopper.join()
        wait_for(lambda: committer_threads() == before)
        c.stop()

    def test_bad_arguments(self) -> None:
        with self.assertRaises(ValueError):
            self.make(-1, 0)
        c = self.committer()
        with self.assertRaises(OSError):
            c.add_file(-1, 10)

    @defer.inlineCallbacks
    def test_reactor_hears_each_sync(self):
        """Through a Wakeup on the reactor, as FlushService uses it: eventfd and pipe alike."""
        for eventfd in (True, False):
            heard: list[tuple[int, int, int]] = []
            done: defer.Deferred = defer.Deferred()

            def on_signal() -> None:
                heard.append(c.synced())
                if heard[-1][0] == 300 and not done.called:
                    done.callback(None)
            wakeup = Wakeup(on_signal, eventfd=eventfd)
            c = self.make(wakeup.write_fd, 0)
            reactor.addReader(wakeup)
            try:
                c.add_file(self.data_file(f"r{eventfd}"), 4096)
                c.written(300)
                yield done
            finally:
                reactor.removeReader(wakeup)
                c.stop()
                wakeup.close()
            self.assertEqual(heard[-1], (300, 1, 0))
            self.assertEqual(wakeup.fileno(), -1)


@pyunit.skipIf(_accel is None, "rmqtx._accel not built (tests/remoting/test_accel.py says whether it should be)")
class CCommitterTest(_Twin, unittest.TestCase):
    make = getattr(_accel, "Committer", None)

    def test_dropped_without_stop_ends_its_thread(self) -> None:
        """The C thread holds no reference: freeing the object stops and joins it."""
        before = committer_threads()
        c = self.make(self.efd, 0)
        c.add_file(self.efd, 1)
        self.assertEqual(committer_threads(), before + 1)
        del c
        gc.collect()
        self.assertEqual(committer_threads(), before)


class PyCommitterTest(_Twin, unittest.TestCase):
    make = PyCommitter
