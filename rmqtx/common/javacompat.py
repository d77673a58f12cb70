"""Java behaviours that leak into RocketMQ's bytes: String.hashCode and HashMap iteration order."""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

_MASK32 = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Return Java's ``String.hashCode`` (signed 32 bit) for ``text``."""
    h = 0
    if text.isascii():
        for ch in text.encode("ascii"):
            h = (31 * h + ch) & _MASK32
    else:
        units = text.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


_cached_hash = lru_cache(maxsize=4096)(java_string_hash)


def _hashmap_capacity(size: int) -> int:
    """Table size a default ``new HashMap<>()`` has after ``size`` puts (load factor 0.75)."""
    capacity = 16
    while size > capacity * 3 // 4:
        capacity <<= 1
    return capacity


@lru_cache(maxsize=1024)
def hashmap_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Order in which a Java HashMap filled with ``keys`` (in that order) iterates them.

    Entries sit in bucket ``(h ^ (h >>> 16)) & (capacity - 1)``; a bucket keeps insertion order
    and resizing preserves it, so sorting by (bucket, insertion index) reproduces Java's order.
    """
    mask = _hashmap_capacity(len(keys)) - 1

    def bucket(item: tuple[int, str]) -> tuple[int, int]:
        h = _cached_hash(item[1]) & _MASK32
        return ((h ^ (h >> 16)) & mask, item[0])

    return tuple(key for _, key in sorted(enumerate(keys), key=bucket))


def java_bool(value: bool) -> str:
    """Java's ``String.valueOf(boolean)``."""
    return "true" if value else "false"


def ordered_like_hashmap(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Reorder (key, value) pairs the way a Java HashMap built from them would iterate."""
    pairs = dict(items)
    return [(k, pairs[k]) for k in hashmap_order(tuple(pairs))]
