"""NamesrvService: one NameServer (listener, route tables, KV config, liveness scan) as a Twisted service."""

from __future__ import annotations

from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer, task
from twisted.internet.protocol import connectionDone
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IListeningPort
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqtx.remoting.tls import listening_factory
from rmqtx.namesrv.config import NamesrvConfig
from rmqtx.namesrv.kv_config import KVConfigManager
from rmqtx.namesrv.processor import NamesrvProcessor
from rmqtx.namesrv.route_info import RouteInfoManager
from rmqtx.remoting import Dispatcher, RemotingServerFactory
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.startup import listen_failure, os_failure

log = Logger(namespace="rmqtx.namesrv")


class NamesrvService(service.MultiService):
    """A NameServer. Several may run side by side, each with its own port and KV file.

    ``clock`` returns the time in seconds; when it is a bound method of an object that can also
    schedule (``task.Clock().seconds``), the liveness scan runs on that object too, so tests
    drive expiry with ``clock.advance()``.
    """

    def __init__(self, config: NamesrvConfig, reactor: Any = None, clock: Callable[[], float] | None = None) -> None:
        super().__init__()
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config
        self.reactor = reactor
        self.clock = clock or reactor.seconds
        owner = getattr(self.clock, "__self__", None)
        self.scheduler = owner if owner is not None and hasattr(owner, "callLater") else reactor
        self.route_info = RouteInfoManager(self.clock, config.brokerChannelExpiredTime)
        self.kv_config = KVConfigManager(config.kvConfigPath)
        self.processor = NamesrvProcessor(config, self.route_info, self.kv_config)
        self.dispatcher = Dispatcher()
        self.processor.install(self.dispatcher)
        self.dispatcher.on_close.append(self.route_info.on_connection_closed)
        self.factory = RemotingServerFactory(self.dispatcher, idle_timeout=config.serverChannelMaxIdleTimeSeconds or None)
        self.port: IListeningPort | None = None
        self._scan: task.LoopingCall | None = None
        #: Log "boot success" at start; rmqstandalone logs it itself once its broker is up too.
        self.announce = True

    def startService(self) -> None:
        try:
            self.kv_config.load()  # blocking, once, before serving
        except OSError as e:
            raise os_failure("the NameServer cannot read its KV config", e) from None
        listening = listening_factory(self.factory, self.config.tls)
        try:
            self.port = self.reactor.listenTCP(self.config.listenPort, listening, interface=self.config.listenAddress)
        except CannotListenError as e:
            raise listen_failure("the NameServer", e) from None
        self._scan = task.LoopingCall(self.scan_not_active_broker)
        self._scan.clock = self.scheduler
        self._scan.start(self.config.scanNotActiveBrokerInterval / 1000.0, now=False)
        super().startService()
        if self.announce:
            self.announce_boot()

    def announce_boot(self) -> None:
        assert self.port is not None
        log.info("The Name Server boot success. listening on {host}:{port}",
                 host=self.config.listenAddress, port=getattr(self.port.getHost(), "port", self.config.listenPort))

    def scan_not_active_broker(self) -> None:
        """Drop silent brokers and close their connections."""
        for conn in self.route_info.scan_not_active_broker():
            transport = getattr(conn, "transport", None)
            if transport is not None:
                transport.loseConnection()

    def stopService(self) -> defer.Deferred:
        super().stopService()
        if self._scan is not None and self._scan.running:
            self._scan.stop()
        waits = [self.kv_config.flushed()]
        if self.port is not None:
            waits.append(defer.maybeDeferred(self.port.stopListening))
        for conn in list(self.factory.connections):
            waits.append(_closed(conn))
        self.factory.close_all()
        return defer.DeferredList(waits, consumeErrors=True).addCallback(lambda _: None)


def _closed(conn: RemotingProtocol) -> defer.Deferred:
    """A Deferred that fires once ``conn`` has been torn down."""
    if conn.closed:
        return defer.succeed(None)
    done: defer.Deferred = defer.Deferred()
    original = conn.connectionLost

    def lost(reason: Failure = connectionDone) -> None:
        try:
            original(reason)
        finally:
            if not done.called:
                done.callback(None)

    conn.connectionLost = lost  # type: ignore[method-assign]  # wrapped on this one connection only
    return done
