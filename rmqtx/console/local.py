"""Run a broker request handler in-process, so console actions take the same code path as mqadmin's."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer

from rmqtx.remoting.codes import ResponseCode
from rmqtx.remoting.command import RemotingCommand

#: What the send processor records as born host for console messages.
CONSOLE_HOST = ("127.0.0.1", 0)


class LocalConnection:
    """The few parts of a RemotingProtocol handlers touch; ``answer`` completes the caller's Deferred."""

    peer = "127.0.0.1:0"
    closed = False
    closing = False

    def __init__(self, done: "defer.Deferred[RemotingCommand]") -> None:
        self.attributes: dict[str, object] = {"send.born_host": CONSOLE_HOST}
        self._done = done

    def answer(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if self._done.called:
            return
        if response is None:  # a handler that answers nothing (oneway) has nothing for the console
            self._done.errback(RuntimeError(f"the broker gave no answer to code {request.code}"))
        else:
            self._done.callback(response)

    def invoke_oneway(self, request: RemotingCommand) -> None:  # nothing listens at the console's end
        return None


def local_call(dispatcher: Any, code: int, fields: dict | None = None, body: bytes = b"") -> "defer.Deferred[RemotingCommand]":
    """The broker's answer to one request built here (no ACL guard: the console checks its own admin)."""
    request = RemotingCommand.request(code, fields, body)
    handler = dispatcher.processors.get(int(code))
    done: defer.Deferred[RemotingCommand] = defer.Deferred()
    if handler is None:
        return defer.succeed(request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"code {code} not supported"))
    conn = LocalConnection(done)
    try:
        result = handler(request, conn)
    except Exception:
        return defer.fail()
    if result is None:
        return done  # answered later through conn.answer (a synchronous flush)
    if isinstance(result, RemotingCommand):
        return defer.succeed(result)
    return defer.ensureDeferred(result) if not isinstance(result, defer.Deferred) else result
