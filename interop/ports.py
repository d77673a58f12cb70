"""Free loopback ports for the standalones that tests and the matrix start."""

from __future__ import annotations

import socket
import threading

#: A broker binds listenPort - 2 (the fast port) up to listenPort + 1 (HA), so two brokers' ports
#: must be more than 3 apart for neither to bind one of the other's.
NEIGHBOURS = 3
_given: set[int] = set()
_lock = threading.Lock()


def free_port() -> int:
    """A port free now and not within NEIGHBOURS of one this process handed out before.

    The kernel may return a port it just released again, so two picks in a row (a broker's and its
    gRPC endpoint's) could be the same port, or one could land on the other's fast or HA port.
    """
    with _lock:
        for _ in range(500):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            if all(abs(port - given) > NEIGHBOURS for given in _given):
                _given.add(port)
                return port
    raise RuntimeError("no free loopback port apart from the ones already handed out")
