"""Send throughput and replication lag of an rmqtx master/slave pair, per brokerRole.

    python benchmarks/ha.py [--seconds 5] [--producers 4] [--size 1024]

For each role (ASYNC_MASTER, SYNC_MASTER) it starts a NameServer, a master and a slave on loopback,
runs the producers (SEND_MESSAGE_V2 over one connection each) for the given time, then prints acked
sends per second, the mean send latency and how long the slave took to hold the master's last byte.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.ha import Cluster, Sender, wait_until  # noqa: E402


def run(role: str, seconds: float, producers: int, size: int) -> str:
    cluster = Cluster()
    try:
        master = cluster.broker("master", brokerRole=role, mappedFileSizeCommitLog=str(64 * 1024 * 1024)).start()
        slave = cluster.broker("slave", brokerRole="SLAVE", brokerId=1, mappedFileSizeCommitLog=str(64 * 1024 * 1024)).start()
        wait_until(lambda: "requests offset" in master.log(), 30, "the slave")
        latencies: list[float] = []
        codes: dict[int, int] = {}
        lock = threading.Lock()
        end = time.monotonic() + seconds

        def produce(n: int) -> None:
            sender = Sender(master.addr, group=f"P_bench_{n}")
            body = b"b" * size
            mine = []
            while time.monotonic() < end:
                t0 = time.perf_counter()
                code = sender.send("T_bench", body, n % 4).code
                mine.append(time.perf_counter() - t0)
                with lock:
                    codes[code] = codes.get(code, 0) + 1
            sender.close()
            with lock:
                latencies.extend(mine)
        threads = [threading.Thread(target=produce, args=(n,)) for n in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sent_at = time.monotonic()
        top = int(master.runtime()["commitLogMaxOffset"])
        wait_until(lambda: int(slave.runtime()["commitLogMaxOffset"]) >= top, 60, "the slave's offset", step=0.005)
        lag = time.monotonic() - sent_at
        same = slave.commit_log_bytes(top) == master.commit_log_bytes(top)
        return (f"{role:13s} {len(latencies) / seconds:9.0f} sends/s  mean {statistics.mean(latencies) * 1000:6.2f} ms  "
                f"p99 {sorted(latencies)[int(len(latencies) * 0.99)] * 1000:6.2f} ms  codes {codes}  "
                f"slave at the master's end {lag * 1000:.0f} ms after the last ack ({top} bytes, byte-equal: {same})")
    finally:
        cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    for role in ("ASYNC_MASTER", "SYNC_MASTER"):
        print(run(role, args.seconds, args.producers, args.size), flush=True)


if __name__ == "__main__":
    main()
