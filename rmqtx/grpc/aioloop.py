"""One asyncio event loop in one thread for grpc.aio, and the bridges between it and the reactor.

The gRPC endpoint's handlers are coroutines on that loop; the broker's state belongs to the reactor.
``ReactorBridge.call`` runs a function (plain, Deferred-returning or ``async def``) on the reactor and
gives the loop an awaitable of its result, so a waiting call is a pending future, never a thread.
``LoopThread.run`` goes the other way for start and stop (a coroutine on the loop, its result on
whichever thread asks).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Coroutine

from twisted.internet import defer
from twisted.logger import Logger

log = Logger(namespace="rmqtx.grpc")


class LoopThread:
    """A daemon thread running one asyncio loop until ``stop``; what is still pending then is cancelled."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> "concurrent.futures.Future[Any]":
        """Schedule ``coro`` on the loop from any other thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def deferred(self, reactor: Any, coro: Coroutine[Any, Any, Any]) -> "defer.Deferred[Any]":
        """``coro`` on the loop; its result as a Deferred fired on the reactor (for stopService)."""
        d: defer.Deferred[Any] = defer.Deferred()

        def done(future: "concurrent.futures.Future[Any]") -> None:
            error = defer.CancelledError() if future.cancelled() else future.exception()
            if error is not None:
                reactor.callFromThread(d.errback, error)
            else:
                reactor.callFromThread(d.callback, future.result())

        self.submit(coro).add_done_callback(done)
        return d

    def stop(self) -> None:
        """Ask the loop to stop (its thread then cancels what is left and exits); safe to call twice."""
        if not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # closed in between
                pass


class ReactorBridge:
    """From coroutines on ``loop``: run work on the reactor and await its result, errors included."""

    def __init__(self, reactor: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.reactor = reactor
        self.loop = loop

    def call(self, func: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        """``func(*args)`` on the reactor (a coroutine or Deferred it returns is awaited there). Call on the loop."""
        future: asyncio.Future[Any] = self.loop.create_future()

        def settle(ok: bool, value: Any) -> None:  # on the loop
            if future.done():  # the awaiting call was cancelled (its client went away)
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        def answer(ok: bool, value: Any) -> None:  # on the reactor
            try:
                self.loop.call_soon_threadsafe(settle, ok, value)
            except RuntimeError:  # the loop closed meanwhile: the endpoint is stopping, nobody waits
                pass

        def run() -> None:  # on the reactor
            d = defer.maybeDeferred(_invoke, func, args)
            d.addCallbacks(lambda result: answer(True, result), lambda failure: answer(False, failure.value))

        self.reactor.callFromThread(run)
        return future

    def pusher(self, put: Callable[[Any], None]) -> Callable[[Any], None]:
        """A callable the reactor may call to hand ``put`` an item on the loop (Telemetry's commands)."""

        def push(item: Any) -> None:
            try:
                self.loop.call_soon_threadsafe(put, item)
            except RuntimeError:  # the loop closed: the stream is gone
                pass

        return push


def _invoke(func: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    result = func(*args)
    if asyncio.iscoroutine(result):
        return defer.ensureDeferred(result)
    return result
