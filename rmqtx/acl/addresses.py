"""Remote address patterns of plain_acl.yml: ``*``, one address, ``a,b``, ``1.2.3.{4,5}``, ranges ``1.2.3.*`` / ``1.2.3.1-9``."""

from __future__ import annotations

import ipaddress
from typing import Callable

Matcher = Callable[[str], bool]
_ANY = ("*", "*.*.*.*", "*:*:*:*:*:*:*:*")


class AddressPatternError(ValueError):
    """A white address pattern Java refuses."""


def _canonical(addr: str) -> str | None:
    try:
        return str(ipaddress.ip_address(addr.strip()))
    except ValueError:
        return None


def _exact_set(addrs: list[str], pattern: str) -> Matcher:
    wanted = set()
    for addr in addrs:
        canon = _canonical(addr)
        if canon is None:
            raise AddressPatternError(f"Netaddress examine Exception netaddress is {addr}")
        wanted.add(canon)
    return lambda host: _canonical(host) in wanted


def _octet_range(part: str, pattern: str, hexa: bool) -> tuple[int, int]:
    top = 0xFFFF if hexa else 255
    base = 16 if hexa else 10
    part = part.strip()
    if part == "*":
        return 0, top
    try:
        if "-" in part:
            lo_text, hi_text = part.split("-", 1)
            lo, hi = int(lo_text, base), int(hi_text, base)
        else:
            lo = hi = int(part, base)
    except ValueError:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}") from None
    if not (0 <= lo <= hi <= top):
        raise AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {lo} , end is {hi}")
    return lo, hi


def _range(pattern: str) -> Matcher:
    """IPv4 ``a.b.c.*`` / ``a.b.c.1-20`` (and the IPv6 analogue): every part within its range."""
    hexa = ":" in pattern
    parts = pattern.split(":" if hexa else ".")
    size = 8 if hexa else 4
    if hexa and "::" in pattern:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")
    if len(parts) != size:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")
    ranges = [_octet_range(p, pattern, hexa) for p in parts]

    def match(host: str) -> bool:
        try:
            ip = ipaddress.ip_address(host.strip())
        except ValueError:
            return False
        if hexa != (ip.version == 6):
            return False
        values = list(ip.packed) if not hexa else [int.from_bytes(ip.packed[i : i + 2], "big") for i in range(0, 16, 2)]
        return all(lo <= v <= hi for v, (lo, hi) in zip(values, ranges))

    return match


def address_matcher(pattern: str | None) -> Matcher:
    """A matcher for one white address pattern; a blank one matches nothing."""
    if pattern is None or not pattern.strip():
        return lambda host: False
    pattern = pattern.strip()
    if pattern in _ANY:
        return lambda host: True
    if pattern.endswith("}"):
        head, brace, inner = pattern.rpartition("{")
        if not brace or not (head.endswith(".") or head.endswith(":")):
            raise AddressPatternError("MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress")
        return _exact_set([head + item.strip() for item in inner[:-1].split(",")], pattern)
    if "," in pattern:
        return _exact_set([p for p in pattern.split(",") if p.strip()], pattern)
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    return _exact_set([pattern], pattern)
