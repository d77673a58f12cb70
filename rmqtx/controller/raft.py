"""The controller's Raft group, from pysyncobj, bridged to the reactor.

pysyncobj runs its own thread (autoTick): it replicates the events a leader commits, applies them to
:class:`EventLog` on every node in log order, and keeps its journal and dump files under the
controller's store path so the state survives a restart of every node. The reactor never waits on
it: a commit is a Deferred fired through ``callFromThread``, and readers take a short lock.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from twisted.internet import defer

from rmqtx.controller.replicas import Event, ReplicasInfo

from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated  # the 'controller' extra


#: A commit not applied by then fails (Apache's controller waits as long for DLedger); the write lock is freed.
COMMIT_TIMEOUT_S = 5.0


class NotLeader(Exception):
    """This node is not the Raft leader (or lost leadership before the commit)."""


class EventLog(SyncObjConsumer):
    """The replicated state: one ``tables`` dict (see rmqtx.controller.replicas), changed only by :meth:`commit`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # set before the base init: not part of the replicated data
        super().__init__()
        self.tables: dict[str, dict[str, Any]] = {}

    @replicated
    def commit(self, events: list[Event]) -> int:
        with self.lock:
            state = ReplicasInfo(self.tables)
            for event in events:
                state.apply(event)
        return len(events)

    def _deserialize(self, data: dict) -> None:
        with self.lock:
            super()._deserialize(data)


class RaftGroup:
    """One node of the group: ``self_addr`` and ``others`` are pysyncobj's host:port addresses."""

    def __init__(self, reactor: Any, self_addr: str, others: list[str], store_dir: str) -> None:
        self.reactor = reactor
        self.log = EventLog()
        conf = SyncObjConf(
            journalFile=os.path.join(store_dir, "raft.journal"),
            fullDumpFile=os.path.join(store_dir, "raft.dump"),
            useFork=False,  # no fork of a process that runs a reactor; the state is small
            dynamicMembershipChange=False,
            # pysyncobj's 0.4-1.4 s election timeouts flap on a busy machine (its thread shares the GIL with the
            # reactor); a controller leader change costs brokers nothing while their master lives
            raftMinTimeout=1.0, raftMaxTimeout=3.0,
            bindAddress=self_addr,
        )
        self.sync = SyncObj(self_addr, others, conf=conf, consumers=[self.log])
        self.self_addr = self_addr
        self._ready_term: int | None = None
        self._barrier_term: int | None = None

    def is_leader(self) -> bool:
        """Leader, and caught up: an entry of its own term is committed and applied here, so every entry an
        earlier leader committed is applied too, and checks read the whole state (Raft's rule: a new leader
        knows what is committed only once one of its own entries is). The first call in a term proposes that
        empty entry and answers False until it is applied."""
        sync = self.sync
        if not sync._isLeader():  # pysyncobj's own (underscored) accessors of its role and term
            return False
        term = sync._getTerm()
        if self._ready_term == term:
            return bool(sync.raftLastApplied >= sync.raftCommitIndex)
        if self._barrier_term != term:
            self._barrier_term = term

            def applied(result: Any, error: Any, term: int = term) -> None:  # pysyncobj's thread
                if error == 0:
                    self._ready_term = term
                else:
                    self._barrier_term = None  # try again on the next call

            self.log.commit([], callback=applied)
        return False

    def leader(self) -> str | None:
        node = self.sync._getLeader()
        return None if node is None else str(node.address if hasattr(node, "address") else node)

    def read(self, fn: Callable[[ReplicasInfo], Any], elect_unclean: bool = False) -> Any:
        with self.log.lock:
            return fn(ReplicasInfo(self.log.tables, elect_unclean))

    def commit(self, events: list[Event]) -> "defer.Deferred[int]":
        """Fires once ``events`` are committed and applied here; fails with NotLeader otherwise."""
        d: defer.Deferred = defer.Deferred()
        if not self.is_leader():
            d.errback(NotLeader())
            return d

        def fire(result: Any, error: Any) -> None:  # the reactor's thread
            if d.called:  # timed out meanwhile
                return
            if error == 0:
                d.callback(result)
            else:
                d.errback(NotLeader(f"commit failed: pysyncobj error {error}"))

        def done(result: Any, error: Any) -> None:  # pysyncobj's thread
            self.reactor.callFromThread(fire, result, error)

        def timed_out(failure: Any) -> Any:
            failure.trap(defer.TimeoutError)
            raise NotLeader(f"no commit in {COMMIT_TIMEOUT_S} s")

        self.log.commit(events, callback=done)
        d.addTimeout(COMMIT_TIMEOUT_S, self.reactor)
        return d.addErrback(timed_out)

    def status(self) -> dict[str, Any]:
        return dict(self.sync.getStatus())

    def stop(self) -> None:
        self.sync.destroy()
