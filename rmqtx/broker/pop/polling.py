"""Long polling for POP_MESSAGE: a pop that found nothing waits for an arrival on its topic (one
queue or all), its pop retry topic, or an orderly unlock, until its poll time is up.

An arrival wakes one held pop of each consumer group, as Apache's PopLongPollingService does, not
every pop held on the topic: with a thousand receives parked, waking all of them for each message
re-ran a thousand pops per message on the reactor. A woken pop that takes messages wakes the group's
next one in turn, so what it left behind is not left waiting for the next arrival."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import defer
from twisted.internet.interfaces import IDelayedCall
from twisted.python.failure import Failure

from rmqtx.remoting.command import RemotingCommand

#: Re-runs the pop; ``final`` on timeout. Returns the answer, or None to keep waiting.
Retry = Callable[[bool], "defer.Deferred[RemotingCommand | None]"]


@dataclass(eq=False)
class _HeldPop:
    watches: dict[str, int]  # topic -> queue id (-1: any)
    retry: Retry
    waiter: "defer.Deferred[RemotingCommand | None]"
    group: str = ""  # the consumer group ("": woken by every arrival)
    woken_by: tuple[str, int] | None = None  # the (topic, queue id) whose arrival woke it last
    timer: IDelayedCall | None = None
    busy: bool = False
    done: bool = False


class PopHoldService:
    def __init__(self, reactor: Any, max_held: int = 100000) -> None:
        self.reactor = reactor
        self.max_held = max_held
        self.by_topic: dict[str, list[_HeldPop]] = {}
        self.count = 0

    def full(self) -> bool:
        return self.count >= self.max_held

    def hold(self, watches: dict[str, int], timeout_s: float, retry: Retry,
             group: str = "") -> "defer.Deferred[RemotingCommand | None]":
        held = _HeldPop(watches, retry, defer.Deferred(), group)
        for topic in watches:
            self.by_topic.setdefault(topic, []).append(held)
        self.count += 1
        held.timer = self.reactor.callLater(max(timeout_s, 0.0), self._run, held, True)
        return held.waiter

    def _remove(self, held: _HeldPop) -> None:
        if held.done:
            return
        held.done = True
        self.count -= 1
        if held.timer is not None and held.timer.active():
            held.timer.cancel()
        for topic in held.watches:
            waiting = self.by_topic.get(topic)
            if waiting and held in waiting:
                waiting.remove(held)
                if not waiting:
                    del self.by_topic[topic]

    def _run(self, held: _HeldPop, final: bool) -> None:
        if held.done or (held.busy and not final):
            return
        held.busy = True

        def answered(answer: RemotingCommand | None) -> None:
            held.busy = False
            if held.done:
                return
            if answer is not None or final:
                self._remove(held)
                held.waiter.callback(answer)
                if answer is not None and not final and held.woken_by is not None:
                    self.notify(*held.woken_by)  # more may be left: the group's next pop looks

        def failed(failure: Failure) -> None:
            held.busy = False
            if not held.done:
                self._remove(held)
                held.waiter.errback(failure)

        held.retry(final).addCallbacks(answered, failed)

    def notify(self, topic: str, queue_id: int) -> None:
        """Something to pop may be there now (arrival, re-put, orderly unlock): wake the first idle held
        pop of each group watching it (every one of those held without a group)."""
        woken: set[str] = set()
        for held in list(self.by_topic.get(topic, ())):
            wanted = held.watches.get(topic, -1)
            if held.busy or held.done or (wanted >= 0 and wanted != queue_id) or held.group in woken:
                continue
            if held.group:
                woken.add(held.group)
            held.woken_by = (topic, queue_id)
            self._run(held, False)

    def held_on(self, topic: str, queue_id: int) -> int:
        """How many held requests watch this queue (POLLING_INFO)."""
        return sum(1 for held in self.by_topic.get(topic, ()) if held.watches.get(topic, -1) == queue_id)

    def notify_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        if topic in self.by_topic:
            self.notify(topic, queue_id)

    def stop(self) -> None:
        for waiting in list(self.by_topic.values()):
            for held in list(waiting):
                if not held.done:
                    self._remove(held)
                    held.waiter.callback(None)
        self.by_topic.clear()
