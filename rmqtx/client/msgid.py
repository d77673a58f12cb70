"""Client message ids (UNIQ_KEY) in Java's MessageClientIDSetter layout.

ip (4 or 16 bytes) | pid (int16) | class-loader hash (int32) | ms since month start (int32) | counter (int16),
as upper-case hex: 32 digits for an IPv4 client.
"""

from __future__ import annotations

import datetime
import itertools
import os
import random
import socket
import struct
import time


def _month_start_ms(now_ms: int, months_back: int = 0) -> int:
    """Local midnight of the first day of the month holding ``now_ms`` (minus ``months_back``)."""
    day = datetime.datetime.fromtimestamp(now_ms / 1000).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    for _ in range(months_back):
        day = (day - datetime.timedelta(days=1)).replace(day=1)
    return int(day.timestamp() * 1000)


def _ip_bytes(ip: str) -> bytes:
    try:
        return socket.inet_aton(ip)
    except OSError:
        return socket.inet_pton(socket.AF_INET6, ip)


class UniqIdGenerator:
    """Makes UNIQ_KEYs; one per process and IP, like Java's static setter."""

    def __init__(self, ip: str) -> None:
        # Python has no class loader; a random int per process plays its identity hash.
        fixed = _ip_bytes(ip) + struct.pack(">HI", os.getpid() & 0xFFFF, random.getrandbits(32))
        self.prefix = fixed.hex().upper()
        self._counter = itertools.count()
        self._start = 0
        self._next_start = 0

    def create(self) -> str:
        now = int(time.time() * 1000)
        if now >= self._next_start:
            self._start = _month_start_ms(now)
            following = datetime.datetime.fromtimestamp(self._start / 1000 + 32 * 86400).replace(day=1)
            self._next_start = int(following.timestamp() * 1000)
        diff = (now - self._start) & 0xFFFFFFFF
        return self.prefix + struct.pack(">IH", diff, next(self._counter) & 0xFFFF).hex().upper()


def nearly_time_from_id(uniq_id: str) -> int:
    """Epoch ms a UNIQ_KEY was made at (its month is the current or the previous one)."""
    raw = bytes.fromhex(uniq_id)
    span = struct.unpack_from(">I", raw, len(raw) - 6)[0]
    now = int(time.time() * 1000)
    start = _month_start_ms(now)
    if start + span >= now:
        start = _month_start_ms(now, 1)
    return start + span


_generators: dict[str, UniqIdGenerator] = {}


def create_uniq_id(ip: str) -> str:
    """A new UNIQ_KEY for a client on ``ip``."""
    gen = _generators.get(ip)
    if gen is None:
        gen = _generators[ip] = UniqIdGenerator(ip)
    return gen.create()
