"""Java value semantics the RocketMQ SQL92 evaluator relies on.

Runtime values are ``None`` (Java null), ``bool`` (Boolean), ``str`` (String), ``int``
(Integer), ``JLong`` (Long) and ``float`` (Double).  Numbers only ever come from literals;
message properties are always strings, converted on demand the way
``ComparisonExpression.__compare`` does (``Integer.valueOf``, ``Long.valueOf``,
``Double.valueOf``, ``Boolean.valueOf``).
"""
from __future__ import annotations

from typing import Any

import math
import re

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


class JLong(int):
    """An int that Java would hold as a Long: strings compared with it go through Long.valueOf."""

    __slots__ = ()


class FilterEvalError(Exception):
    """Evaluation failed the way Java throws (bad number format, bad cast); the message does not match."""


# Double.valueOf grammar after String.trim(): decimal or hex float, optional [fFdD] suffix.
_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity"
    r"|(?P<dec>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?"
    r"|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?)",
    re.ASCII,
)


def _java_trim(s: str) -> str:
    """String.trim(): strips every char <= U+0020, not Python's notion of whitespace."""
    start, end = 0, len(s)
    while start < end and s[start] <= " ":
        start += 1
    while end > start and s[end - 1] <= " ":
        end -= 1
    return s[start:end]


def _parse_integral(s: str, low: int, high: int, kind: str) -> int:
    digits = s[1:] if s[:1] in ("+", "-") else s
    if not digits.isdecimal():  # Character.digit accepts any Unicode Nd digit, as isdecimal does
        raise FilterEvalError(f"For input string: {s!r} is not a {kind}")
    value = int(s)
    if not low <= value <= high:
        raise FilterEvalError(f"For input string: {s!r} is out of {kind} range")
    return value


def parse_int(s: str) -> int:
    """Integer.valueOf(String)."""
    return _parse_integral(s, INT_MIN, INT_MAX, "int")


def parse_long(s: str) -> int:
    """Long.valueOf(String)."""
    return _parse_integral(s, LONG_MIN, LONG_MAX, "long")


def parse_double(s: str) -> float:
    """Double.valueOf(String): trims, accepts NaN/Infinity, hex floats and a d/f suffix."""
    t = _java_trim(s)
    m = _DOUBLE.fullmatch(t)
    if m is None:
        raise FilterEvalError(f"For input string: {s!r} is not a double")
    if m["dec"] is not None:
        value = float(m["dec"])
    elif m["hex"] is not None:
        value = float.fromhex(m["hex"])
    else:
        value = math.nan if t.endswith("NaN") else math.inf
    return -value if t[0] == "-" else value


def parse_bool(s: str) -> bool:
    """Boolean.valueOf(String): true only for a case-insensitive "true"."""
    return s.lower() == "true"


def double_cmp(a: float, b: float) -> int:
    """Double.compareTo: NaN is above everything and equal to itself; -0.0 < 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return a_nan - b_nan
    sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
    return (sa > sb) - (sa < sb)


# How __compare converts a String compared with a value of each type.
FROM_STRING = {bool: parse_bool, int: parse_int, JLong: parse_long, float: parse_double}


def jcompare(lv: Any, rv: Any) -> int:
    """ComparisonExpression.__compare with string conversion on; both values non-null.

    Mixed types are promoted (string to the other side's type, Integer/Long to Double);
    Boolean against a number is -1, and a Boolean left of a String is Java's ClassCastException.
    """
    lt, rt = type(lv), type(rv)
    if lt is not rt:
        if lt is str:
            lv = FROM_STRING[rt](lv)
        elif rt is str:
            if lt is bool:
                raise FilterEvalError("Boolean cannot be cast to String")
            rv = FROM_STRING[lt](rv)
        elif lt is bool or rt is bool:
            return -1
        elif lt is float or rt is float:
            lv, rv = float(lv), float(rv)
    if type(lv) is float:
        return double_cmp(lv, rv)
    return (lv > rv) - (lv < rv)


def ordered_cmp(lv: object, rv: object) -> int:
    """Comparison for > >= < <=: two Strings are both read as Doubles first, else jcompare."""
    if type(lv) is str and type(rv) is str:
        return double_cmp(parse_double(lv), parse_double(rv))
    return jcompare(lv, rv)
