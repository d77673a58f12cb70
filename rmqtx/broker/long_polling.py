"""Long polling: a pull that found nothing waits until a message arrives or its time is up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from twisted.internet import defer
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from rmqtx.remoting.command import RemotingCommand

#: Re-runs the pull; ``final`` on timeout. Returns the answer, or None to keep waiting.
Retry = Callable[[bool], "RemotingCommand | None"]


@dataclass(eq=False)
class _HeldPull:
    offset: int
    retry: Retry
    waiter: "defer.Deferred[RemotingCommand | None]"
    timer: IDelayedCall | None = None


class PullHoldService:
    """Suspended pulls per topic and queue, woken by the store's arrival notices."""

    def __init__(self, reactor: IReactorTime) -> None:
        self.reactor = reactor
        self.held: dict[tuple[str, int], list[_HeldPull]] = {}

    def hold(self, topic: str, queue_id: int, offset: int, timeout_s: float, retry: Retry) -> "defer.Deferred[RemotingCommand | None]":
        held = _HeldPull(offset, retry, defer.Deferred())
        key = (topic, queue_id)
        self.held.setdefault(key, []).append(held)
        held.timer = self.reactor.callLater(max(timeout_s, 0.0), self._expire, key, held)
        return held.waiter

    def _remove(self, key: tuple[str, int], held: _HeldPull) -> None:
        waiting = self.held.get(key)
        if waiting and held in waiting:
            waiting.remove(held)
            if not waiting:
                del self.held[key]

    def _expire(self, key: tuple[str, int], held: _HeldPull) -> None:
        self._remove(key, held)
        held.waiter.callback(held.retry(True))

    def notify_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """New messages in a queue: answer the pulls now able to get something."""
        key = (topic, queue_id)
        waiting = self.held.get(key)
        if not waiting:
            return
        for held in list(waiting):
            if held.offset >= max_offset:
                continue
            answer = held.retry(False)
            if answer is not None:
                self._remove(key, held)
                if held.timer is not None and held.timer.active():
                    held.timer.cancel()
                held.waiter.callback(answer)

    def stop(self) -> None:
        """Drop every held pull (shutdown: Java leaves them unanswered too)."""
        for key, waiting in list(self.held.items()):
            for held in waiting:
                if held.timer is not None and held.timer.active():
                    held.timer.cancel()
                held.waiter.callback(None)
        self.held.clear()
