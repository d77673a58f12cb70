"""The slave side of HA (Java's HAClient): connect to the master, report offsets, append its frames.

A frame whose offset is not the slave's max offset (once the slave has data), a negative or
oversized body, or a failed append closes the connection before anything is written; the slave
reconnects and reports its offset again, so the master restarts from there.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from twisted.internet import protocol, task
from twisted.logger import Logger

from rmqtx.broker.ha import wire
from rmqtx.remoting.protocol import IStreamTransport
from rmqtx.store.replica import ReplicaAppender

if TYPE_CHECKING:
    from rmqtx.store.message_store import MessageStore

log = Logger(namespace="rmqtx.broker.ha.slave")

#: Java waits 5 s between connection attempts.
RECONNECT_SECONDS = 5.0
TICK_SECONDS = 1.0


def _now_ms() -> int:
    return int(time.time() * 1000)


class HAClientProtocol(protocol.Protocol):
    """One connection to the master."""

    transport: IStreamTransport

    def __init__(self, client: "HAClient") -> None:
        self.client = client
        self.buf = bytearray()
        self.pos = 0
        self.reported = 0
        self.last_read = self.last_write = _now_ms()
        self.closed = False
        self.waiting = False

    def connectionMade(self) -> None:
        self.transport.setTcpNoDelay(True)
        self.client.conn = self
        self.report(self.client.store.max_phy_offset)  # Java waits one heartbeat interval; the master takes it now
        log.info("HA: connected to master {addr}, reported {offset}", addr=self.client.master_addr, offset=self.reported)

    def connectionLost(self, reason: Any = None) -> None:
        self.closed = True
        if self.client.conn is self:
            self.client.conn = None

    def close(self, why: str) -> None:
        if not self.closed:
            log.warn("HA: closing connection to master {addr}: {why}", addr=self.client.master_addr, why=why)
            self.closed = True
            self.transport.abortConnection()

    def report(self, offset: int) -> None:
        self.reported = offset
        self.transport.write(wire.encode_report(offset))
        self.last_write = _now_ms()

    def dataReceived(self, data: bytes) -> None:
        self.last_read = _now_ms()
        self.buf += data
        if not self.waiting:
            self._process()

    def _process(self) -> None:
        """Append each complete frame; pause reading while a new commit log file is being made."""
        store, appender = self.client.store, self.client.appender
        buf = self.buf
        max_body = store.config.mapped_file_size_commit_log
        while not self.closed and len(buf) - self.pos >= wire.HEADER_SIZE:
            offset, size = wire.HEADER.unpack_from(buf, self.pos)
            mine = store.max_phy_offset
            if mine != 0 and offset != mine:
                self.close(f"master pushed offset {offset}, not the slave's max offset {mine}")
                return
            if size < 0 or size > max_body:
                self.close(f"bad body size {size} at offset {offset}")
                return
            if len(buf) - self.pos - wire.HEADER_SIZE < size:
                break
            if size:
                pending = appender.file_pending(offset)
                if pending is not None:
                    self._wait_for(pending)
                    return
                start = self.pos + wire.HEADER_SIZE
                why = appender.append(offset, bytes(buf[start:start + size]))
                if why is not None:
                    self.close(why)
                    return
            self.pos += wire.HEADER_SIZE + size
        if self.pos:
            del buf[:self.pos]
            self.pos = 0
        if not self.closed:
            self.report_progress()

    def _wait_for(self, fut: Any) -> None:
        """The allocator thread is making the next file: stop reading, resume when it is done."""
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

    def report_progress(self) -> None:
        mine = self.client.store.max_phy_offset
        if mine > self.reported:
            self.report(mine)

    def tick(self, now_ms: int) -> None:
        cfg = self.client.store.config
        if now_ms - self.last_read > cfg.ha_housekeeping_interval:
            self.close(f"master silent for {now_ms - self.last_read} ms")
        elif now_ms - self.last_write > cfg.ha_send_heartbeat_interval:
            self.report(max(self.reported, self.client.store.max_phy_offset))


class _Factory(protocol.ClientFactory):
    def __init__(self, client: "HAClient") -> None:
        self.client = client

    def buildProtocol(self, addr: Any) -> HAClientProtocol:
        return HAClientProtocol(self.client)

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
        self.client.connecting = False

    def clientConnectionLost(self, connector: Any, reason: Any) -> None:
        self.client.connecting = False


class HAClient:
    """Keeps one connection to the master's HA address (from haMasterAddress or the NameServer)."""

    def __init__(self, store: "MessageStore", reactor: Any) -> None:
        self.store = store
        self.reactor = reactor
        self.appender = ReplicaAppender(store)
        self.master_addr: str | None = None
        self.conn: HAClientProtocol | None = None
        self.connecting = False
        self._last_attempt = 0.0
        self._loop: task.LoopingCall | None = None

    def update_master_address(self, addr: str | None) -> None:
        """A new master address drops the old connection (Java's updateHaMasterAddress)."""
        if not addr or addr == self.master_addr:
            return
        log.info("HA: master address is now {addr}", addr=addr)
        self.master_addr = addr
        if self.conn is not None:
            self.conn.close("master address changed")
        self._last_attempt = 0.0
        self._connect()

    def start(self) -> None:
        self._loop = task.LoopingCall(self._tick)
        self._loop.clock = self.reactor
        self._loop.start(TICK_SECONDS, now=False)
        self._connect()

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self.conn is not None:
            self.conn.close("slave shutting down")

    def _connect(self) -> None:
        if self.master_addr is None or self.conn is not None or self.connecting or self._loop is None:
            return
        now = time.monotonic()
        if self._last_attempt and now - self._last_attempt < RECONNECT_SECONDS:
            return
        self._last_attempt = now
        host, _, port = self.master_addr.rpartition(":")
        try:
            port_no = int(port)
        except ValueError:
            log.error("HA: bad master address {addr}", addr=self.master_addr)
            return
        self.connecting = True
        self.reactor.connectTCP(host, port_no, _Factory(self), timeout=3)

    def _tick(self) -> None:
        if self.conn is not None:
            self.conn.tick(_now_ms())
        else:
            self._connect()

    @property
    def connected(self) -> bool:
        return self.conn is not None and not self.conn.closed


__all__ = ["HAClient", "HAClientProtocol"]
