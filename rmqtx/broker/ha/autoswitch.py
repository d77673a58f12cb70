"""5.x controller-mode replication (Apache's AutoSwitchHAService): the service that owns the HA listener, the
master's connections (``autoswitch_master``) or the slave's client (``autoswitch_slave``), the epoch file,
the sync-state set the master proposes, and the SYNC sends waiting on replicas.

Every broker of the group listens on its HA port; which side it plays follows the controller: the master
streams its commit log in frames that carry the epoch they belong to and its confirm offset, a slave
first compares epoch lists with the master (the handshake), cuts its log where they diverge, then
appends. The master tracks which slaves are caught up (the sync-state set it proposes to the controller)
and holds SYNC sends until enough of them acked (``inSyncReplicas`` / ``allAckInSyncStateSet``).
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import defer, protocol, task
from twisted.logger import Logger

from rmqtx.broker.ha.autoswitch_master import MasterConnection
from rmqtx.broker.ha.autoswitch_slave import AutoSwitchClient
from rmqtx.store.epoch import EpochCache
from rmqtx.store.replica import ReplicaAppender
from rmqtx.store.results import PutResult, PutStatus

if TYPE_CHECKING:
    from rmqtx.store.message_store import MessageStore

log = Logger(namespace="rmqtx.broker.ha.autoswitch")

TICK_SECONDS = 0.1


def _now_ms() -> int:
    return int(time.time() * 1000)


class _MasterFactory(protocol.ServerFactory):
    def __init__(self, service: "AutoSwitchHAService") -> None:
        self.service = service

    def buildProtocol(self, addr: Any) -> MasterConnection:
        return MasterConnection(self.service)



class _Waiter:
    __slots__ = ("end", "deadline", "deferred", "result", "acks")

    def __init__(self, end: int, deadline: float, deferred: defer.Deferred, result: PutResult, acks: int) -> None:
        self.end, self.deadline, self.deferred, self.result, self.acks = end, deadline, deferred, result, acks


#: Java's MixAll.ALL_ACK_IN_SYNC_STATE_SET
ALL_ACK = -1


class AutoSwitchHAService:
    """The broker's HA in controller mode: a listener always, master connections or a client by role."""

    def __init__(self, store: "MessageStore", reactor: Any, settings: Any, epoch_path: str) -> None:
        self.store = store
        self.reactor = reactor
        self.settings = settings
        self.epochs = EpochCache(epoch_path)
        self.is_master = False
        self.local_id: int | None = None
        self.sync_state_set: set[int] = set()
        self.remote_set: set[int] = set()
        self.synchronizing = False
        self.caught_up_ms: dict[int, int] = {}
        self.connections: set[MasterConnection] = set()
        self.client: AutoSwitchClient | None = None
        self.confirm_offset = -1
        self.listeners: list[Callable[[set[int]], None]] = []
        #: the commit log's confirm offset (Java's DefaultMessageStore.getConfirmOffset: everything when the master
        #: waits for no one), which the master sends in its transfer frames; the replicas manager sets it
        self.store_confirm_offset: Callable[[], int] = lambda: self.confirm_offset
        self.port: Any = None
        self._waiters: deque[_Waiter] = deque()
        self._loop: task.LoopingCall | None = None
        self._kick: Any = None

    def load(self) -> None:
        self.epochs.load()
        confirm = self.store.recover_confirm_offset()
        self.confirm_offset = self.store.max_phy_offset if confirm is None else confirm

    def start(self, port: int, interface: str = "") -> None:
        self.port = self.reactor.listenTCP(port, _MasterFactory(self), interface=interface)
        self._loop = task.LoopingCall(self._tick)
        self._loop.clock = self.reactor
        self._loop.start(TICK_SECONDS, now=False)
        self.store.add_arrival_listener(self._on_arrival)

    async def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self.port is not None:
            await self.port.stopListening()
        self._drop_connections("broker shutting down")
        if self.client is not None:
            self.client.stop()
        self._expire(float("inf"))

    @property
    def listen_port(self) -> int:
        return self.port.getHost().port

    @property
    def last_epoch(self) -> int:
        return self.epochs.last_epoch

    def _drop_connections(self, why: str) -> None:
        for conn in list(self.connections):
            conn.close(why)
        self.connections.clear()

    # -- roles ---------------------------------------------------------------------------------------
    def change_to_master(self, epoch: int) -> bool:
        if epoch < self.epochs.last_epoch:
            return False
        self._drop_connections("becoming master")
        if self.client is not None:
            self.client._truncate_invalid()
            self.client.stop()
            self.client = None
        self.is_master = True
        self.caught_up_ms.clear()
        if self.epochs.last_epoch >= epoch:
            self.epochs.truncate_from_epoch(epoch)
        self.epochs.append(epoch, self.store.max_phy_offset)
        self.confirm_offset = self.compute_confirm_offset()
        if self.store.gate is not None:
            self.store.gate.to_master(lambda: ReplicaAppender(self.store))
        log.info("HA: master of epoch {epoch} from offset {offset}", epoch=epoch, offset=self.store.max_phy_offset)
        return True

    def change_to_master_again(self, epoch: int) -> bool:
        """Java's changeToMasterWhenLastRoleIsMaster: a new term for the same master."""
        if epoch < self.epochs.last_epoch:
            return False
        if self.epochs.last_epoch >= epoch:
            self.epochs.truncate_from_epoch(epoch)
        self.epochs.append(epoch, self.store.max_phy_offset)
        return True

    def change_to_slave(self, epoch: int, local_id: int) -> bool:
        if epoch < self.epochs.last_epoch:
            return False
        self._drop_connections("becoming slave")
        self.is_master = False
        self._expire(float("inf"))
        if self.client is not None:
            self.client.stop()
        self.client = AutoSwitchClient(self, local_id)
        return True

    def update_master_ha_address(self, addr: str | None) -> None:
        if self.client is not None and addr:
            self.client.update_master_address(addr)

    # -- sync-state set ------------------------------------------------------------------------------
    def set_sync_state_set(self, ids: set[int]) -> None:
        self.synchronizing = False
        self.sync_state_set = set(ids)
        self.confirm_offset = self.compute_confirm_offset()
        self._release()
        self.store.release_confirmed()

    def effective_set(self) -> set[int]:
        return self.sync_state_set | self.remote_set if self.synchronizing else set(self.sync_state_set)

    def _mark(self, new: set[int]) -> None:
        self.synchronizing = True
        self.remote_set = set(new)

    def caught_up(self, slave_id: int, ms: int) -> None:
        self.caught_up_ms[slave_id] = max(self.caught_up_ms.get(slave_id, 0), ms)

    def maybe_expand(self, slave_id: int, offset: int) -> None:
        current = set(self.sync_state_set)
        if slave_id in current or not self.is_master:
            return
        last = self.epochs.last()
        if offset >= self.confirm_offset and last is not None and offset >= last.start:
            current.add(slave_id)
            self._mark(current)
            log.info("HA: slave {sid} caught up at {offset}: proposing it for the sync-state set", sid=slave_id,
                     offset=offset)
            self._notify(current)

    def maybe_shrink(self) -> set[int]:
        new = set(self.sync_state_set)
        changed = False
        now = _now_ms()
        limit = self.settings.ha_max_time_slave_not_catchup
        for sid in list(new):
            if sid == self.local_id:
                continue
            seen = self.caught_up_ms.get(sid)
            if seen is None or now - seen > limit:
                new.discard(sid)
                changed = True
        if changed:
            self._mark(new)
        return new

    def on_connection_lost(self, conn: MasterConnection) -> None:
        self.caught_up_ms.pop(conn.slave_id, None)
        if conn.slave_id in self.sync_state_set and self.is_master:
            new = set(self.sync_state_set) - {conn.slave_id}
            self._mark(new)
            self._notify(new)

    def _notify(self, new: set[int]) -> None:
        for fn in self.listeners:
            self.reactor.callLater(0, fn, set(new))

    def compute_confirm_offset(self) -> int:
        current = self.effective_set()
        top = self.store.max_phy_offset
        ids = {c.slave_id for c in self.connections}
        for sid in current:
            if sid != self.local_id and sid not in ids:
                return self.confirm_offset
        for c in self.connections:
            if c.slave_id in current and c.ack_offset > 0:
                top = min(top, c.ack_offset)
        return top

    # -- SYNC sends ----------------------------------------------------------------------------------
    def in_sync_replicas(self) -> int:
        return len(self.sync_state_set | self.remote_set) if self.synchronizing else len(self.sync_state_set)

    def wait_for_replicas(self, result: PutResult, acks: int) -> "PutResult | defer.Deferred":
        """The put's result once ``acks`` replicas (master included, or the whole sync-state set for ALL_ACK)
        have its end, FLUSH_SLAVE_TIMEOUT after slaveTimeout."""
        if 0 <= acks <= 1:
            return result
        end = result.wrote_offset + result.wrote_bytes
        if self._acked(end, acks):
            return result
        d: defer.Deferred = defer.Deferred()
        deadline = time.monotonic() + self.store.config.slave_timeout / 1000.0
        self._waiters.append(_Waiter(end, deadline, d, result, acks))
        self._on_arrival("", 0, 0)
        return d

    def _acked(self, end: int, acks: int) -> bool:
        if acks == ALL_ACK:
            members = self.effective_set()
            if len(members) <= 1:
                return True
            count = 1 + sum(1 for c in self.connections if c.slave_id in members and c.ack_offset >= end)
            return count >= len(members)
        return 1 + sum(1 for c in self.connections if c.ack_offset >= end) >= acks

    def on_ack(self, conn: MasterConnection) -> None:
        if conn.slave_id in self.sync_state_set:
            self.confirm_offset = self.compute_confirm_offset()
            self.store.release_confirmed()
        self._release()

    def _release(self) -> None:
        waiters = self._waiters
        while waiters and self._acked(waiters[0].end, waiters[0].acks):
            w_ = waiters.popleft()
            w_.deferred.callback(w_.result)

    def _expire(self, now: float) -> None:
        waiters = self._waiters
        while waiters and waiters[0].deadline <= now:
            w_ = waiters.popleft()
            w_.result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            w_.deferred.callback(w_.result)

    # -- timers --------------------------------------------------------------------------------------
    def _on_arrival(self, topic: str, queue_id: int, new_max: int) -> None:
        """Many puts in one reactor turn share one pump."""
        if self._kick is None and self.connections:
            self._kick = self.reactor.callLater(0, self._pump_all)

    def _pump_all(self) -> None:
        self._kick = None
        for conn in list(self.connections):
            conn.pump()

    def _tick(self) -> None:
        now = _now_ms()
        for conn in list(self.connections):
            conn.tick(now)
        if self.client is not None:
            self.client.tick(now)
        self._expire(time.monotonic())
        self.store.release_confirmed()

    def status(self) -> dict:
        return {
            "master": self.is_master,
            "epoch": self.epochs.last_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "confirmOffset": self.confirm_offset,
            "slaves": sorted((c.slave_id, c.ack_offset) for c in self.connections),
            "masterHaAddress": self.client.master_addr if self.client else None,
        }
