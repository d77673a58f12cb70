"""The broker's parts as Twisted services, each a child of :class:`rmqtx.broker.service.BrokerService`.

Each starts what it owns and stops it again; the broker adds them in start order and stops them in
reverse, one after another (:class:`rmqtx.services.OrderedServices`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from twisted.application import service
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IListeningPort
from twisted.logger import Logger

from rmqtx.remoting.tls import listening_factory
from rmqtx.startup import StartupError, listen_failure, os_failure
from rmqtx.store.mapped_file import StoreError

if TYPE_CHECKING:
    from rmqtx.acl.service import AclService
    from rmqtx.acl2.service import AuthService
    from rmqtx.broker.config import BrokerConfig
    from rmqtx.broker.context import BrokerContext
    from rmqtx.remoting.protocol import Dispatcher, RemotingServerFactory
    from rmqtx.store.message_store import MessageStore

log = Logger(namespace="rmqtx.broker")
#: Java persists config/consumerFilter.json on a 10 s timer too.
FILTER_PERSIST_SECONDS = 10.0


class StoreService(service.Service):
    """Blocking recovery first (the broker serves nothing until its store is sound); closed last."""

    name = "store"

    def __init__(self, store: "MessageStore", root: str) -> None:
        self.store = store
        self.root = root

    def startService(self) -> None:
        try:
            self.store.load()
        except StoreError as e:
            raise StartupError(str(e)) from None
        except OSError as e:
            raise os_failure(f"cannot open the store {self.root}", e) from None
        super().startService()

    def abandon(self) -> None:
        """A later part failed to start: unlocked, and no abort file left behind, so the next start is clean."""
        self.running = 0
        self.store.shutdown()

    def stopService(self) -> None:
        super().stopService()
        self.store.shutdown()


class ConfigFiles(service.Service):
    """The JSON tables under config/ (and the timer's files): read before anything listens; drained and
    written a last time just before the store closes."""

    name = "config files"

    def __init__(self, ctx: "BrokerContext") -> None:
        self.ctx = ctx

    def startService(self) -> None:
        ctx = self.ctx
        ctx.topics.load()
        ctx.groups.load()
        ctx.offsets.load()
        ctx.schedule.load()
        ctx.timer.load()  # a slave's timer follows the master's, to deliver if it takes over
        ctx.transactions.load()
        ctx.filters.load()
        super().startService()

    async def _stop(self) -> None:
        ctx = self.ctx
        for config_file in (ctx.topics.file, ctx.groups.file, ctx.offsets.file, ctx.schedule.file, ctx.filters.file,
                            ctx.pop.modes.file):
            await config_file.drain()
        ctx.offsets.persist_now()
        ctx.filters.persist_now()
        ctx.schedule.persist_now()
        ctx.timer.shutdown()

    def stopService(self) -> "defer.Deferred[None]":
        super().stopService()
        return defer.ensureDeferred(self._stop())


class AclGuard(service.Service):
    """The ACL file read (a bad one stops start-up), watched for changes, and its guard on the dispatcher."""

    name = "acl"

    def __init__(self, acl: "AclService", dispatcher: "Dispatcher") -> None:
        self.acl = acl
        self.dispatcher = dispatcher

    def startService(self) -> None:
        from rmqtx.acl.plain import AclConfigError

        try:
            self.acl.load()
        except AclConfigError as e:  # refused as Java refuses it, said in one line
            raise StartupError(f"the ACL file {self.acl.path}: {e}") from None
        self.acl.start()
        self.dispatcher.guard = self.acl.guard
        super().startService()

    def stopService(self) -> None:
        super().stopService()
        self.acl.stop()


class AuthGuard(service.Service):
    """ACL 2.0: users and ACLs read (a bad store stops start-up), the initial users made, and the guard
    on the dispatcher when authentication or authorization is on."""

    name = "acl2"

    def __init__(self, auth: "AuthService", dispatcher: "Dispatcher") -> None:
        self.auth = auth
        self.dispatcher = dispatcher

    def startService(self) -> None:
        try:
            self.auth.load()
        except (ValueError, OSError) as e:
            raise StartupError(str(e)) from None
        if self.auth.settings.authentication or self.auth.settings.authorization:
            self.dispatcher.guard = self.auth.guard
        super().startService()

    def stopService(self) -> "defer.Deferred[None]":
        """The databases closed (and unlocked) after the writes under way, as Apache's shutdown does."""
        super().stopService()
        return defer.ensureDeferred(self.auth.store.close())


class RemotingListener(service.Service):
    """The broker's port and Java's second one on listenPort - 2 (its "VIP channel"), where a Java slave
    fetches the master's topic config.

    They stop listening before any other part stops (:meth:`stop_listening`, called first by the broker);
    the connections they accepted close late, in the broker's "connections" step.
    """

    name = "remoting"

    def __init__(self, factory: "RemotingServerFactory", config: "BrokerConfig", reactor: Any) -> None:
        self.factory = factory
        self.config = config
        self.reactor = reactor
        self.port: IListeningPort | None = None
        self.fast_port: Any = None
        #: listenPort was 0 (tests): the port is any free one, and so is HA's unless haListenPort is set
        self.ephemeral = False

    def startService(self) -> None:
        cfg = self.config
        self.ephemeral = cfg.listenPort == 0
        listening = listening_factory(self.factory, cfg.tls.server)
        try:
            self.port = self.reactor.listenTCP(cfg.listenPort, listening, interface=cfg.listenAddress)
        except CannotListenError as e:
            raise listen_failure("the broker", e) from None
        if self.ephemeral:
            cfg.update(listenPort=cast(IPv4Address, self.port.getHost()).port)
        else:
            self._listen_fast(listening)
        super().startService()

    def _listen_fast(self, listening: Any) -> None:
        """A port taken is logged, as the broker serves on without it."""
        port = self.config.listenPort - 2
        if port <= 0:
            return
        try:
            self.fast_port = self.reactor.listenTCP(port, listening, interface=self.config.listenAddress)
        except CannotListenError as e:
            log.warn("cannot listen on the fast port {port} (listenPort - 2): {why}", port=port, why=e.socketError)

    async def stop_listening(self) -> None:
        port, self.port = self.port, None
        fast_port, self.fast_port = self.fast_port, None
        if port is not None:
            await defer.maybeDeferred(port.stopListening)
        if fast_port is not None:
            await fast_port.stopListening()

    def stopService(self) -> "defer.Deferred[None]":
        super().stopService()
        return defer.ensureDeferred(self.stop_listening())  # nothing left to do when the broker closed them first


class Deliveries(service.Service):
    """Delay levels, timer messages and transaction check-backs: started on a master only (a slave neither
    delivers delayed messages nor checks transactions; its timer follows the master's), stopped on either."""

    name = "schedule, timer, transactions"

    def __init__(self, ctx: "BrokerContext") -> None:
        self.ctx = ctx

    def startService(self) -> None:
        if not self.ctx.config.is_slave:
            self.ctx.schedule.start()
            self.ctx.timer.start()
            self.ctx.transactions.start()
        else:
            self.ctx.timer.follow()
        super().startService()

    async def _stop(self) -> None:
        self.ctx.schedule.stop()
        await self.ctx.timer.drain()
        self.ctx.transactions.stop()

    def stopService(self) -> "defer.Deferred[None]":
        super().stopService()
        return defer.ensureDeferred(self._stop())


class Upkeep(service.Service):
    """topics.json written once at start, consumer offsets and filters persisted on timers, and the
    NameServer registration (when namesrvAddr is set): last to start, first to stop (timers, then the
    unregistration)."""

    name = "registration and persists"

    def __init__(self, ctx: "BrokerContext") -> None:
        self.ctx = ctx
        self._loops: list[task.LoopingCall] = []

    def startService(self) -> None:
        ctx = self.ctx
        ctx.topics.persist()  # in a thread: its fsync took ~0.1 s of start-up on the reactor; stop drains it
        for persist, seconds in ((ctx.offsets.persist, ctx.config.flushConsumerOffsetInterval / 1000),
                                 (ctx.filters.persist, FILTER_PERSIST_SECONDS)):
            loop = task.LoopingCall(persist)
            loop.start(seconds, now=False)
            self._loops.append(loop)
        if ctx.config.namesrv_addrs and not ctx.config.controller.enabled:  # controller mode: once it has a role
            ctx.registrar.start()
        super().startService()

    async def _stop(self) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []
        await self.ctx.registrar.stop()

    def stopService(self) -> "defer.Deferred[None]":
        super().stopService()
        return defer.ensureDeferred(self._stop())
