"""Timer wheel benchmark: timer messages linked into the wheel per second and delivered per second, in-process.

Usage: python benchmarks/timer.py [--messages N] [--slots S]

A real store and real timer files in a temp dir; the broker's send-path redirect, then the enqueue
and dequeue steps driven directly with a settable clock (twisted.internet.task.Clock for the
reactor), so the figures are CPU per message, not waiting. Prints one line per phase.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twisted.internet import task  # noqa: E402

from rmqtx.broker.timer import TIMER_TOPIC, TimerMessageService  # noqa: E402
from rmqtx.common.message import parse_properties, properties_to_string  # noqa: E402
from rmqtx.store import MessageStore, MessageToStore, StoreConfig  # noqa: E402
from rmqtx.store.timer import TimerConfig  # noqa: E402

BODY = os.urandom(1024)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--slots", type=int, default=1000, help="distinct due slots (of 100 ms) the messages spread over")
    args = ap.parse_args()
    now = [1_800_000_000.0]
    clock = lambda: now[0]  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="rmqtx-bench-timer-") as root:
        store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=512 * 1024 * 1024), clock=clock)
        store.load()
        cfg = TimerConfig(timerPrecisionMs=100, mappedFileSizeTimerLog=8 * 1024 * 1024)
        timer = TimerMessageService(store, root, cfg, clock=clock, reactor=task.Clock())
        timer.load()
        timer._running = True  # the steps are called directly, no LoopingCalls
        n = args.messages
        t0, c0 = time.perf_counter(), time.thread_time()
        for i in range(n):
            props = parse_properties(f"UNIQ_KEY\x01AC11{i:028X}\x02TAGS\x01TagA\x02WAIT\x01true")
            props["TIMER_DELAY_MS"] = str(1000 + (i % args.slots) * 100)
            topic, queue_id, refusal = timer.redirect("BenchTimer", i % 8, props, 0)
            assert refusal is None and topic == TIMER_TOPIC
            store.append_message(MessageToStore(topic, queue_id, 0, BODY, properties_to_string(props), 0,
                                                int(now[0] * 1000), ("10.0.0.7", 50000), ("10.0.0.1", 10911)), props)
        put = time.perf_counter() - t0, time.thread_time() - c0
        t0, c0 = time.perf_counter(), time.thread_time()
        while timer.queue_offset < store.get_max_offset_in_queue(TIMER_TOPIC, 0):
            timer._enqueue()
        linked = time.perf_counter() - t0, time.thread_time() - c0
        now[0] += 1 + args.slots / 10 + 1
        t0, c0 = time.perf_counter(), time.thread_time()
        delivered = 0
        while delivered < n:
            timer._dequeue()
            delivered = sum(store.get_max_offset_in_queue("BenchTimer", q) for q in range(8))
        out = time.perf_counter() - t0, time.thread_time() - c0
        for name, (wall, cpu) in (("send-path redirect + store put", put), ("enqueue (link into the wheel)", linked),
                                  ("dequeue (put back on the topic)", out)):
            print(f"{name:34s} {n / wall:10,.0f} msgs/s  {cpu / n * 1e6:6.1f} us CPU/msg")
        timer.shutdown()
        store.shutdown()


if __name__ == "__main__":
    main()
