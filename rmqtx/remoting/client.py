"""RemotingClient: connections by address, invoke with timeouts, oneway, reconnect on demand."""

from __future__ import annotations

from typing import Callable

from twisted.internet import defer, protocol
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IReactorTCP
from twisted.python.failure import Failure
from twisted.logger import Logger

from rmqtx.remoting.codes import ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import Dispatcher, RemotingCommandError, RemotingError, RemotingProtocol

log = Logger(namespace="rmqtx.remoting.client")


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` as a (host, port) pair."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {addr!r}")
    return host.strip("[]"), int(port)


class _ClientFactory(protocol.Factory):
    def __init__(self, dispatcher: Dispatcher | None) -> None:
        self.dispatcher = dispatcher

    def buildProtocol(self, addr: object) -> RemotingProtocol:
        return RemotingProtocol(self.dispatcher)


class RemotingClient:
    """Talks to many servers; one cached connection per address, rebuilt when it drops.

    ``dispatcher`` answers requests the servers send (CHECK_TRANSACTION_STATE,
    NOTIFY_CONSUMER_IDS_CHANGED); without one they get REQUEST_CODE_NOT_SUPPORTED.
    """

    def __init__(
        self,
        reactor: IReactorTCP | None = None,
        *,
        connect_timeout: float = 3.0,
        dispatcher: Dispatcher | None = None,
        signer: "Callable[[RemotingCommand], None] | None" = None,
        tls: IOpenSSLClientConnectionCreator | None = None,
    ) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.connect_timeout = connect_timeout
        self.dispatcher = dispatcher
        self.signer = signer  # e.g. rmqtx.acl.signing.RequestSigner: runs on each request just before it goes out
        self.tls = tls  # client TLS options (rmqtx.remoting.tls.TlsClientSettings.options()), None for plain TCP
        self._connections: dict[str, RemotingProtocol] = {}
        self._connecting: dict[str, list[defer.Deferred[RemotingProtocol]]] = {}

    def connection(self, addr: str) -> "defer.Deferred[RemotingProtocol]":
        """The live connection to ``addr``, connecting first when there is none."""
        conn = self._connections.get(addr)
        if conn is not None and not conn.closed:
            return defer.succeed(conn)
        waiter: defer.Deferred[RemotingProtocol] = defer.Deferred()
        if addr in self._connecting:
            self._connecting[addr].append(waiter)
            return waiter
        self._connecting[addr] = [waiter]
        host, port = split_addr(addr)
        if self.tls is None:
            # plain TCP without endpoints: importing them loads the TLS stack (OpenSSL) at start-up
            d = protocol.ClientCreator(self.reactor, RemotingProtocol, self.dispatcher).connectTCP(
                host, port, timeout=self.connect_timeout)
        else:
            from twisted.internet import endpoints

            endpoint = endpoints.wrapClientTLS(
                self.tls, endpoints.TCP4ClientEndpoint(self.reactor, host, port, timeout=self.connect_timeout))
            d = endpoint.connect(_ClientFactory(self.dispatcher))

        def connected(proto: RemotingProtocol) -> None:
            self._connections[addr] = proto
            for w in self._connecting.pop(addr, []):
                w.callback(proto)

        def failed(failure: Failure) -> None:
            for w in self._connecting.pop(addr, []):
                w.errback(failure)

        d.addCallbacks(connected, failed)
        return waiter

    async def _invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        conn = await self.connection(addr)
        if self.signer is not None:
            self.signer(request)
        return await conn.invoke(request, timeout)

    def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> "defer.Deferred[RemotingCommand]":
        """Send ``request`` to ``addr`` and return its answer, whatever its code."""
        return defer.ensureDeferred(self._invoke(addr, request, timeout))

    def invoke_checked(
        self, addr: str, request: RemotingCommand, timeout: float = 3.0, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)
    ) -> "defer.Deferred[RemotingCommand]":
        """Like :meth:`invoke`, but an answer code outside ``ok`` fails with RemotingCommandError."""

        def check(resp: RemotingCommand) -> RemotingCommand:
            if resp.code not in ok:
                raise RemotingCommandError(resp.code, resp.remark)
            return resp

        return self.invoke(addr, request, timeout).addCallback(check)

    async def _oneway(self, addr: str, request: RemotingCommand) -> None:
        conn = await self.connection(addr)
        if self.signer is not None:
            self.signer(request)
        conn.invoke_oneway(request)

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> "defer.Deferred[None]":
        """Send ``request`` without waiting for an answer (once connected)."""
        return defer.ensureDeferred(self._oneway(addr, request))

    def close(self) -> "defer.Deferred[None]":
        """Close every connection; fires when they are all down."""
        waits = []
        for conn in self._connections.values():
            if not conn.closed:
                waits.append(conn.when_closed())
                conn.transport.loseConnection()
        self._connections.clear()
        return defer.DeferredList(waits).addCallback(lambda _: None)


__all__ = ["RemotingClient", "RemotingError", "split_addr"]
