"""The gRPC endpoint under load: N long-polling ReceiveMessage calls and S Telemetry streams held open
(a raw grpc.aio client with the 5.x SDK's generated classes, spread over 10 connections) while 4
producers send M messages, each send preceded by a QueryRoute and a Heartbeat (5 s deadlines). Prints
how many messages were delivered to the parked receives, the latencies, and the broker process's
threads and memory (from /proc, sampled every 0.2 s). Not a test; ``tests/grpc/test_load.py`` is.

    python benchmarks/grpc_load.py [--receivers 1000] [--streams 100] [--messages 1000]
    python benchmarks/grpc_load.py --sdk-consumers 20    # real 5.x Python SDK clients instead
    python benchmarks/grpc_load.py --against apache      # the same load on Apache 5.4.0's proxy (Local mode)

With ``--against apache`` the server is Apache RocketMQ 5.4.0's NameServer and Proxy in Local mode
(``testkit/apache5.py``, jars from Maven Central), and threads and memory are the proxy JVM's
(proxy and broker in one process, as rmqtx's standalone is one process).

With ``--sdk-consumers N``: N processes of the official Python SDK (interop/py5/driver.py), each with 3
SimpleConsumers long polling 20 s, then one SDK producer sends 200 messages; prints what was sent and
received, how often DEADLINE_EXCEEDED appears in the SDKs' output, and the broker's threads.

Needs the py5 venv's generated classes ($RMQTX_PY5_VENV / $RMQTX_GRPC_STUBS, as tests/grpc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.grpc_load import Figures, Load, percentile, proc_status  # noqa: E402
from testkit.py5 import DRIVER, PY5_VENV, REPO, grpc_standalone, py5_python  # noqa: E402


def sdk_clients(server: object, count: int) -> None:
    """``count`` SDK consumer processes parked on long polls while an SDK producer sends 200 messages."""
    endpoint, pid = server.grpc, server.proc.pid  # type: ignore[attr-defined]
    server.create_topic("GRPC_SDK_LOAD", 4)  # type: ignore[attr-defined]
    python = py5_python()

    def driver(params: dict) -> list[str]:
        return [python, str(DRIVER), json.dumps({"endpoint": endpoint, "topic": "GRPC_SDK_LOAD", **params})]

    consumers = [subprocess.Popen(driver({"op": "consume", "group": "GID_sdk_load", "expect": 10**6, "wait": 50,
                                          "members": 3, "await": 20, "invisible": 30}),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
                 for _ in range(count)]
    time.sleep(8)  # started, routes fetched, receives parked
    threads = [proc_status(pid)["Threads"]]
    started = time.monotonic()
    producer = subprocess.run(driver({"op": "send", "messages": [{"body": f"b{i}"} for i in range(200)]}),
                              capture_output=True, text=True, cwd=REPO, timeout=300)
    took = time.monotonic() - started
    threads.append(proc_status(pid)["Threads"])
    outputs = [(producer.stdout, producer.stderr)] + [c.communicate(timeout=200) for c in consumers]
    events = [json.loads(line) for out, _ in outputs for line in out.splitlines() if line.startswith("{")]
    sent = {e["body"] for e in events if e["event"] == "sent"}
    received = {e["body"] for e in events if e["event"] == "recv"}
    errors = [e["error"] for e in events if e["event"] == "error"]
    deadlines = sum(out.count("DEADLINE_EXCEEDED") + err.count("DEADLINE_EXCEEDED") for out, err in outputs)
    print(f"grpc_load --sdk-consumers {count}: {3 * count} SimpleConsumers, one producer "
          f"(load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores)")
    print("| figure | value |\n|---|---|")
    print(f"| messages sent OK (of 200) / received | {len(sent)} ({took:.1f} s) / {len(sent & received)} |")
    print(f"| DEADLINE_EXCEEDED in the SDKs' output | {deadlines} |")
    print(f"| SDK errors | {len(errors)} {sorted(set(errors))[:2]} |")
    print(f"| broker threads while parked / after the sends | {threads[0]} / {threads[1]} |")


class _ApacheServer:
    """Apache's pair in the shape main() uses: ``grpc``, ``proc.pid`` (the proxy's JVM), topics, stop."""

    def __init__(self, apache: Any) -> None:
        self.apache = apache
        self.grpc = apache.grpc
        self.proc = SimpleNamespace(pid=apache.pids()["proxy"])

    def create_topic(self, topic: str, queues: int) -> None:
        self.apache.create_topic(topic, queues)

    def stop(self) -> bool:
        return self.apache.stop()

    def close(self) -> None:
        self.apache.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--receivers", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--sdk-consumers", type=int, default=0, help="real 5.x Python SDK processes instead")
    parser.add_argument("--against", choices=("rmqtx", "apache"), default="rmqtx",
                        help="the server under load: rmqtx's standalone, or Apache 5.4.0's proxy in Local mode")
    args = parser.parse_args()
    os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
    if args.against == "apache":
        from testkit.apache5 import ApacheProxy

        server: Any = _ApacheServer(ApacheProxy().start())
    else:
        server = grpc_standalone(by_option=True).start()
    if args.sdk_consumers:
        try:
            sdk_clients(server, args.sdk_consumers)
        finally:
            server.stop()
            server.close()
        return
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
    print(f"grpc_load against {args.against}: {args.receivers} parked receives, {args.streams} Telemetry streams, {args.messages} messages "
          f"({took:.1f} s; load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores)")
    print("| figure | value |\n|---|---|")
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
