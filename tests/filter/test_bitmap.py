"""Bloom filter bit map: Java-identical hashing, no false negatives, the configured false-positive rate."""
from __future__ import annotations

import random
import unittest

from rmqtx.filter import (BitsArray, BloomFilter, BloomFilterData, calc_bitmap, compile_expression,
                          consumer_bloom_key, is_hit)
from rmqtx.filter.bitmap import murmur3_128


def random_key(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(10, 40)))


class Murmur3Test(unittest.TestCase):
    def test_guava_known_values(self):
        # (seed, h1, h2, input) from Guava's Murmur3Hash128Test.
        for seed, h1, h2, text in [
            (0, 0x629942693E10F867, 0x92DB0B82BAEB5347, "hell"),
            (1, 0xA78DDFF5ADAE8D10, 0x128900EF20900135, "hello"),
            (2, 0x8A486B23F422E826, 0xF962A2C58947765F, "hello "),
            (3, 0x2EA59F466F6BED8C, 0xC610990ACC428A17, "hello w"),
            (4, 0x79F6305A386C572C, 0x46305AED3483B94E, "hello wo"),
            (5, 0xC2219D213EC1F1B5, 0xA1D8E2E0A52785BD, "hello wor"),
            (0, 0xE34BBC7BBC071B6C, 0x7A433CA9C49A9347, "The quick brown fox jumps over the lazy dog"),
            (0, 0x658CA970FF85269A, 0x43FEE3EAA68E5C3E, "The quick brown fox jumps over the lazy cog"),
        ]:
            self.assertEqual(murmur3_128(text.encode(), seed), (h1, h2), text)


class BloomFilterTest(unittest.TestCase):
    def test_sizes_follow_create_by_fn(self):
        # Broker defaults maxErrorRateOfBloomFilter=20, expectConsumerNumUseFilter=32.
        bloom = BloomFilter.create_by_fn(20, 32)
        self.assertEqual((bloom.k, bloom.m), (3, 112))
        self.assertEqual((BloomFilter(1, 300).k, BloomFilter(1, 300).m), (7, 2880))
        self.assertEqual(BloomFilter(10, 20), BloomFilter(10, 20))
        self.assertNotEqual(BloomFilter(10, 20), BloomFilter(12, 20))
        for f, n in [(0, 10), (100, 10), (10, 0)]:
            with self.assertRaises(ValueError):
                BloomFilter(f, n)

    def test_positions_are_stable_and_in_range(self):
        bloom = BloomFilter(10, 20)
        data = bloom.generate("CID_abc_efg")
        self.assertEqual(data, bloom.generate("CID_abc_efg"))
        self.assertEqual(len(data.bit_pos), bloom.k)
        self.assertTrue(all(0 <= p < bloom.m for p in data.bit_pos))
        self.assertTrue(bloom.is_valid(data))
        self.assertFalse(BloomFilter(1, 300).is_valid(data))

    def test_hash_to_then_hit(self):
        bloom = BloomFilter(10, 20)
        bits = BitsArray(bloom.m)
        first, second = bloom.generate("CID_abc_efg"), bloom.generate("CID_abc_123")
        bloom.hash_to(first, bits)
        self.assertTrue(bloom.is_hit(first, bits))
        self.assertFalse(bloom.is_hit(second, bits))
        bloom.hash_to(second, bits)
        self.assertTrue(bloom.is_hit(second, bits))
        self.assertTrue(BitsArray.from_bytes(bits.to_bytes()).get_bit(first.bit_pos[0]))

    def test_false_positive_rate_near_configured(self):
        rng = random.Random(7)
        for f, n in [(20, 32), (10, 64), (1, 300)]:
            bloom = BloomFilter(f, n)
            bits = BitsArray(bloom.m)
            for _ in range(n):
                bloom.hash_to(bloom.generate(random_key(rng)), bits)
            trials = 10_000
            false_hits = sum(bloom.is_hit(bloom.generate(random_key(rng)), bits) for _ in range(trials))
            rate = false_hits / trials
            with self.subTest(f=f, n=n, rate=rate):
                self.assertLess(rate, f / 100 * 1.5)
                self.assertGreater(rate, f / 100 / 4)


class CalcBitmapTest(unittest.TestCase):
    def test_bitmap_says_yes_for_every_matching_group(self):
        rng = random.Random(11)
        bloom = BloomFilter(20, 32)
        regions = ["eu", "us", "ap", "sa"]
        groups = []
        for i in range(32):
            region = regions[i % len(regions)]
            text = f"region = '{region}' AND amount > {i * 3}"
            data = bloom.generate(consumer_bloom_key(f"GID_{i}", "TopicOrders"))
            groups.append((f"GID_{i}", compile_expression(text), data))
        misses = non_matching = 0
        for _ in range(2000):
            props = {"region": rng.choice(regions), "amount": str(rng.randint(0, 120))}
            bitmap = calc_bitmap(props, groups, bloom)
            self.assertEqual(len(bitmap) * 8, bloom.m)
            for _key, expr, data in groups:
                if expr.matches(props):
                    self.assertTrue(is_hit(bitmap, data), (props, expr))
                else:
                    non_matching += 1
                    misses += not is_hit(bitmap, data)
        self.assertGreater(misses / non_matching, 0.5)

    def test_no_map_means_hit(self):
        bloom = BloomFilter(20, 32)
        data = bloom.generate("g#t")
        self.assertIsNone(calc_bitmap({"a": "1"}, [], bloom))
        self.assertTrue(is_hit(None, data))
        self.assertTrue(is_hit(b"\x00" * 3, data))  # map of another size
        self.assertFalse(is_hit(bytes(bloom.m // 8), data))
        stale = BloomFilterData(data.bit_pos, 64)
        self.assertIsNone(calc_bitmap({"a": "1"}, [("g", compile_expression("a = '1'"), stale)], bloom))


if __name__ == "__main__":
    unittest.main()
