"""Bloom bit map benchmark: pull-all throughput of a selective SQL92 group (~5% match) with and without
enableCalcFilterBitMap, in process (store + ConsumerFilterManager + the pull path's evaluation).
Usage: python benchmarks/filter_bitmap.py [--quick]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqtx.common.subscription import SubscriptionData  # noqa: E402
from rmqtx.broker.config import BrokerConfig  # noqa: E402
from rmqtx.broker.filters import ConsumerFilterManager  # noqa: E402
from rmqtx.broker.processors.pull import _keep_matching  # noqa: E402
from rmqtx.filter import compile_cached  # noqa: E402
from rmqtx.store import GetStatus, MessageStore, MessageToStore, StoreConfig  # noqa: E402

TOPIC = "BenchFilter"
SELECTIVE = ("G_bench", "a > 94")  # 5 of every 100 messages
OTHERS = [("G_low", "a < 5"), ("G_eu", "region = 'eu' AND a BETWEEN 40 AND 44"), ("G_tag", "TAGS = 'TagC'")]
BODY = b"x" * 100


def make_msg(i: int) -> MessageToStore:
    props = f"a\x01{i % 100}\x02region\x01{('eu', 'us', 'ap')[i % 3]}\x02UNIQ_KEY\x01{i:032X}\x02TAGS\x01Tag{'ABC'[i % 7 % 3]}"
    return MessageToStore(topic=TOPIC, queue_id=0, flag=0, body=BODY, properties=props, sys_flag=0,
                          born_timestamp=1_700_000_000_000, born_host=("10.0.0.7", 50000), store_host=("10.0.0.1", 10911))


def fill(root: str, n: int, bitmap: bool) -> tuple[MessageStore, ConsumerFilterManager, float]:
    """A store with n messages; with bitmap, the groups are registered first and every unit carries a map."""
    cfg = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=128 * 1024 * 1024,
                      enable_consume_queue_ext=bitmap, message_index_enable=False)
    store = MessageStore(cfg)
    store.load()
    filters = ConsumerFilterManager(BrokerConfig(enableCalcFilterBitMap=bitmap), lambda group: True)
    for group, expr in [SELECTIVE, *OTHERS]:
        filters.register(group, [SubscriptionData(TOPIC, expr, sub_version=1, expression_type="SQL92")])
    if bitmap:
        store.set_bitmap_calculator(filters.calc_bitmap)
    time.sleep(0.002)  # stored after the groups' registration millisecond
    start = time.perf_counter()
    for i in range(n):
        store.put_message(make_msg(i))
    return store, filters, time.perf_counter() - start


def pull_all(store: MessageStore, filters: ConsumerFilterManager) -> tuple[int, float]:
    """What PullProcessor does for each PULL_MESSAGE of the selective group, until the queue's end."""
    group, expr = SELECTIVE
    expression = compile_cached(expr)
    offset = matched = 0
    start = time.perf_counter()
    while True:
        result = store.get_message(TOPIC, 0, offset, 32, filters.cq_filter(TOPIC, group, expr))
        if result.status is GetStatus.FOUND:
            filters.evaluations += len(result.messages)
            _keep_matching(result, expression)
            matched += len(result.messages)
        elif result.status is not GetStatus.NO_MATCHED_MESSAGE:
            break
        offset = result.next_begin_offset
    return matched, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10k messages instead of 100k")
    args = parser.parse_args()
    n = 10_000 if args.quick else 100_000
    print(f"Python {sys.version.split()[0]}, {n:,} messages, selective group {SELECTIVE[1]!r} "
          f"+ {len(OTHERS)} other SQL92 groups")
    for bitmap in (False, True):
        root = tempfile.mkdtemp(prefix="rmqtx-bitmap-bench-")
        try:
            store, filters, put_s = fill(root, n, bitmap)
            matched, pull_s = pull_all(store, filters)
            store.shutdown()
        finally:
            shutil.rmtree(root)
        label = "with bit map   " if bitmap else "without bit map"
        print(f"{label}: put {n / put_s:>9,.0f} msg/s | pull-all {n / pull_s:>10,.0f} scanned/s "
              f"{matched / pull_s:>9,.0f} matched/s | {matched:,} matched, {filters.evaluations:,} evaluated, "
              f"{filters.skipped:,} skipped by bits")


if __name__ == "__main__":
    main()
