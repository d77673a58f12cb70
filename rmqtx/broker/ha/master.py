"""The master side of HA: accept slaves on haListenPort, stream the commit log, track their acks.

One connection per slave. The slave's first 8-byte report says where it stands; from then on the
master sends frames (offset, size, bytes) of at most haTransferBatchSize, never crossing a file,
plus header-only heartbeats when it has written nothing for haSendHeartbeatInterval. Every later
report is an ack that can release SYNC_MASTER sends waiting for the slave.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from twisted.internet import defer, protocol, task
from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from zope.interface import implementer

from rmqtx.broker.ha import wire
from rmqtx.remoting.protocol import IStreamTransport
from rmqtx.store.replica import read_for_transfer, transfer_start
from rmqtx.store.results import PutResult, PutStatus

if TYPE_CHECKING:
    from rmqtx.store.message_store import MessageStore

log = Logger(namespace="rmqtx.broker.ha.master")

#: Java's write service waits up to 100 ms for new data; our timer also drives heartbeats and housekeeping.
TICK_SECONDS = 0.1
#: Bytes sent per pump before yielding to the reactor.
PUMP_BUDGET = 4 * 1024 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


@implementer(IPushProducer)
class HAConnection(protocol.Protocol):
    """One slave: reads its offset reports, writes commit log frames while the socket takes them."""

    transport: IStreamTransport

    def __init__(self, service: "HAMasterService") -> None:
        self.service = service
        self.buf = bytearray()
        self.processed = 0
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer = -1
        self.paused = False
        self.closed = False
        self.last_read = self.last_write = _now_ms()
        self.peer = ""

    def connectionMade(self) -> None:
        peer = self.transport.getPeer()
        self.peer = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        self.transport.setTcpNoDelay(True)
        self.transport.registerProducer(self, True)
        self.service.connections.add(self)
        log.info("HA: slave {peer} connected", peer=self.peer)

    def connectionLost(self, reason: Any = None) -> None:
        self.closed = True
        self.service.connections.discard(self)
        log.info("HA: slave {peer} disconnected", peer=self.peer)

    def close(self, why: str) -> None:
        if not self.closed:
            log.warn("HA: closing slave {peer}: {why}", peer=self.peer, why=why)
            self.closed = True
            self.transport.abortConnection()

    # -- reads: offset reports ------------------------------------------------------------
    def dataReceived(self, data: bytes) -> None:
        self.last_read = _now_ms()
        self.buf += data
        offset, self.processed = wire.last_report(self.buf, self.processed)
        if self.processed:  # drop whole reports read; a partial one stays at the start (8-byte alignment kept)
            del self.buf[:self.processed]
            self.processed = 0
        if offset is None:
            return
        self.slave_ack_offset = offset
        if self.slave_request_offset < 0:
            self.slave_request_offset = offset
            log.info("HA: slave {peer} requests offset {offset}", peer=self.peer, offset=offset)
        elif offset > self.service.store.max_phy_offset:
            self.close(f"slave offset {offset} is beyond the master's commit log {self.service.store.max_phy_offset}")
            return
        self.service.on_ack(offset)
        self.pump()

    # -- writes: commit log frames --------------------------------------------------------
    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        self.pump()

    def stopProducing(self) -> None:
        self.closed = True

    def _send(self, frame: list[bytes]) -> None:
        self.transport.writeSequence(frame)
        self.last_write = _now_ms()

    def pump(self) -> None:
        """Send what the slave lacks, as long as the socket keeps up (and a budget per call)."""
        if self.closed or self.paused or self.slave_request_offset < 0:
            return
        store, cfg = self.service.store, self.service.store.config
        if self.next_transfer < 0:
            self.next_transfer = transfer_start(store, self.slave_request_offset)
            log.info("HA: transfer to {peer} starts at {start} (slave asked {asked})", peer=self.peer,
                     start=self.next_transfer, asked=self.slave_request_offset)
        sent = 0
        while not self.paused and not self.closed and sent < PUMP_BUDGET:
            data = read_for_transfer(store, self.next_transfer, cfg.ha_transfer_batch_size)
            if data is None:
                break
            self._send([wire.HEADER.pack(self.next_transfer, len(data)), data])
            self.next_transfer += len(data)
            sent += len(data)
        if sent and not self.paused and not self.closed:
            self.service.reactor.callLater(0, self.pump)  # budget used up: continue after other work

    def tick(self, now_ms: int) -> None:
        """Heartbeat when idle, housekeeping when the slave went quiet, and pick up new data."""
        if self.closed:
            return
        cfg = self.service.store.config
        if now_ms - self.last_read > cfg.ha_housekeeping_interval:
            self.close(f"no report for {now_ms - self.last_read} ms")
            return
        self.pump()
        if (self.slave_request_offset >= 0 and not self.paused
                and now_ms - self.last_write > cfg.ha_send_heartbeat_interval):
            self._send([wire.HEADER.pack(self.next_transfer, 0)])


class HAServerFactory(protocol.ServerFactory):
    def __init__(self, service: "HAMasterService") -> None:
        self.service = service

    def buildProtocol(self, addr: Any) -> HAConnection:
        return HAConnection(self.service)


class _Waiter:
    __slots__ = ("offset", "deadline", "deferred", "result")

    def __init__(self, offset: int, deadline: float, deferred: defer.Deferred, result: PutResult) -> None:
        self.offset, self.deadline, self.deferred, self.result = offset, deadline, deferred, result


class HAMasterService:
    """The HA listener, its slave connections and the SYNC_MASTER waits on their acks."""

    def __init__(self, store: "MessageStore", reactor: Any, sync_master: bool) -> None:
        self.store = store
        self.reactor = reactor
        self.sync_master = sync_master
        self.connections: set[HAConnection] = set()
        self.push2slave_max = 0
        self.port: Any = None
        self._waiters: deque[_Waiter] = deque()
        self._loop: task.LoopingCall | None = None
        self._kick: Any = None

    def start(self, port: int, interface: str = "") -> None:
        """Listen first (raises CannotListenError), then run the timer and watch arrivals."""
        self.port = self.reactor.listenTCP(port, HAServerFactory(self), interface=interface)
        self._loop = task.LoopingCall(self._tick)
        self._loop.clock = self.reactor
        self._loop.start(TICK_SECONDS, now=False)
        self.store.add_arrival_listener(self._on_arrival)

    async def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self.port is not None:
            await self.port.stopListening()
        for conn in list(self.connections):
            conn.close("master shutting down")
        self._expire(float("inf"))

    @property
    def listen_port(self) -> int:
        return self.port.getHost().port

    # -- data arrival and acks ------------------------------------------------------------
    def _on_arrival(self, topic: str, queue_id: int, new_max: int) -> None:
        """Many puts in one reactor turn share one pump (bigger frames, fewer syscalls)."""
        if self._kick is None and self.connections:
            self._kick = self.reactor.callLater(0, self._pump_all)

    def _pump_all(self) -> None:
        self._kick = None
        for conn in list(self.connections):
            conn.pump()

    def on_ack(self, offset: int) -> None:
        if offset > self.push2slave_max:
            self.push2slave_max = offset
        waiters = self._waiters
        while waiters and waiters[0].offset <= self.push2slave_max:
            w = waiters.popleft()
            w.deferred.callback(w.result)

    def _tick(self) -> None:
        now = _now_ms()
        for conn in list(self.connections):
            conn.tick(now)
        self._expire(time.monotonic())

    def _expire(self, now: float) -> None:
        waiters = self._waiters
        while waiters and waiters[0].deadline <= now:
            w = waiters.popleft()
            w.result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            w.deferred.callback(w.result)

    # -- SYNC_MASTER ------------------------------------------------------------------------
    def is_slave_ok(self, master_put_where: int) -> bool:
        """Java's isSlaveOK: a slave is connected and not more than haSlaveFallbehindMax behind."""
        return bool(self.connections) and (
            master_put_where - self.push2slave_max < self.store.config.ha_slave_fallbehind_max)

    def wait_for_slave(self, result: PutResult) -> PutResult | defer.Deferred:
        """The put's result once a slave acked its end, FLUSH_SLAVE_TIMEOUT after slaveTimeout, or SLAVE_NOT_AVAILABLE."""
        end = result.wrote_offset + result.wrote_bytes
        if not self.is_slave_ok(end):
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            return result
        if self.push2slave_max >= end:
            return result
        d: defer.Deferred = defer.Deferred()
        cfg = self.store.config  # Java's async send path waits slaveTimeout, its sync path at most syncFlushTimeout
        deadline = time.monotonic() + min(cfg.slave_timeout, cfg.sync_flush_timeout) / 1000.0
        self._waiters.append(_Waiter(end, deadline, d, result))
        self._on_arrival("", 0, 0)
        return d

    def status(self) -> dict:
        """For admin views: connected slaves and how far each acked."""
        return {
            "slaves": sorted((c.peer, c.slave_ack_offset) for c in self.connections),
            "push2SlaveMaxOffset": self.push2slave_max,
            "masterPutWhere": self.store.max_phy_offset,
        }
