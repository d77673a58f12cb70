"""SQL92 filter benchmark: evaluations/s of a few selectors over 100k message property dicts,
and bit-map calculations/s for 32 subscribed groups. Usage: python benchmarks/filter.py [--quick]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqtx.filter import BloomFilter, calc_bitmap, compile_expression, consumer_bloom_key  # noqa: E402

EXPRESSIONS = [
    "region = 'eu'",
    "TAGS IN ('TagA', 'TagB') AND region = 'eu'",
    "amount BETWEEN 100 AND 500",
    "amount > 250.5 OR (region <> 'us' AND NOT (TAGS = 'TagC'))",
    "orderId STARTSWITH 'ord-1' AND shop IS NOT NULL",
    "amount > retries",
]


def make_props(n: int, rng: random.Random) -> list[dict[str, str]]:
    """Messages like a shop's: a tag, a region, a numeric amount, sometimes optional keys."""
    props = []
    for i in range(n):
        p = {"TAGS": rng.choice(["TagA", "TagB", "TagC"]), "region": rng.choice(["eu", "us", "ap"]),
             "amount": str(rng.randint(0, 1000)), "orderId": f"ord-{i}", "retries": str(rng.randint(0, 5))}
        if i % 3:
            p["shop"] = f"shop-{i % 17}"
        props.append(p)
    return props


def bench_expressions(props: list[dict[str, str]]) -> None:
    for text in EXPRESSIONS:
        compiled = compile_expression(text)
        matches = compiled.matches
        start = time.perf_counter()
        hits = sum(1 for p in props if matches(p))
        elapsed = time.perf_counter() - start
        print(f"{len(props) / elapsed:>12,.0f} evals/s  {hits / len(props):6.1%} match  {text}")


def bench_bitmap(props: list[dict[str, str]], groups: int) -> None:
    bloom = BloomFilter.create_by_fn(20, 32)
    filters = [(f"GID_{i}", compile_expression(EXPRESSIONS[i % len(EXPRESSIONS)]),
                bloom.generate(consumer_bloom_key(f"GID_{i}", "TopicBench"))) for i in range(groups)]
    start = time.perf_counter()
    for p in props:
        calc_bitmap(p, filters, bloom)
    elapsed = time.perf_counter() - start
    print(f"{len(props) / elapsed:>12,.0f} bit maps/s  ({groups} groups, m={bloom.m}, k={bloom.k})")


def bench_compile() -> None:
    text = EXPRESSIONS[3]
    rounds = 2000
    start = time.perf_counter()
    for _ in range(rounds):
        compile_expression(text)
    print(f"{rounds / (time.perf_counter() - start):>12,.0f} compiles/s  {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10k messages instead of 100k")
    args = parser.parse_args()
    props = make_props(10_000 if args.quick else 100_000, random.Random(1))
    print(f"Python {sys.version.split()[0]}, {len(props):,} property dicts")
    bench_expressions(props)
    bench_bitmap(props[:20_000], 32)
    bench_compile()


if __name__ == "__main__":
    main()
