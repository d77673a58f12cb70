"""Which brokers are alive, from their BROKER_HEARTBEAT frames: local to each controller node.

Brokers beat every controller they know, so each node has its own view; only the Raft leader acts on
it (elections). A broker is alive until its own heartbeatTimeoutMills pass without a beat, or until
the connection it beat on closes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rmqtx.remoting.controller_headers import BrokerHeartbeatRequestHeader

#: A broker that names no timeout (Apache's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, ms).
DEFAULT_TIMEOUT_MS = 10_000

Identity = tuple[str, str, int]  # clusterName, brokerName, brokerId


@dataclass
class LiveInfo:
    broker_addr: str
    last_beat: float
    timeout_s: float
    conn: object
    epoch: int
    max_offset: int
    confirm_offset: int
    priority: int


class HeartbeatTable:
    """Apache's DefaultBrokerHeartbeatManager without its threads: the service calls :meth:`scan`."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.live: dict[Identity, LiveInfo] = {}

    def on_heartbeat(self, h: BrokerHeartbeatRequestHeader, conn: object) -> None:
        key = (h.clusterName, h.brokerName, h.brokerId if h.brokerId is not None else -1)
        epoch = -1 if h.epoch is None else h.epoch
        max_offset = -1 if h.maxOffset is None else h.maxOffset
        confirm = -1 if h.confirmOffset is None else h.confirmOffset
        timeout = (DEFAULT_TIMEOUT_MS if h.heartbeatTimeoutMills is None else h.heartbeatTimeoutMills) / 1000.0
        priority = 2**31 - 1 if h.electionPriority is None else h.electionPriority
        prev = self.live.get(key)
        if prev is None:
            self.live[key] = LiveInfo(h.brokerAddr, self.clock(), timeout, conn, epoch, max_offset, confirm, priority)
            return
        prev.last_beat, prev.timeout_s, prev.priority, prev.conn = self.clock(), timeout, priority, conn
        if epoch > prev.epoch or (epoch == prev.epoch and max_offset > prev.max_offset):
            prev.epoch, prev.max_offset, prev.confirm_offset = epoch, max_offset, confirm

    def is_alive(self, cluster: str, name: str, broker_id: int) -> bool:
        info = self.live.get((cluster, name, broker_id))
        return info is not None and info.last_beat + info.timeout_s >= self.clock()

    def live_info(self, cluster: str, name: str, broker_id: int) -> tuple[int, int, int] | None:
        info = self.live.get((cluster, name, broker_id))
        return None if info is None else (info.epoch, info.max_offset, info.priority)

    def scan(self) -> list[Identity]:
        """Forget the brokers whose beats stopped; returns them (their connections are for the caller to close)."""
        now = self.clock()
        gone = [key for key, info in self.live.items() if now - info.last_beat > info.timeout_s]
        return [key for key in gone if self.live.pop(key, None) is not None]

    def on_connection_closed(self, conn: object) -> list[Identity]:
        gone = [key for key, info in self.live.items() if info.conn is conn]
        for key in gone:
            del self.live[key]
        return gone
