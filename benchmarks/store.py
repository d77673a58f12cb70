"""Store benchmark: appends/s and MB/s for 1 KB messages (async/sync flush, 1 and 64 producers),
reads/s, and recovery seconds per GiB. Usage: python benchmarks/store.py [--quick]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twisted.internet import defer, reactor, task  # noqa: E402

from rmqtx.store import MessageStore, MessageToStore, StoreConfig  # noqa: E402

BODY = os.urandom(1024)
QUEUES = 8


def make_msg(i: int) -> MessageToStore:
    return MessageToStore(topic="BenchTopic", queue_id=i % QUEUES, flag=0, body=BODY,
                          properties=f"KEYS\x01order-{i}\x02UNIQ_KEY\x01AC1100010000{i:020X}\x02TAGS\x01TagA",
                          sys_flag=0, born_timestamp=1_700_000_000_000, born_host=("10.0.0.7", 50000),
                          store_host=("10.0.0.1", 10911))


def new_store(root: str, flush: str, **kw) -> MessageStore:
    cfg = StoreConfig(store_path_root_dir=root, flush_disk_type=flush,
                      mapped_file_size_commit_log=kw.pop("cl_size", 256 * 1024 * 1024), **kw)
    store = MessageStore(cfg)
    store.load()
    store.start(reactor)
    return store


async def produce(store: MessageStore, producers: int, total: int, seconds: float) -> tuple[int, float, int, float]:
    """producers chains of put-then-put-again until total puts or the time budget; (puts, secs, bytes, cpu secs)."""
    msgs = [make_msg(i) for i in range(4096)]
    done = nbytes = 0
    issued = 0
    cpu0 = time.thread_time()
    t0 = time.perf_counter()
    deadline = t0 + seconds

    async def chain() -> None:
        nonlocal done, nbytes, issued
        while issued < total and time.perf_counter() < deadline:
            i = issued
            issued += 1
            d = store.put_message(msgs[i & 4095])
            if d.called:  # async flush: already acknowledged, no need to go through the reactor
                res = d.result
            else:
                res = await d
            done += 1
            nbytes += res.wrote_bytes
    await defer.gatherResults([defer.ensureDeferred(chain()) for _ in range(producers)])
    return done, time.perf_counter() - t0, nbytes, time.thread_time() - cpu0


async def bench_puts(tmp: str, flush: str, producers: int, total: int, seconds: float) -> None:
    root = tempfile.mkdtemp(dir=tmp)
    store = new_store(root, flush)
    try:
        syncs0 = store.flush.sync_count
        n, secs, nbytes, cpu = await produce(store, producers, total, seconds)
        syncs = store.flush.sync_count - syncs0
        extra = f", {syncs} syncs ({n / max(syncs, 1):.1f} puts/sync)" if flush == "SYNC_FLUSH" else ""
        # reactor-thread CPU per put: steadier than wall time on a shared machine
        print(f"put  {flush:<11} producers={producers:<3} {n:>7} msgs in {secs:6.2f}s: "
              f"{n / secs:>9,.0f} appends/s {nbytes / secs / 1e6:7.1f} MB/s, {cpu / n * 1e6:5.2f} us CPU/put{extra}")
    finally:
        store.shutdown()
        shutil.rmtree(root)


async def bench_reads_and_recovery(tmp: str, target_bytes: int) -> None:
    root = tempfile.mkdtemp(dir=tmp)
    store = new_store(root, "ASYNC_FLUSH", cl_size=64 * 1024 * 1024)
    n = 0
    msgs = [make_msg(i) for i in range(4096)]
    while store.max_phy_offset < target_bytes:
        store.put_message(msgs[n & 4095])
        n += 1
    written = store.max_phy_offset
    t0 = time.perf_counter()
    got = 0
    for q in range(QUEUES):
        off = 0
        while True:
            r = store.get_message("BenchTopic", q, off, 32)
            if not r.messages:
                break
            got += len(r.messages)
            off = r.next_begin_offset
    secs = time.perf_counter() - t0
    print(f"read get_message(32)            {got:>7} msgs in {secs:6.2f}s: {got / secs:>9,.0f} reads/s "
          f"{written / secs / 1e6:7.1f} MB/s")
    store.shutdown()
    gib = written / 2**30
    t0 = time.perf_counter()
    s = MessageStore(store.config)
    s.load()
    clean = time.perf_counter() - t0
    s.shutdown()
    # abnormal: abort file present and a zero checkpoint force a full scan with CRC and re-dispatch
    open(os.path.join(root, "abort"), "wb").close()
    with open(os.path.join(root, "checkpoint"), "r+b") as f:
        f.write(bytes(24))
    t0 = time.perf_counter()
    s = MessageStore(store.config)
    s.load()
    crash = time.perf_counter() - t0
    s.shutdown()
    print(f"recovery over {written / 2**20:.0f} MiB ({n} msgs): clean {clean:.2f}s, after crash (full scan) "
          f"{crash:.2f}s = {crash / gib:.1f} s/GiB")
    shutil.rmtree(root)


async def main(quick: bool) -> None:
    tmp = tempfile.mkdtemp(prefix="rmqtx-bench-")
    scale = 0.25 if quick else 1.0
    try:
        await bench_puts(tmp, "ASYNC_FLUSH", 1, int(200_000 * scale), 15)
        await bench_puts(tmp, "ASYNC_FLUSH", 64, int(200_000 * scale), 15)
        await bench_puts(tmp, "SYNC_FLUSH", 1, int(5_000 * scale), 8)
        await bench_puts(tmp, "SYNC_FLUSH", 64, int(100_000 * scale), 10)
        await bench_reads_and_recovery(tmp, int(256 * 2**20 * scale))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a quarter of the work")
    args = ap.parse_args()
    task.react(lambda _r: defer.ensureDeferred(main(args.quick)))
