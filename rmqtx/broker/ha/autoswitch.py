"""5.x controller-mode replication (Apache's AutoSwitchHAService, AutoSwitchHAConnection, AutoSwitchHAClient).

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
from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from zope.interface import implementer

from rmqtx.broker.ha import autoswitch_wire as w
from rmqtx.remoting.protocol import IStreamTransport
from rmqtx.store.epoch import OPEN_END, EpochCache
from rmqtx.store.replica import ReplicaAppender, read_for_transfer, truncate_log
from rmqtx.store.results import PutResult, PutStatus

if TYPE_CHECKING:
    from rmqtx.store.message_store import MessageStore

log = Logger(namespace="rmqtx.broker.ha.autoswitch")

TICK_SECONDS = 0.1
PUMP_BUDGET = 4 * 1024 * 1024
RECONNECT_SECONDS = 1.0


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- master side --------------------------------------------------------------------------------------


@implementer(IPushProducer)
class MasterConnection(protocol.Protocol):
    """One slave: its handshake, its offset reports, and the frames it lacks."""

    transport: IStreamTransport

    def __init__(self, service: "AutoSwitchHAService") -> None:
        self.service = service
        self.buf = bytearray()
        self.state = w.HANDSHAKE
        self.slave_id = -1
        self.sync_from_last_file = False
        self.async_learner = False
        self.request_offset = -1
        self.ack_offset = -1
        self.next_transfer = -1
        self.epoch = -1
        self.epoch_end = OPEN_END
        self.last_master_max = -1
        self.last_transfer_ms = 0
        self.paused = False
        self.closed = False
        self.last_read = self.last_write = _now_ms()
        self.peer = ""

    def connectionMade(self) -> None:
        peer = self.transport.getPeer()
        self.peer = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        if not self.service.is_master:
            log.info("HA: refusing {peer}: this broker is not the master", peer=self.peer)
            self.closed = True
            self.transport.abortConnection()
            return
        self.transport.setTcpNoDelay(True)
        self.transport.registerProducer(self, True)
        self.service.connections.add(self)

    def connectionLost(self, reason: Any = None) -> None:
        self.closed = True
        if self in self.service.connections:
            self.service.connections.discard(self)
            self.service.on_connection_lost(self)

    def close(self, why: str) -> None:
        if not self.closed:
            log.warn("HA: closing slave {peer} (id {sid}): {why}", peer=self.peer, sid=self.slave_id, why=why)
            self.closed = True
            self.transport.abortConnection()

    def dataReceived(self, data: bytes) -> None:
        self.last_read = _now_ms()
        self.buf += data
        pos = 0
        buf = self.buf
        while len(buf) - pos >= 4:
            state = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if state == w.HANDSHAKE:
                if len(buf) - pos < w.SLAVE_HANDSHAKE.size:
                    break
                _, last_file, learner, sid = w.SLAVE_HANDSHAKE.unpack_from(buf, pos)
                pos += w.SLAVE_HANDSHAKE.size
                self.slave_id, self.sync_from_last_file, self.async_learner = sid, last_file == 1, learner == 1
                log.info("HA: slave {peer} handshake, broker id {sid}", peer=self.peer, sid=sid)
                self.state = w.HANDSHAKE
                self._send([self._handshake()])
            elif state == w.TRANSFER:
                if len(buf) - pos < w.SLAVE_REPORT.size:
                    break
                _, offset = w.SLAVE_REPORT.unpack_from(buf, pos)
                pos += w.SLAVE_REPORT.size
                self.state = w.TRANSFER
                self._on_report(offset)
            else:
                del buf[:pos]
                self.close(f"unknown state {state} from slave")
                return
        if pos:
            del buf[:pos]
        self.pump()

    def _handshake(self) -> bytes:
        epochs = self.service.epochs
        entries = [(e.epoch, e.start) for e in epochs.entries]
        return w.master_handshake(self.service.store.max_phy_offset, epochs.last_epoch, entries)

    def _on_report(self, offset: int) -> None:
        self.ack_offset = offset
        if self.request_offset < 0:
            self.request_offset = offset
            log.info("HA: slave {sid} requests offset {offset}", sid=self.slave_id, offset=offset)
        service = self.service
        if not self.async_learner and offset >= self.last_master_max:
            caught = _now_ms() if service.store.max_phy_offset == offset else self.last_transfer_ms
            service.caught_up(self.slave_id, caught)
            service.maybe_expand(self.slave_id, offset)
        service.on_ack(self)

    # -- writes ------------------------------------------------------------------------------------
    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        self.pump()

    def stopProducing(self) -> None:
        self.closed = True

    def _send(self, parts: list[bytes]) -> None:
        self.transport.writeSequence(parts)
        self.last_write = _now_ms()

    def _start_transfer(self) -> bool:
        store, epochs = self.service.store, self.service.epochs
        if self.request_offset == 0:
            if self.sync_from_last_file:
                top = store.commitlog.max_offset
                start = max(0, top - top % store.config.mapped_file_size_commit_log)
            else:
                start = max(store.min_phy_offset, 0)
        else:
            start = self.request_offset
        entry = epochs.find_by_offset(start)
        if entry is None:
            return False
        self.next_transfer = start
        self._use_epoch(entry.epoch)
        log.info("HA: transfer to slave {sid} starts at {start}, epoch {epoch}", sid=self.slave_id, start=start,
                 epoch=entry.epoch)
        return True

    def _use_epoch(self, epoch: int) -> None:
        epochs = self.service.epochs
        entry = epochs.get(epoch)
        self.epoch = epoch
        self.epoch_end = OPEN_END if entry is None or epoch == epochs.last_epoch else entry.end

    def _header(self, offset: int, size: int) -> bytes | None:
        epochs = self.service.epochs
        entry = epochs.get(self.epoch)
        if entry is None:
            if size > 0:
                return None
            entry = epochs.first()
            if entry is None:
                return None
        return w.master_transfer_header(size, offset, entry.epoch, entry.start, self.service.confirm_offset)

    def pump(self) -> None:
        if self.closed or self.paused or self.state != w.TRANSFER or self.request_offset < 0:
            return
        store = self.service.store
        if self.next_transfer < 0 and not self._start_transfer():
            return
        batch = store.config.ha_transfer_batch_size
        sent = 0
        while not self.paused and not self.closed and sent < PUMP_BUDGET:
            size = batch
            if self.epoch_end != OPEN_END:
                if self.next_transfer >= self.epoch_end:
                    nxt = self.service.epochs.next_after(self.epoch)
                    if nxt is None:
                        break
                    self._use_epoch(nxt.epoch)
                    continue
                size = min(size, self.epoch_end - self.next_transfer)
            data = read_for_transfer(store, self.next_transfer, size)
            if data is None:
                if self.ack_offset >= store.max_phy_offset:  # nothing left to send: caught up now
                    self.service.caught_up(self.slave_id, _now_ms())
                break
            header = self._header(self.next_transfer, len(data))
            if header is None:
                break
            self.last_master_max = store.max_phy_offset
            self.last_transfer_ms = _now_ms()
            self._send([header, data])
            self.next_transfer += len(data)
            sent += len(data)
        if sent and not self.paused and not self.closed:
            self.service.reactor.callLater(0, self.pump)

    def tick(self, now_ms: int) -> None:
        if self.closed:
            return
        cfg = self.service.store.config
        if now_ms - self.last_read > cfg.ha_housekeeping_interval:
            self.close(f"no report for {now_ms - self.last_read} ms")
            return
        self.pump()
        if self.state == w.TRANSFER and not self.paused and now_ms - self.last_write > cfg.ha_send_heartbeat_interval:
            header = self._header(self.next_transfer, 0)
            if header is not None:
                self._send([header])


class _MasterFactory(protocol.ServerFactory):
    def __init__(self, service: "AutoSwitchHAService") -> None:
        self.service = service

    def buildProtocol(self, addr: Any) -> MasterConnection:
        return MasterConnection(self.service)


# -- slave side ---------------------------------------------------------------------------------------


class SlaveConnection(protocol.Protocol):
    """The connection to the master: handshake, truncate to the consistent point, then append frames."""

    transport: IStreamTransport

    def __init__(self, client: "AutoSwitchClient") -> None:
        self.client = client
        self.buf = bytearray()
        self.state = w.HANDSHAKE
        self.reported = -1
        self.received_epoch = -1
        self.closed = False
        self.waiting = False
        self.last_read = self.last_write = _now_ms()

    def connectionMade(self) -> None:
        self.transport.setTcpNoDelay(True)
        self.client.conn = self
        cfg = self.client.service.settings
        self._write(w.slave_handshake(self.client.broker_id, cfg.sync_from_last_file, False))
        log.info("HA: connected to master {addr} as broker id {bid}", addr=self.client.master_addr,
                 bid=self.client.broker_id)

    def connectionLost(self, reason: Any = None) -> None:
        self.closed = True
        if self.client.conn is self:
            self.client.conn = None

    def close(self, why: str) -> None:
        if not self.closed:
            log.warn("HA: closing the connection to master {addr}: {why}", addr=self.client.master_addr, why=why)
            self.closed = True
            self.transport.abortConnection()

    def _write(self, data: bytes) -> None:
        self.transport.write(data)
        self.last_write = _now_ms()

    def report(self, offset: int) -> None:
        self.reported = offset
        self._write(w.slave_report(offset))

    def dataReceived(self, data: bytes) -> None:
        self.last_read = _now_ms()
        self.buf += data
        if not self.waiting:
            self._process()

    def _process(self) -> None:
        buf = self.buf
        pos = 0
        store = self.client.store
        while not self.closed and len(buf) - pos >= w.MASTER_HANDSHAKE.size:
            state, size, offset, epoch = w.MASTER_HANDSHAKE.unpack_from(buf, pos)
            if state != self.state:
                self.close(f"master state {state}, slave state {self.state}")
                return
            if size < 0 or size > max(store.config.mapped_file_size_commit_log, 12 * 100000):
                self.close(f"bad body size {size}")
                return
            if state == w.HANDSHAKE:
                if len(buf) - pos < w.MASTER_HANDSHAKE.size + size:
                    break
                body = bytes(buf[pos + w.MASTER_HANDSHAKE.size:pos + w.MASTER_HANDSHAKE.size + size])
                pos += w.MASTER_HANDSHAKE.size + size
                why = self._truncate(w.parse_epoch_entries(body), offset)
                if why is not None:
                    del buf[:pos]
                    self.close(why)
                    return
                continue
            if len(buf) - pos < w.MASTER_TRANSFER.size + size:
                break
            _, _, offset, epoch, epoch_start, confirm = w.MASTER_TRANSFER.unpack_from(buf, pos)
            mine = store.max_phy_offset
            if size and mine != 0 and mine != offset:
                self.close(f"master pushed offset {offset}, not the slave's max offset {mine}")
                return
            if size:
                pending = self.client.appender.file_pending(offset)
                if pending is not None:
                    del buf[:pos]
                    self._wait_for(pending)
                    return
            if epoch != self.received_epoch:
                self.received_epoch = epoch
                last = self.client.service.epochs.last()
                if last is None or (epoch > last.epoch and epoch_start > last.start):
                    self.client.service.epochs.append(epoch, epoch_start)
            if size:
                start = pos + w.MASTER_TRANSFER.size
                why = self.client.appender.append(offset, bytes(buf[start:start + size]))
                if why is not None:
                    self.close(why)
                    return
            pos += w.MASTER_TRANSFER.size + size
            self.client.service.confirm_offset = min(confirm, store.max_phy_offset)
        if pos:
            del buf[:pos]
        if not self.closed and self.state == w.TRANSFER:
            mine = store.max_phy_offset
            if mine > self.reported:
                self.report(mine)

    def _truncate(self, master_entries: list[tuple[int, int]], master_end: int) -> str | None:
        """Java's doTruncate: cut this log back to where it agrees with the master's epochs."""
        service, store = self.client.service, self.client.store
        local = service.epochs
        if not local.entries:
            self.state = w.TRANSFER
            self.report(store.max_phy_offset)
            return None
        theirs = EpochCache()
        theirs.set_entries([_entry(e, s) for e, s in master_entries])
        theirs.set_last_end(master_end)
        mine = EpochCache()
        mine.set_entries(local.entries)
        mine.set_last_end(store.max_phy_offset)
        point = mine.consistent_point(theirs)
        if point < 0:
            return f"no consistent point between the master's epochs {master_entries} and ours"
        if point < store.max_phy_offset and store.flush.busy:  # files a flush thread syncs must not go now
            return "a flush is running; truncating on the next attempt"
        if point < store.max_phy_offset:
            truncate_log(store, point)
            self.client.appender = ReplicaAppender(store)
        local.truncate_from_offset(point)
        self.state = w.TRANSFER
        self.report(point)
        log.info("HA: handshake with master done, transfer from {point}", point=point)
        return None

    def _wait_for(self, fut: Any) -> None:
        self.waiting = True
        self.transport.pauseProducing()
        reactor = self.client.reactor

        def done(_: Any) -> None:
            reactor.callFromThread(self._resume)
        fut.add_done_callback(done)

    def _resume(self) -> None:
        self.waiting = False
        if not self.closed:
            self.transport.resumeProducing()
            self._process()

    def tick(self, now_ms: int) -> None:
        if self.closed:
            return
        cfg = self.client.store.config
        if now_ms - self.last_read > cfg.ha_housekeeping_interval:
            self.close(f"master silent for {now_ms - self.last_read} ms")
        elif self.state == w.TRANSFER and now_ms - self.last_write > cfg.ha_send_heartbeat_interval:
            self.report(max(self.reported, self.client.store.max_phy_offset))


def _entry(epoch: int, start: int) -> Any:
    from rmqtx.store.epoch import EpochEntry

    return EpochEntry(epoch, start)


class _SlaveFactory(protocol.ClientFactory):
    def __init__(self, client: "AutoSwitchClient") -> None:
        self.client = client

    def buildProtocol(self, addr: Any) -> SlaveConnection:
        return SlaveConnection(self.client)

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
        self.client.connecting = False

    def clientConnectionLost(self, connector: Any, reason: Any) -> None:
        self.client.connecting = False


class AutoSwitchClient:
    """A slave's link to its master's HA address (learnt from the NameServer's REGISTER_BROKER answer)."""

    def __init__(self, service: "AutoSwitchHAService", broker_id: int) -> None:
        self.service = service
        self.store = service.store
        self.reactor = service.reactor
        self.broker_id = broker_id
        self.appender = ReplicaAppender(self.store)
        self.master_addr: str | None = None
        self.conn: SlaveConnection | None = None
        self.connecting = False
        self.stopped = False
        self._last_attempt = 0.0

    def update_master_address(self, addr: str | None) -> None:
        if addr == self.master_addr:
            return
        log.info("HA: master HA address is now {addr}", addr=addr)
        self.master_addr = addr
        if self.conn is not None:
            self.conn.close("master address changed")
        self._last_attempt = 0.0
        self.connect()

    def _truncate_invalid(self) -> None:
        """Java's truncateInvalidMsg: bytes after the last whole record (a frame cut by a crash) go first."""
        self.appender.dispatch()
        end = self.appender.dispatched
        if 0 < end < self.store.max_phy_offset and not self.store.flush.busy:
            truncate_log(self.store, end)
            self.service.epochs.truncate_from_offset(end)
            self.appender = ReplicaAppender(self.store)

    def connect(self) -> None:
        if self.stopped or not self.master_addr or self.conn is not None or self.connecting:
            return
        now = time.monotonic()
        if self._last_attempt and now - self._last_attempt < RECONNECT_SECONDS:
            return
        self._last_attempt = now
        self._truncate_invalid()
        host, _, port = self.master_addr.rpartition(":")
        if not port.isdigit():
            log.error("HA: bad master HA address {addr}", addr=self.master_addr)
            return
        self.connecting = True
        self.reactor.connectTCP(host, int(port), _SlaveFactory(self), timeout=3)

    def tick(self, now_ms: int) -> None:
        if self.conn is not None:
            self.conn.tick(now_ms)
        else:
            self.connect()

    def stop(self) -> None:
        self.stopped = True
        if self.conn is not None:
            self.conn.close("no longer a slave")

    @property
    def connected(self) -> bool:
        return self.conn is not None and not self.conn.closed and self.conn.state == w.TRANSFER


# -- the service ---------------------------------------------------------------------------------------


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
        self.port: Any = None
        self._waiters: deque[_Waiter] = deque()
        self._loop: task.LoopingCall | None = None
        self._kick: Any = None

    def load(self) -> None:
        self.epochs.load()
        self.confirm_offset = self.store.max_phy_offset

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

    def status(self) -> dict:
        return {
            "master": self.is_master,
            "epoch": self.epochs.last_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "confirmOffset": self.confirm_offset,
            "slaves": sorted((c.slave_id, c.ack_offset) for c in self.connections),
            "masterHaAddress": self.client.master_addr if self.client else None,
        }
