"""The store's file thread: calls run in order, on one thread, results and errors reach the futures."""

from __future__ import annotations

import threading

import pytest

from rmqtx.store.allocator import FileAllocator


def test_runs_in_order_on_one_thread():
    alloc = FileAllocator("test-alloc")
    seen: list[tuple[int, str]] = []
    futures = [alloc.submit(lambda i=i: seen.append((i, threading.current_thread().name)) or i) for i in range(2000)]
    assert [f.result(timeout=10) for f in futures] == list(range(2000))
    assert [i for i, _ in seen] == list(range(2000))
    assert {name for _, name in seen} == {"test-alloc"}
    alloc.shutdown(wait=True)
    with pytest.raises(RuntimeError):
        alloc.submit(lambda: None)


def test_errors_reach_the_future_and_the_thread_goes_on():
    alloc = FileAllocator("test-alloc")
    bad = alloc.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        bad.result(timeout=10)
    assert alloc.submit(lambda: "after").result(timeout=10) == "after"
    alloc.shutdown(wait=True)


def test_shutdown_finishes_what_was_asked():
    alloc = FileAllocator("test-alloc")
    gate = threading.Event()
    first = alloc.submit(gate.wait, 10)
    later = [alloc.submit(lambda i=i: i) for i in range(100)]
    threading.Timer(0.2, gate.set).start()
    alloc.shutdown(wait=True)  # waits for the queued calls, as ThreadPoolExecutor.shutdown(wait=True) does
    assert first.result(timeout=0) is True
    assert [f.result(timeout=0) for f in later] == list(range(100))


def test_shutdown_unused_and_cancel():
    FileAllocator("never-used").shutdown(wait=True)  # no thread was started
    alloc = FileAllocator("test-alloc")
    gate = threading.Event()
    alloc.submit(gate.wait, 10)
    queued = alloc.submit(lambda: "never")
    threading.Timer(0.2, gate.set).start()
    alloc.shutdown(wait=True, cancel_futures=True)
    assert queued.cancelled()


def test_submit_first_jumps_the_queue():
    alloc = FileAllocator("test-alloc")
    gate = threading.Event()
    order: list[str] = []
    alloc.submit(gate.wait, 10)
    waiting = [alloc.submit(order.append, f"make{i}") for i in range(3)]
    urgent = alloc.submit_first(order.append, "close")
    gate.set()
    urgent.result(timeout=10)
    for f in waiting:
        f.result(timeout=10)
    assert order == ["close", "make0", "make1", "make2"]
    alloc.shutdown(wait=True)


def test_jobs_wait_time_out_and_call_back_like_futures():
    alloc = FileAllocator("test-alloc")
    gate = threading.Event()
    slow = alloc.submit(gate.wait, 10)
    with pytest.raises(TimeoutError):
        slow.result(timeout=0.05)  # not done: the wait ends, the job goes on
    assert not slow.done() and slow.running()
    seen: list[object] = []
    called = threading.Event()
    slow.add_done_callback(lambda job: (seen.append(("before", job.result())), called.set()))
    waiters = [threading.Thread(target=lambda: seen.append(("waiter", slow.result(timeout=10)))) for _ in range(3)]
    for t in waiters:
        t.start()
    gate.set()
    for t in waiters:
        t.join(10)
    assert called.wait(10)  # the file thread may still be running it
    assert slow.done() and slow.exception() is None
    slow.add_done_callback(lambda job: seen.append(("after", job.result())))  # runs at once, here
    assert sorted(seen) == [("after", True), ("before", True)] + [("waiter", True)] * 3
    failed = alloc.submit(lambda: 1 / 0)
    assert isinstance(failed.exception(timeout=10), ZeroDivisionError)
    alloc.shutdown(wait=True)


def test_a_failing_call_nobody_waits_on_is_logged_and_the_thread_goes_on(caplog):
    alloc = FileAllocator("test-alloc")
    alloc.call_first(lambda: 1 / 0)
    assert alloc.submit(lambda: "after").result(timeout=10) == "after"
    assert "ZeroDivisionError" in caplog.text
    alloc.shutdown(wait=True)


def test_callbacks_added_while_jobs_finish_run_exactly_once():
    """The reactor adds callbacks without a lock, racing the file thread finishing the job."""
    alloc = FileAllocator("test-alloc")
    ran: list[int] = []  # list.append is atomic: callbacks may run on either thread
    jobs = [alloc.submit(int) for _ in range(20000)]
    for i, job in enumerate(jobs):
        for _ in range(2):
            job.add_done_callback(lambda _job, i=i: ran.append(i))
    for job in jobs:
        job.result(timeout=10)
    alloc.shutdown(wait=True)
    assert sorted(ran) == [i for i in range(20000) for _ in range(2)]
