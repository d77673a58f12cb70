"""The gRPC endpoint under load: N long-polling ReceiveMessage calls and S Telemetry streams held open
(a raw grpc.aio client with the 5.x SDK's generated classes, spread over 10 connections) while 4
producers send M messages, each send preceded by a QueryRoute and a Heartbeat (5 s deadlines). Prints
how many messages were delivered to the parked receives, the latencies, and the broker process's
threads and memory (from /proc, sampled every 0.2 s). Not a test; ``tests/grpc/test_load.py`` is.

    python benchmarks/grpc_load.py [--receivers 1000] [--streams 100] [--messages 1000]

Needs the py5 venv's generated classes ($RMQTX_PY5_VENV / $RMQTX_GRPC_STUBS, as tests/grpc).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.grpc.load import Figures, Load, percentile  # noqa: E402
from tests.grpc.py5 import PY5_VENV, grpc_standalone  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--receivers", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
    server = grpc_standalone(by_option=True).start()
    try:
        topic = "GRPC_LOAD_BENCH"
        server.create_topic(topic, 4)

        async def run() -> Figures:
            load = Load(server.grpc, topic, server.proc.pid, receivers=args.receivers, streams=args.streams,
                        messages=args.messages)
            return await load.run(drain_s=60)

        started = time.monotonic()
        figures = asyncio.run(run())
        took = time.monotonic() - started
    finally:
        clean = server.stop()
        server.close()
    print(f"grpc_load: {args.receivers} parked receives, {args.streams} Telemetry streams, {args.messages} messages "
          f"({took:.1f} s; load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores)")
    print(f"| figure | value |\n|---|---|")
    print(f"| messages sent OK / delivered to a parked receive | {len(figures.sent)} / "
          f"{len(figures.sent & figures.received)} |")
    for name in ("QueryRoute", "Heartbeat", "SendMessage", "AckMessage"):
        times = figures.latencies.get(name, [])
        print(f"| {name} p50 / p99 ms ({len(times)} calls) | {percentile(times, 0.5) * 1000:.2f} / "
              f"{percentile(times, 0.99) * 1000:.2f} |")
    print(f"| control calls failed (deadline or not OK) | {len(figures.failures)} {sorted(set(figures.failures))[:5]} |")
    print(f"| receives failed | {len(figures.receive_errors)} {sorted(set(figures.receive_errors))[:5]} |")
    print(f"| Telemetry streams answered | {figures.telemetry_settings} / {args.streams} |")
    print(f"| broker threads idle / max | {figures.threads_idle} / {figures.threads_max} |")
    print(f"| broker VmRSS / RssAnon max MiB | {figures.rss_kb_max / 1024:.0f} / {figures.rss_anon_kb_max / 1024:.0f} |")
    print(f"| broker stopped cleanly | {clean} |")


if __name__ == "__main__":
    main()
