"""Controller mode's consumer visibility (Apache 5.x's reput bounded by the confirm offset, ``readUnCommitted=false``).

A record reaches consume queues and index only once the commit log's confirm offset covers it: on a master the
least offset its sync-state set acked (everything when it waits for no one), on a slave what its master last
sent, capped by what it has. A consumer so never reads a message a failover may still drop. Queue offsets are
still taken at write time; only the dispatch waits.

The master's own puts wait here as the dispatch requests the write built (no re-read); bytes written by
replication (a slave's, or a new master's backlog from its slave days) are decoded from the log by the replica
appender, which this gate drives.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Protocol

from .dispatch_request import DispatchRequest

log = logging.getLogger(__name__)


class ReplicaReader(Protocol):
    """What the gate needs of ``replica.ReplicaAppender``: its mark, and dispatch up to a limit."""

    dispatched: int

    def dispatch(self, limit: int | None = None) -> None: ...


class ConfirmGate:
    """Holds records back from dispatch until ``confirm()`` passes their end."""

    def __init__(self, store: Any, confirm: Callable[[], int]) -> None:
        self.store = store  # the MessageStore that owns this gate (not imported: it imports this module)
        self.confirm = confirm
        #: the master's puts not yet visible: (end offset, request, has a consume queue)
        self.held: deque[tuple[int, DispatchRequest, bool]] = deque()
        #: replicated bytes still to dispatch (decoded from the log), before any held put
        self.reader: "ReplicaReader | None" = None
        #: where the reader's part ends (None: it has no end, the slave's appender)
        self.reader_end: int | None = None
        #: records recovery left undispatched start here (after a crash: the confirm offset last persisted)
        self.backlog_from: int | None = None

    def hold(self, req: DispatchRequest, queued: bool) -> None:
        self.held.append((req[2] + req[3], req, queued))

    def mark(self) -> int:
        """Where dispatch stands: everything before it is visible."""
        if self.reader is not None:
            return min(self.reader.dispatched, self.store.max_phy_offset)
        if self.held:
            return self.held[0][1][2]
        if self.backlog_from is not None:
            return min(self.backlog_from, self.store.max_phy_offset)
        return self.store.max_phy_offset

    def attach_slave_reader(self, reader: ReplicaReader) -> int:
        """A slave's appender takes over from the mark (the master's held puts are its to decode now)."""
        start = self.mark()
        self.held.clear()
        self.backlog_from = None
        self.reader, self.reader_end = reader, None
        return start

    def to_master(self, new_reader: Callable[[], object]) -> None:
        """The slave's appender finishes what replication wrote; this master's puts come after it.
        ``new_reader`` makes a reader (it attaches itself) for a backlog recovery left and no appender has."""
        if self.reader is None and self.backlog_from is not None:
            new_reader()
        if self.reader is not None:
            self.reader_end = self.store.max_phy_offset
        self.release()

    def undo_unconfirmed(self, confirm: int) -> None:
        """After a crash: recovery dispatched the whole log, but only what was confirmed may be visible (Apache
        dispatches only up to the persisted confirm offset then); queues and index forget the rest, which is
        dispatched again once confirmed (or cut when this broker rejoins a master that never had it)."""
        store = self.store
        if not 0 <= confirm < store.max_phy_offset or store.rocks is not None:
            return
        confirm = max(confirm, store.min_phy_offset)
        for cq in store.consume_queues.values():
            if cq.max_physic_offset > confirm:
                cq.truncate_dirty(confirm)
        store.index.truncate(confirm)
        self.backlog_from = confirm

    def release(self) -> None:
        """Dispatch what the confirm offset now covers, in log order."""
        limit = self.confirm()
        ckpt = self.store.checkpoint
        if ckpt is not None:
            ckpt.confirm_offset = limit
        reader = self.reader
        if reader is not None:
            end = self.reader_end
            reader.dispatch(limit if end is None else min(limit, end))
            if end is None:
                return
            if reader.dispatched < end:
                if limit < end:
                    return
                # everything up to end is confirmed and written, yet the reader stopped: a torn or unreadable
                # record the role change could not cut (it is never dispatched); this master's puts go on
                log.warning("visibility: replicated records from %d to %d cannot be read; not dispatched",
                            reader.dispatched, end)
            self.reader = None
        held = self.held
        if not held or held[0][0] > limit:
            return
        store = self.store
        dispatch = store.pipeline.dispatch
        while held and held[0][0] <= limit:
            _, req, queued = held.popleft()
            dispatch(req)
            if queued and store.has_arrival_listeners:
                store._arrive(req[0], req[1], req[6] + 1)
