"""The consume-queue filter bit map: RocketMQ's BloomFilter, BitsArray and BloomFilterData.

Each SQL92 consumer group ("group#topic") owns k bit positions in an m-bit map; a message's
map has the positions of every group whose expression matched it set, so a pull can skip
messages whose map misses a position of the puller's group.  Bit positions are computed as
in Java (Guava murmur3_128 of the UTF-8 key, double hashing in 32-bit ints), so maps written
by either broker read the same.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from rmqtx.filter.sql92 import CompiledExpression

_M64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64


def _mix_k2(k2: int) -> int:
    return (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64


def murmur3_128(data: bytes, seed: int = 0) -> tuple[int, int]:
    """MurmurHash3 x64 128-bit as (h1, h2) unsigned; Guava's asLong() is h1."""
    h1 = h2 = seed
    nblocks = len(data) // 16
    for k1, k2 in struct.iter_unpack("<QQ", data[: nblocks * 16]):
        h1 = (((_rotl(h1 ^ _mix_k1(k1), 27) + h2) & _M64) * 5 + 0x52DCE729) & _M64
        h2 = (((_rotl(h2 ^ _mix_k2(k2), 31) + h1) & _M64) * 5 + 0x38495AB5) & _M64
    tail = data[nblocks * 16:]
    if len(tail) > 8:
        h2 ^= _mix_k2(int.from_bytes(tail[8:], "little"))
    if tail:
        h1 ^= _mix_k1(int.from_bytes(tail[:8], "little"))
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    return h1, (h2 + h1) & _M64


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


@dataclass(frozen=True)
class BloomFilterData:
    """A group's bit positions and the map size they were computed for."""

    bit_pos: tuple[int, ...]
    bit_num: int


class BitsArray:
    """A little-endian-within-byte bit map: bit i is byte i // 8, mask 1 << (i % 8)."""

    __slots__ = ("bit_length", "_bytes")

    def __init__(self, bit_length: int, data: bytes | None = None) -> None:
        self.bit_length = bit_length
        self._bytes = bytearray(data) if data is not None else bytearray((bit_length + 7) // 8)

    @classmethod
    def from_bytes(cls, data: bytes) -> BitsArray:
        return cls(len(data) * 8, data)

    def _check(self, pos: int) -> None:
        if not 0 <= pos < self.bit_length:
            raise IndexError(f"bit {pos} outside 0..{self.bit_length - 1}")

    def set_bit(self, pos: int) -> None:
        self._check(pos)
        self._bytes[pos >> 3] |= 1 << (pos & 7)

    def get_bit(self, pos: int) -> bool:
        self._check(pos)
        return bool(self._bytes[pos >> 3] & (1 << (pos & 7)))

    def to_bytes(self) -> bytes:
        return bytes(self._bytes)


class BloomFilter:
    """RocketMQ's BloomFilter.createByFn(f, n): f is the error rate in percent, n the expected groups."""

    __slots__ = ("f", "n", "k", "m")

    def __init__(self, f: int, n: int) -> None:
        if not 1 <= f < 100:
            raise ValueError("f must be >= 1 and < 100")
        if n < 1:
            raise ValueError("n must be > 0")
        error_rate = f / 100.0
        self.f, self.n = f, n
        self.k = math.ceil(math.log(error_rate) / math.log(0.5))
        m = math.ceil(n * (math.log(1 / error_rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        self.m = 8 * math.ceil(m / 8.0)

    @classmethod
    def create_by_fn(cls, f: int, n: int) -> BloomFilter:
        return cls(f, n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BloomFilter) and (self.f, self.n, self.k, self.m) == (
            other.f, other.n, other.k, other.m)

    def __hash__(self) -> int:
        return hash((self.f, self.n, self.k, self.m))

    def __repr__(self) -> str:
        return f"BloomFilter(f={self.f}, n={self.n}, k={self.k}, m={self.m})"

    def calc_bit_positions(self, key: str) -> tuple[int, ...]:
        """k positions from one 64-bit murmur3 value split into two Java ints (hash1 + i*hash2)."""
        h64 = murmur3_128(key.encode("utf-8", "replace"))[0]
        hash1, hash2 = _int32(h64), _int32(h64 >> 32)
        positions = []
        for i in range(1, self.k + 1):
            combined = _int32(hash1 + i * hash2)
            if combined < 0:
                combined = ~combined
            positions.append(combined % self.m)
        return tuple(positions)

    def generate(self, key: str) -> BloomFilterData:
        return BloomFilterData(self.calc_bit_positions(key), self.m)

    def is_valid(self, data: BloomFilterData | None) -> bool:
        """Data computed by a filter of another size (changed broker config) must not be used."""
        return data is not None and data.bit_num == self.m and len(data.bit_pos) == self.k

    def hash_to(self, data: BloomFilterData, bits: BitsArray) -> None:
        if not self.is_valid(data) or bits.bit_length != self.m:
            raise ValueError(f"bloom filter data {data} does not belong to {self!r}")
        for pos in data.bit_pos:
            bits.set_bit(pos)

    def is_hit(self, data: BloomFilterData, bits: BitsArray) -> bool:
        if not self.is_valid(data) or bits.bit_length != self.m:
            raise ValueError(f"bloom filter data {data} does not belong to {self!r}")
        return all(bits.get_bit(pos) for pos in data.bit_pos)


def consumer_bloom_key(group: str, topic: str) -> str:
    """The string RocketMQ's ConsumerFilterManager hashes for a group's positions."""
    return f"{group}#{topic}"


def calc_bitmap(properties: dict[str, str],
                filters: Iterable[tuple[str, CompiledExpression, BloomFilterData]],
                bloom: BloomFilter) -> bytes | None:
    """Bit map of the groups whose expression matches the message (CommitLogDispatcherCalcBitMap).

    None means "store no map" (no filters, or bloom data of another filter size), which makes
    every reader fall back to evaluating the expression, as Java does after its dispatch error.
    """
    filters = list(filters)
    if not filters:
        return None
    bits = BitsArray(bloom.m)
    for _group_key, expr, data in filters:
        if expr.matches(properties):
            if not bloom.is_valid(data):
                return None
            bloom.hash_to(data, bits)
    return bits.to_bytes()


def is_hit(bitmap: bytes | None, data: BloomFilterData) -> bool:
    """May the message carry a match for this group?  Without a usable map the answer is yes."""
    if not bitmap or len(bitmap) * 8 != data.bit_num:
        return True
    return all(bitmap[pos >> 3] & (1 << (pos & 7)) for pos in data.bit_pos)
