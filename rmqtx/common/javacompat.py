"""Java behaviours that leak into RocketMQ's bytes: String.hashCode and HashMap iteration order."""

from __future__ import annotations

import struct
from functools import lru_cache
from operator import mul
from typing import Callable, Iterable, TypeVar

from rmqtx.accel import accel

_T = TypeVar("_T")

_MASK32 = 0xFFFFFFFF


_POW31 = tuple(pow(31, i, 1 << 32) for i in range(4096))


def java_string_hash(text: str) -> int:
    """Return Java's ``String.hashCode`` (signed 32 bit) over the UTF-16 code units of ``text``."""
    if text.isascii():
        units: bytes | tuple[int, ...] = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    if len(units) <= len(_POW31):
        h = sum(map(mul, reversed(units), _POW31)) & _MASK32
    else:
        h = 0
        for unit in units:
            h = (h * 31 + unit) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


java_string_hash_py = java_string_hash
if accel is not None:
    java_string_hash = accel.java_string_hash  # noqa: F811

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


def hashset_order(items: list[_T], hash_of: Callable[[_T], int]) -> list[_T]:
    """``items`` (insertion order) as a Java ``new HashSet<>()`` holding them iterates."""
    capacity = 16
    while len(items) > capacity * 3 // 4:
        capacity <<= 1

    def bucket(pair: tuple[int, _T]) -> tuple[int, int]:
        h = hash_of(pair[1]) & _MASK32
        return ((h ^ (h >> 16)) & (capacity - 1), pair[0])

    return [item for _, item in sorted(enumerate(items), key=bucket)]


def java_bool(value: bool) -> str:
    """Java's ``String.valueOf(boolean)``."""
    return "true" if value else "false"


def ordered_like_hashmap(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Reorder (key, value) pairs the way a Java HashMap built from them would iterate."""
    pairs = dict(items)
    return [(k, pairs[k]) for k in hashmap_order(tuple(pairs))]


def java_float(value: float) -> str:
    """Java's ``String.valueOf(float)``: the shortest digits that read back as the same float."""
    f = struct.unpack(">f", struct.pack(">f", value))[0]
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "Infinity" if f > 0 else "-Infinity"
    sign = "-" if str(f).startswith("-") else ""
    f = abs(f)
    if f == 0:
        return sign + "0.0"
    for n in range(1, 10):
        text = f"{f:.{n - 1}e}"
        try:
            if struct.unpack(">f", struct.pack(">f", float(text)))[0] == f:
                break
        except OverflowError:  # rounded past the largest float
            continue
    mantissa, exp_text = text.split("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    exp = int(exp_text)
    if 1e-3 <= f < 1e7:
        if exp >= 0:
            whole = digits[: exp + 1].ljust(exp + 1, "0")
            return f"{sign}{whole}.{digits[exp + 1:] or '0'}"
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"
