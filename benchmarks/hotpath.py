"""The broker's per-message hot path in-process, fed the frames a Java 4.9.8 client sends.

    python benchmarks/hotpath.py [--messages 20000] [--calls]

A broker service runs in this process; one connection (Twisted's in-memory transport, so the
figures are the broker's alone) receives ROCKETMQ-binary SEND_MESSAGE_V2 frames 32 to a read, as
Apache's benchmark Producer multiplexes them, then PULL_MESSAGE frames of 32 messages. Prints CPU
microseconds per sent and per pulled message and, with ``--calls``, Python calls per message (what
``tests/broker/test_call_budget.py`` bounds). Set ``RMQTX_PURE_PYTHON=1`` to measure without the
compiled accelerator.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.hotpath import QUEUES, HotPath, count_calls, feed_all, pulled, sends_ok, warm_up  # noqa: E402


def measure(messages: int, calls: bool) -> dict[str, float]:
    hot = HotPath()
    try:
        warm_up(hot)  # files made (as a running broker's allocator thread would), caches, first pulls
        out: dict[str, float] = {}
        reads = hot.send_reads(messages)
        t0 = time.process_time()
        feed_all(hot, reads)
        out["send_us"] = (time.process_time() - t0) / messages * 1e6
        ok = sends_ok(hot)
        assert ok == messages, ok
        rounds = messages // (QUEUES * 32)
        pulls = hot.pull_reads(rounds)
        t0 = time.process_time()
        feed_all(hot, pulls)
        cpu = time.process_time() - t0
        got = pulled(hot)
        out["pull_us"] = cpu / max(got, 1) * 1e6
        assert got == rounds * QUEUES * 32, got
        if calls:
            n = 1024
            reads = hot.send_reads(n)
            out["send_calls"] = count_calls(lambda: feed_all(hot, reads)) / n
            assert sends_ok(hot) == n
            hot.next_offsets = [32 + 32 * rounds] * QUEUES
            pulls = hot.pull_reads(n // (QUEUES * 32))
            out["pull_calls"] = count_calls(lambda: feed_all(hot, pulls)) / n
            assert pulled(hot) == n
        return out
    finally:
        hot.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20480)
    parser.add_argument("--calls", action="store_true", help="also count Python calls per message")
    args = parser.parse_args()
    accel = "pure Python" if os.environ.get("RMQTX_PURE_PYTHON") else "accelerated where built"
    res = measure(args.messages, args.calls)
    print(f"hot path ({accel}): send {res['send_us']:.1f} us/msg, pull {res['pull_us']:.1f} us/msg", end="")
    if args.calls:
        print(f"; calls/msg: send {res['send_calls']:.1f}, pull {res['pull_calls']:.1f}")
    else:
        print()


if __name__ == "__main__":
    main()
