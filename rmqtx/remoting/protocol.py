"""The remoting connection as a Twisted protocol, shared by servers and clients.

Frames are length-prefixed (``Int32StringReceiver``). Requests go to a :class:`Dispatcher`;
responses complete the Deferred waiting on their opaque. Either side may send requests.
"""

from __future__ import annotations

import struct
from typing import Any, Awaitable, Callable, Union

from twisted.internet import defer, protocol
from twisted.internet.interfaces import IConsumer, IPushProducer, ITCPTransport
from twisted.logger import Logger
from twisted.protocols.basic import Int32StringReceiver
from twisted.protocols.policies import TimeoutMixin
from twisted.python.failure import Failure

from rmqtx.remoting.bodies import BodyError
from rmqtx.remoting.codes import ONEWAY_FLAG, RESPONSE_FLAG, ResponseCode, request_name
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.header import HeaderError
from rmqtx.remoting.send_now import send_now
from rmqtx.remoting.serializer import MAX_FRAME_BYTES, FrameError, decode_frame_payload, encode_frame_parts

log = Logger(namespace="rmqtx.remoting")
_LENGTH = struct.Struct(">i")

HandlerResult = Union[RemotingCommand, None, "defer.Deferred[RemotingCommand | None]", Awaitable]
Handler = Callable[[RemotingCommand, "RemotingProtocol"], HandlerResult]


class IStreamTransport(ITCPTransport, IConsumer, IPushProducer):
    """What Twisted's TCP connections (TLS-wrapped or not) provide; the protocols here type their
    ``transport`` so (Protocol declares it Optional, but it is set before any callback runs)."""


class RemotingError(Exception):
    """A remote call failed: timeout, closed connection, or an error answer."""


class RemotingTimeoutError(RemotingError):
    """No answer within the timeout."""


class ConnectionClosedError(RemotingError):
    """The connection closed before the answer came."""


