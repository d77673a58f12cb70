"""A bound on the consume-queue files a store keeps mapped: each mapping holds a descriptor (Python's
mmap keeps a duplicate) and a kernel map area, and a broker of 100,000 queues would exceed both
the descriptor limit and vm.max_map_count. Queues are mapped on use and unmapped by a CLOCK sweep
(LRU's cheap twin: a use is one flag set on the hot path, no list moved)."""
from __future__ import annotations

import mmap
from collections import OrderedDict
from typing import Callable, Protocol


class Mappable(Protocol):
    """What the bound needs of a consume queue."""

    used: bool
    charged: int

    def unmap(self, dispose: Callable[[mmap.mmap], object] | None = None) -> bool: ...


class MappedQueues:
    """Consume queues whose files are mapped, oldest first; at most ``limit`` files between sweeps.

    A queue over the limit is unmapped unless it was used since the ring last passed it (then it
    gets a second chance); :meth:`sweep`, run every few minutes, unmaps queues unused since the
    last sweep. Reactor thread only.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.files = 0
        self._ring: OrderedDict[Mappable, None] = OrderedDict()
        #: closes the mappings of unmapped queues (a running store: in its file thread); None: at once
        self.dispose: Callable[[mmap.mmap], object] | None = None

    def __len__(self) -> int:
        return len(self._ring)

    def add(self, cq: Mappable, files: int) -> None:
        """cq has just mapped ``files`` files (a new queue: its first one is being made)."""
        if cq in self._ring:
            self.grew(cq, files)
            return
        cq.charged = files
        self.files += files
        self._ring[cq] = None
        if self.files > self.limit:
            self._evict()

    def grew(self, cq: Mappable, files: int = 1) -> None:
        """A mapped queue gained (or with a negative count lost) files."""
        if cq in self._ring:
            cq.charged += files
            self.files += files
            if self.files > self.limit:
                self._evict()

    def forget(self, cq: Mappable) -> None:
        """cq is closed or deleted."""
        if self._ring.pop(cq, 0) is None:
            self.files -= cq.charged
        cq.charged = 0

    def _evict(self) -> None:
        ring = self._ring
        chances = len(ring)
        while self.files > self.limit and ring:
            cq, _ = ring.popitem(last=False)
            if cq.used and chances > 0:
                cq.used = False
                ring[cq] = None
                chances -= 1
                continue
            if not cq.unmap(self.dispose):  # cannot be unmapped now (ext files, for one)
                ring[cq] = None
                chances -= 1
                if chances <= 0:
                    return
                continue
            self.files -= cq.charged
            cq.charged = 0

    def sweep(self) -> int:
        """Unmap queues unused since the last sweep; how many were."""
        idle = 0
        for cq in list(self._ring):
            if cq.used:
                cq.used = False
            elif cq.unmap(self.dispose):
                del self._ring[cq]
                self.files -= cq.charged
                cq.charged = 0
                idle += 1
        return idle
