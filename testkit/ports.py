"""Free ports for the servers that tests, benchmarks and the interop matrix start: one picker for all.

A broker binds listenPort - 2 (the fast port) up to listenPort + 1 (HA), rmqtx's and Java's alike, so
every port handed out in this process is more than ``NEIGHBOURS`` from every other one handed out:
neither of two brokers then binds one of the other's ports.
"""

from __future__ import annotations

import os
import random
import socket
import threading

#: Ports handed out in this process lie more than this far apart (fast port -2 .. HA port +1).
NEIGHBOURS = 3
_given: set[int] = set()
_lock = threading.Lock()
#: Picks come from below the kernel's ephemeral range when it leaves room: a port from the range itself
#: can be taken, in the seconds before a JVM binds it, as the local end of some outgoing connection.
_LOWEST = 10000


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _share(low: int) -> tuple[int, int]:
    """The part of ``[_LOWEST, low)`` this process picks from: all of it, or under pytest-xdist this worker's
    slice, since workers are separate processes that cannot see each other's record of ports handed out."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 1):
        return _LOWEST, low
    index, span = int(worker[2:]) % int(count), (low - _LOWEST) // int(count)
    return _LOWEST + index * span, _LOWEST + (index + 1) * span


def _candidate(host: str) -> int:
    """A port bindable on ``host`` now: a random one below the ephemeral range, else one the kernel picks."""
    first, end = _share(_ephemeral_low())
    if end - first >= 4096:
        for _ in range(50):
            port = random.randrange(first + NEIGHBOURS, end - NEIGHBOURS)
            if port_free(port, host):
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_free(port: int, host: str = "0.0.0.0") -> bool:
    """Whether ``port`` can be bound on ``host`` now (all interfaces by default, as Java's broker binds)."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
            return True
        except OSError:
            return False


def free_port(taken: set[int] | None = None, gap_below: int = 0, host: str = "127.0.0.1") -> int:
    """A port free now on ``host`` and more than NEIGHBOURS from every port this process handed out before.

    Free now is not free later: two picks in a row (a broker's and its gRPC endpoint's) could be the same
    port, or one could land on the other's fast or HA port, hence the record of ports handed out.

    ``taken``: ports the caller keeps apart itself; the pick is not one of them, and is added to it.
    ``gap_below``: the server also binds port - gap_below (Java's broker: its fast port, listenPort - 2),
    so that port must be above 1024, free on ``host`` and not taken either; it is added to ``taken`` too.
    ``host``: where the server listens; "0.0.0.0" for one that binds all interfaces (Java's 4.9.8 broker).
    """
    taken = set() if taken is None else taken
    with _lock:
        for _ in range(500):
            port = _candidate(host)
            pair = {port, port - gap_below}
            if any(abs(port - given) <= NEIGHBOURS for given in _given) or pair & taken:
                continue
            if gap_below and (port - gap_below <= 1024 or not port_free(port - gap_below, host)):
                continue
            _given.add(port)
            taken |= pair
            return port
    raise RuntimeError("no free port apart from the ones already handed out")
