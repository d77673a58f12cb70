"""Progress lines and a final summary for jobs that run long (store verify, recovery, Spark jobs)."""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO


def size_text(n: float) -> str:
    """Bytes in the largest unit that keeps the figure above 1 (1024-based, as `du -h`)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class Progress:
    """Says how far a job is at most every ``interval`` seconds, then one summary line with the time taken.

    ``say`` receives each line (default: ``job: text`` on stderr); a job calls ``tick`` often and cheaply.
    """

    def __init__(self, job: str, say: Callable[[str], None] | None = None, interval: float = 2.0,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.job = job
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self._next = self.started + interval
        self._say = say or (lambda line: print(line, file=stream or sys.stderr, flush=True))

    def tick(self, done: int, total: int, what: str = "") -> None:
        """Report ``done`` of ``total`` bytes if the interval has passed."""
        now = self.clock()
        if now < self._next:
            return
        self._next = now + self.interval
        share = f"{100 * done / total:.0f}% " if total > 0 else ""
        self._say(f"{self.job}: {share}({size_text(done)} of {size_text(total)}){' ' + what if what else ''}")

    def elapsed(self) -> float:
        return self.clock() - self.started

    def done(self, text: str) -> str:
        """The summary line (always said); returned for callers that also print it elsewhere."""
        line = f"{self.job}: {text} ({self.elapsed():.1f} s)"
        self._say(line)
        return line