class RemotingCommandError(RemotingError):
    """The peer answered with a non-success code; ``code`` and ``remark`` say what it said."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"CODE: {code}  DESC: {remark}")
        self.code = code
        self.remark = remark


def unsupported_remark(code: int) -> str:
    """The remark the Java broker gives for an unknown request code."""
    return f" request type {code} not supported"


class Dispatcher:
    """Processor table keyed by request code, plus connection open/close listeners."""

    def __init__(self) -> None:
        self.processors: dict[int, Handler] = {}
        self.on_open: list[Callable[["RemotingProtocol"], None]] = []
        self.on_close: list[Callable[["RemotingProtocol"], None]] = []
        #: Run at the start of each read, before its frames are handled (the broker's store learns
        #: that the read's end will tell long polling, so its puts schedule nothing).
        self.before_read: list[Callable[[], None]] = []
        #: Run at the end of each read, after its frames are handled and before their answers are
        #: written (the broker tells long polling about the read's puts once, not per message).
        self.after_read: list[Callable[[], None]] = []
        #: One pre-dispatch check (the broker's ACL): returns a refusal to answer, or None to go on.
        self.guard: Callable[[RemotingCommand, "RemotingProtocol"], RemotingCommand | None] | None = None
        #: A compiled shortcut offered each frame before it is decoded, while no guard is set (the
        #: broker's send lane): returns the answer frame (b"" when it answers later), or None when the
        #: frame goes the ordinary way.
        self.lane: Callable[[bytes, "RemotingProtocol"], bytes | None] | None = None

    def register(self, code: int, handler: Handler) -> None:
        self.processors[int(code)] = handler

    def register_many(self, table: dict[int, Handler]) -> None:
        for code, handler in table.items():
            self.register(code, handler)

    def dispatch(self, conn: "RemotingProtocol", request: RemotingCommand) -> None:
        """Run the handler for ``request`` and send its answer (never for oneway requests)."""
        if self.guard is not None:
            refusal = self.guard(request, conn)
            if refusal is not None:
                conn.answer(request, refusal)
                return
        handler = self.processors.get(request.code)
        if handler is None:
            conn.answer(
                request,
                request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, unsupported_remark(request.code)),
            )
            return
        try:
            result = handler(request, conn)
        except Exception as exc:  # a handler bug must not take the connection down
            conn.answer(request, self._error_response(request, Failure(exc), conn))
            return
        if result is None:  # answered already (or oneway)
            return
        if type(result) is RemotingCommand:
            conn.answer(request, result)
        elif isinstance(result, defer.Deferred) or hasattr(result, "__await__"):
            d = result if isinstance(result, defer.Deferred) else defer.ensureDeferred(result)  # type: ignore[arg-type]
            d.addCallbacks(
                lambda resp: conn.answer(request, resp),
                lambda f: conn.answer(request, self._error_response(request, f, conn)),
            )
        else:
            conn.answer(request, result)

    @staticmethod
    def _error_response(request: RemotingCommand, failure: Failure, conn: "RemotingProtocol") -> RemotingCommand:
        exc = failure.value
        if isinstance(exc, BodyError):
            log.warn("bad {code} body from {peer}: {exc}", code=request_name(request.code), peer=conn.peer, exc=exc)
            remark = exc.remark
        elif isinstance(exc, HeaderError):
            remark = f"org.apache.rocketmq.remoting.exception.RemotingCommandException: {exc}"
        else:
            log.failure("handler for {code} failed", failure, code=request_name(request.code))
            remark = f"{type(exc).__name__}: {exc}"
        return request.make_response(ResponseCode.SYSTEM_ERROR, remark)


class RemotingProtocol(Int32StringReceiver, TimeoutMixin):
    """One remoting connection: decodes frames, dispatches requests, matches responses."""

    MAX_LENGTH = MAX_FRAME_BYTES - 4
    #: Set by makeConnection before any other callback runs; a TCP (or TLS-wrapped TCP) transport.
    transport: IStreamTransport

    def __init__(self, dispatcher: Dispatcher | None = None, idle_timeout: float | None = None) -> None:
        self.dispatcher = dispatcher
        self.idle_timeout = idle_timeout
        self.pending: dict[int, defer.Deferred[RemotingCommand]] = {}
        self.closed = False
        self.closing = False
        self.attributes: dict[str, Any] = {}  # per-connection data of the services (client ids...)
        self._close_waiters: list[defer.Deferred[None]] = []
        self._unprocessed = b""
        self._out: list[bytes] | None = None  # frames written while one read is handled

    # -- connection life ------------------------------------------------------------------------
    @property
    def peer(self) -> str:
        """``host:port`` of the other side."""
        addr = self.transport.getPeer()
        return f"{getattr(addr, 'host', '?')}:{getattr(addr, 'port', 0)}"

    def connectionMade(self) -> None:
        if self.idle_timeout:
            self.setTimeout(self.idle_timeout)
        if self.dispatcher:
            for listener in self.dispatcher.on_open:
                listener(self)

    def when_closed(self) -> "defer.Deferred[None]":
        """Fires once this connection is down."""
        if self.closed:
            return defer.succeed(None)
        d: defer.Deferred[None] = defer.Deferred()
        self._close_waiters.append(d)
        return d

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.closed = True
        self.setTimeout(None)
        waiters, self._close_waiters = self._close_waiters, []
        for waiter in waiters:
            waiter.callback(None)
        pending, self.pending = self.pending, {}
        for d in pending.values():
            d.errback(ConnectionClosedError(f"connection to {self.peer} closed"))
        if self.dispatcher:
            for listener in self.dispatcher.on_close:
                try:
                    listener(self)
                except Exception:
                    log.failure("connection close listener failed")

    def timeoutConnection(self) -> None:
        log.info("closing {peer}: silent for {secs} s", peer=self.peer, secs=self.idle_timeout)
        self.transport.loseConnection()

    def close(self, why: str) -> None:
        """Close this connection only, saying why in the log."""
        if not self.closing:
            self._flush_out()
            self.closing = True
            log.warn("closing connection from {peer}: {why}", peer=self.peer, why=why)
            self.transport.loseConnection()

    # -- frames in ------------------------------------------------------------------------------
    def dataReceived(self, data: bytes) -> None:
        """Handle every whole frame of this read; their answers leave in one write at the end."""
        if self.closing:
            return
        if self.idle_timeout:
            self.resetTimeout()
        buf = self._unprocessed + data if self._unprocessed else data
        size = len(buf)
        pos = 0
        max_length = self.MAX_LENGTH
        outer = self._out is None  # a nested read (a handler feeding data) joins the outer batch
        if outer:
            self._out = []
        try:
            if outer:
                dispatcher = self.dispatcher
                if dispatcher is not None and dispatcher.before_read:
                    for fn in dispatcher.before_read:
                        fn()
            while size - pos >= 4 and not self.paused:
                (length,) = _LENGTH.unpack_from(buf, pos)
                if length > max_length or length < 0:
                    self._unprocessed = b""
                    self.lengthLimitExceeded(length)
                    return
                end = pos + 4 + length
                if end > size:
                    break
                payload = buf[pos + 4 : end]
                pos = end
                self.stringReceived(payload)
                if self.closing:
                    return
            self._unprocessed = buf[pos:] if pos else buf
        finally:
            if outer:
                dispatcher = self.dispatcher
                if dispatcher is not None and dispatcher.after_read:
                    for fn in dispatcher.after_read:
                        try:
                            fn()
                        except Exception:
                            log.failure("after-read hook failed")
                self._flush_out()

    def _flush_out(self) -> None:
        out, self._out = self._out, None
        if out and not self.closed:
            if not send_now(self.transport, out):
                self.transport.writeSequence(out)

    def lengthLimitExceeded(self, length: int) -> None:
        self.close(f"frame length {length} out of range (1..{self.MAX_LENGTH})")

    def stringReceived(self, payload: bytes) -> None:
        if self.closing:
            return
        dispatcher = self.dispatcher
        if dispatcher is not None and dispatcher.lane is not None and dispatcher.guard is None:
            try:
                answer = dispatcher.lane(payload, self)
            except Exception:  # a state it did not expect, met before it wrote: the ordinary path from now on
                log.failure("the send lane failed; sends take the ordinary path from now on")
                dispatcher.lane = answer = None
            if answer is not None:  # b"": stored, answered once synced (SYNC_FLUSH)
                if answer:
                    self.send_frame(answer)
                return
        try:
            cmd = decode_frame_payload(payload)
        except FrameError as exc:
            self.close(f"malformed frame: {exc}")
            return
        if cmd.flag & RESPONSE_FLAG:
            d = self.pending.pop(cmd.opaque, None)
            if d is None:
                log.debug("answer {opaque} from {peer} came after its timeout", opaque=cmd.opaque, peer=self.peer)
            else:
                d.callback(cmd)
        elif self.dispatcher is not None:
            self.dispatcher.dispatch(self, cmd)
        elif not cmd.is_oneway:
            self.answer(cmd, cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, unsupported_remark(cmd.code)))

    # -- frames out -----------------------------------------------------------------------------
    def send(self, cmd: RemotingCommand) -> None:
        """Write one command; quietly dropped when the connection is gone."""
        if not self.closed:
            out = self._out
            if out is None:
                held = _held
                if held is None:
                    self.transport.writeSequence(encode_frame_parts(cmd))
                    return
                self._out = out = []
                held.append(self)
            out += encode_frame_parts(cmd)

    def send_frame(self, frame: bytes) -> None:
        """Write one already encoded frame (an answer built straight into bytes), as :meth:`send` would."""
        if not self.closed:
            out = self._out
            if out is None:
                held = _held
                if held is None:
                    self.transport.write(frame)
                    return
                self._out = out = []
                held.append(self)
            out.append(frame)

    def answer(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        """Send ``response`` to ``request`` unless the request was oneway."""
        if response is None or request.flag & ONEWAY_FLAG:
            return
        response.opaque = request.opaque
        response.flag |= RESPONSE_FLAG
        if response.serialize_type is None:
            response.serialize_type = request.serialize_type
        self.send(response)

    def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> "defer.Deferred[RemotingCommand]":
        """Send a request and wait for its answer (matched by opaque) at most ``timeout`` s."""
        if self.closed:
            return defer.fail(ConnectionClosedError(f"connection to {self.peer} is closed"))
        from twisted.internet import reactor

        d: defer.Deferred[RemotingCommand] = defer.Deferred()
        opaque = request.opaque
        self.pending[opaque] = d

        def expire() -> None:
            waiting = self.pending.pop(opaque, None)
            if waiting is not None:
                waiting.errback(RemotingTimeoutError(f"no answer from {self.peer} within {timeout} s"))

        call = reactor.callLater(timeout, expire)

        def done(result: object) -> object:
            if call.active():
                call.cancel()
            return result

        d.addBoth(done)
        self.send(request)
        return d

    def invoke_oneway(self, request: RemotingCommand) -> None:
        request.mark_oneway()
        self.send(request)


class RemotingServerFactory(protocol.ServerFactory):
    """Accepts connections that all share one :class:`Dispatcher`."""

    def __init__(self, dispatcher: Dispatcher, idle_timeout: float | None = 120.0) -> None:
        self.dispatcher = dispatcher
        self.idle_timeout = idle_timeout
        self.connections: set[RemotingProtocol] = set()
        dispatcher.on_open.append(self.connections.add)
        dispatcher.on_close.append(self.connections.discard)

    def buildProtocol(self, addr: object) -> RemotingProtocol:
        proto = RemotingProtocol(self.dispatcher, self.idle_timeout)
        proto.factory = self
        return proto

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.transport.loseConnection()


_held: list[RemotingProtocol] | None = None  # connections whose writes batch_writes holds


def batch_writes(fn: Callable[[], None]) -> None:
    """Run ``fn`` holding every connection's writes, then send each connection's in one write.

    For answers released together outside a read (a group commit covering many sends): one
    socket write per connection instead of one Twisted write per answer and a later poll.
    """
    global _held
    if _held is not None:  # nested: the outer call sends
        fn()
        return
    held: list[RemotingProtocol] = []
    _held = held
    try:
        fn()
    finally:
        _held = None
        for conn in held:
            conn._flush_out()
