"""One build at a time: the caches tests build once (Maven classpaths, javac output, Apache's jars) and Maven's
local repository are shared by every process of a run, and the pytest env's workers (pytest-xdist) are
separate processes.

``@one_build_at_a_time`` holds an exclusive lock on ``~/.cache/rmqtx-locks/build.lock`` around the call, so
a second process waits while the first builds and then finds the cache made (each builder checks its cache
first). The kernel drops an flock when its holder dies: a killed build leaves no stale lock.
"""

from __future__ import annotations

import fcntl
import functools
import os
import threading
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")
_held = threading.local()  # whether this thread holds the lock: a builder calling another runs straight through


def lock_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmqtx-locks" / "build.lock"


def one_build_at_a_time(fn: Callable[..., T]) -> Callable[..., T]:
    """Decorate a build-once function: across processes and threads, one such call runs at a time."""
    @functools.wraps(fn)
    def locked(*args: object, **kwargs: object) -> T:
        if getattr(_held, "depth", 0):
            return fn(*args, **kwargs)
        path = lock_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, or its process dies
            _held.depth = 1
            try:
                return fn(*args, **kwargs)
            finally:
                _held.depth = 0
    return locked
