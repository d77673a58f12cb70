"""Queue locks for orderly consumption: one client per queue and group, held 60 s unless renewed."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

#: Java's rocketmq.broker.rebalance.lockMaxLiveTime default.
LOCK_MAX_LIVE_S = 60.0

MessageQueue = tuple[str, str, int]  # (topic, brokerName, queueId)


@dataclass
class _Lock:
    client_id: str
    last_update: float


class RebalanceLockManager:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.table: dict[str, dict[MessageQueue, _Lock]] = {}

    def try_lock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> list[MessageQueue]:
        """Lock or renew each queue for ``client_id``; returns those it now holds."""
        now = self.clock()
        locks = self.table.setdefault(group, {})
        held = []
        for mq in mqs:
            lock = locks.get(mq)
            if lock is None or lock.client_id == client_id or now - lock.last_update > LOCK_MAX_LIVE_S:
                locks[mq] = _Lock(client_id, now)
                held.append(mq)
        return held

    def held_by(self, group: str, client_id: str) -> set[MessageQueue]:
        """The queues of ``group`` that ``client_id`` holds now (live locks only)."""
        now = self.clock()
        return {mq for mq, lock in self.table.get(group, {}).items()
                if lock.client_id == client_id and now - lock.last_update <= LOCK_MAX_LIVE_S}

    def unlock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> None:
        locks = self.table.get(group, {})
        for mq in mqs:
            lock = locks.get(mq)
            if lock is not None and lock.client_id == client_id:
                del locks[mq]
