"""The master side of the 5.x HA protocol (Apache's AutoSwitchHAConnection): one slave's handshake, its
offset reports, and the commit log frames it lacks, each frame inside one epoch."""

from __future__ import annotations

import time
from typing import Any

from twisted.internet import protocol
from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from zope.interface import implementer

from rmqtx.broker.ha import autoswitch_wire as w
from rmqtx.remoting.protocol import IStreamTransport
from rmqtx.store.epoch import OPEN_END
from rmqtx.store.replica import read_for_transfer

#: rmqtx.broker.ha.autoswitch.AutoSwitchHAService, which imports this module (named, not imported: no cycle).
AutoSwitchHAService = Any

log = Logger(namespace="rmqtx.broker.ha.autoswitch")

#: Bytes sent per pump before yielding to the reactor.
PUMP_BUDGET = 4 * 1024 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)



@implementer(IPushProducer)
class MasterConnection(protocol.Protocol):
    """One slave: its handshake, its offset reports, and the frames it lacks."""

    transport: IStreamTransport

    def __init__(self, service: AutoSwitchHAService) -> None:
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
        return w.master_transfer_header(size, offset, entry.epoch, entry.start, self.service.store_confirm_offset())

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
