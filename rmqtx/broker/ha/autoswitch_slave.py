"""The slave side of the 5.x HA protocol (Apache's AutoSwitchHAClient): handshake, truncation of the log
back to where it agrees with the master's epochs, then appending the master's frames."""

from __future__ import annotations

import time
from typing import Any

from twisted.internet import protocol
from twisted.logger import Logger

from rmqtx.broker.ha import autoswitch_wire as w
from rmqtx.remoting.protocol import IStreamTransport
from rmqtx.store.epoch import EpochCache, EpochEntry
from rmqtx.store.replica import ReplicaAppender, truncate_log

#: rmqtx.broker.ha.autoswitch.AutoSwitchHAService, which imports this module (named, not imported: no cycle).
AutoSwitchHAService = Any

log = Logger(namespace="rmqtx.broker.ha.autoswitch")

#: Seconds between connection attempts (Java waits 5 s; a failover wants the new master soon).
RECONNECT_SECONDS = 1.0


def _now_ms() -> int:
    return int(time.time() * 1000)



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
            store.release_confirmed()
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
        theirs.set_entries([EpochEntry(e, s) for e, s in master_entries])
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

    def __init__(self, service: AutoSwitchHAService, broker_id: int) -> None:
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
