"""Twisted services composed in order: a broker's parts, and the broker with its console and gRPC endpoint.

``MultiService`` starts its children in order but stops them all at once; a broker must stop one part
after another (the config files drain before the store closes), so :class:`OrderedServices` waits for
each child's stop before the next one's, newest first.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer
from twisted.python.failure import Failure


class OrderedServices(service.MultiService):
    """Children start in the order they were added and stop in reverse, each stop awaited before the next.

    A start that fails abandons what had started (see :meth:`abandon`) and raises: the process ends there.
    """

    def startService(self) -> None:
        service.Service.startService(self)
        try:
            for child in self:
                child.startService()
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """After a failed start: each started child that has an ``abandon()`` runs it, newest first.

        Only what must not be left half done (the store's lock and abort file) has one; the rest goes
        with the process, as it would were the start not composed of parts.
        """
        for child in reversed(list(self)):
            if child.running:
                abandon = getattr(child, "abandon", None)
                if abandon is not None:
                    abandon()
        self.running = 0

    def stopService(self) -> "defer.Deferred[None]":
        service.Service.stopService(self)
        return defer.ensureDeferred(self._stop_children())

    async def _stop_children(self) -> None:
        """Running children, newest first, one at a time; a stop that fails does not keep the older ones
        running (the first failure is raised once all have stopped)."""
        failure: Failure | None = None
        for child in reversed(list(self)):
            if not child.running:  # never started, or abandoned by a failed start
                continue
            try:
                await defer.maybeDeferred(child.stopService)
            except Exception:
                failure = failure or Failure()
        if failure is not None:
            failure.raiseException()


class Step(service.Service):
    """A part that is not a Service itself: what to call at start and at stop, either one optional.

    ``stop`` may return a Deferred or be a coroutine function; the parent waits for it.
    """

    def __init__(self, name: str, start: Callable[[], None] | None = None, stop: Callable[[], Any] | None = None) -> None:
        self.name = name
        self._start = start
        self._stop = stop

    def startService(self) -> None:
        if self._start is not None:
            self._start()
        super().startService()

    def stopService(self) -> "defer.Deferred[Any] | None":
        super().stopService()
        if self._stop is None:
            return None
        return defer.maybeDeferred(self._stop)

    def __repr__(self) -> str:
        return f"<Step {self.name}>"
