"""BrokerService: store, tables, processors and the listening port, as one Twisted service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from twisted.application import service
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IListeningPort
from twisted.logger import Logger

from rmqtx.broker.clients import ClientManager
from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.context import BrokerContext
from rmqtx.broker.filters import ConsumerFilterManager
from rmqtx.broker.groups import SubscriptionGroupManager
from rmqtx.broker.ha.role import HARole
from rmqtx.broker.locks import RebalanceLockManager
from rmqtx.broker.long_polling import PullHoldService
from rmqtx.broker.offsets import ConsumerOffsetManager
from rmqtx.broker.pop.service import PopService
from rmqtx.broker.processors import ALL as PROCESSORS
from rmqtx.broker.registration import NamesrvRegistrar
from rmqtx.broker.schedule import ScheduleMessageService
from rmqtx.broker.stats import BrokerStats
from rmqtx.broker.timer import TimerMessageService
from rmqtx.broker.topics import TopicConfigManager
from rmqtx.broker.transactions import TransactionService
from rmqtx.console import ConsoleConfig, start_console
from rmqtx.remoting.client import RemotingClient
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import Dispatcher, RemotingProtocol, RemotingServerFactory, batch_writes
from rmqtx.remoting.tls import listening_factory
from rmqtx.startup import StartupError, listen_failure, missing_extra, os_failure
from rmqtx.store.mapped_file import StoreError
from rmqtx.store.message_store import MessageStore

if TYPE_CHECKING:
    from rmqtx.acl.service import AclService

log = Logger(namespace="rmqtx.broker")
#: Java persists config/consumerFilter.json on a 10 s timer too.
FILTER_PERSIST_SECONDS = 10.0


class BrokerService(service.Service):
    """A RocketMQ broker: ``startService`` recovers the store, then listens and registers."""

    def __init__(self, config: BrokerConfig, reactor=None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.config = config
        self.dispatcher = Dispatcher()
        self.factory = RemotingServerFactory(self.dispatcher, idle_timeout=config.channelExpiredTimeout / 1000)
        self.port: IListeningPort | None = None
        self.fast_port: Any = None
        self.grpc: Any = None  # rmqtx.grpc.server.GrpcEndpoint when grpcPort is set
        self.ctx: BrokerContext | None = None
        self._offset_flush: task.LoopingCall | None = None
        self._filter_flush: task.LoopingCall | None = None
        self._namesrv_client = RemotingClient(reactor, tls=config.tls.client.options())
        self.acl: "AclService | None" = None
        self.console_config: ConsoleConfig = config.console
        self.console_port = None  # the web console and /metrics (rmqtx.console), when consolePort is set

    @property
    def namesrv_client(self) -> RemotingClient:
        """The client the broker talks to its NameServers with (the console reuses it)."""
        return self._namesrv_client

    # -- wiring -----------------------------------------------------------------------------
    def _notify_consumers(self, group: str, conns: list[RemotingProtocol]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED, oneway and in JSON, to each member of ``group``."""
        for conn in conns:
            conn.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}))

    def _build(self) -> BrokerContext:
        cfg = self.config
        store = MessageStore(cfg.store)
        store.flush.release_hook = batch_writes  # answers a group commit releases leave one write per connection
        topics = TopicConfigManager(cfg, cfg.storePathRootDir)
        clients = ClientManager(self._notify_consumers)
        offsets = ConsumerOffsetManager(cfg.storePathRootDir)
        holds = PullHoldService(self.reactor)
        schedule = ScheduleMessageService(store, cfg.storePathRootDir, cfg.messageDelayLevel)
        filters = ConsumerFilterManager(cfg, lambda group: clients.consumer_group(group) is not None)
        ctx = BrokerContext(
            config=cfg,
            store=store,
            topics=topics,
            groups=SubscriptionGroupManager(cfg, cfg.storePathRootDir),
            offsets=offsets,
            clients=clients,
            holds=holds,
            registrar=NamesrvRegistrar(cfg, topics, self._namesrv_client),
            schedule=schedule,
            locks=RebalanceLockManager(),
            transactions=TransactionService(cfg, store, topics, offsets, clients, lambda: (cfg.brokerIP1, cfg.listenPort),
                                          schedule=schedule),
            filters=filters,
            stats=BrokerStats(),
        )
        ctx.ha = HARole(ctx, self._namesrv_client, self.reactor)
        ctx.timer = TimerMessageService(store, cfg.storePathRootDir, cfg.timer, reactor=self.reactor)
        ctx.transactions.timer = ctx.timer
        ctx.registrar.on_registered.append(ctx.ha.on_registered)
        ctx.pop = PopService(ctx, self.reactor)
        for processor_class in PROCESSORS:
            self.dispatcher.register_many(processor_class(ctx).table())
        if cfg.aclEnable:
            from rmqtx.acl.service import AclService, default_acl_path  # only when on: it loads YAML

            self.acl = AclService(
                default_acl_path(cfg.aclFilePath), lambda: (cfg.brokerClusterName, cfg.brokerName, cfg.broker_addr), self.reactor
            )
            self.dispatcher.register_many(self.acl.table_of_handlers())  # with ACL off they stay "not supported"
        self.dispatcher.on_close.append(clients.connection_closed)
        store.add_arrival_listener(holds.notify_arrival)
        store.add_arrival_listener(ctx.stats.on_arrival)
        store.add_arrival_listener(ctx.pop.holds.notify_arrival)
        self.dispatcher.after_read.append(store.flush_arrivals)
        if cfg.enableCalcFilterBitMap:
            store.set_bitmap_calculator(filters.calc_bitmap)
        return ctx

    # -- life -------------------------------------------------------------------------------
    def startService(self) -> None:
        """Blocking recovery first (the broker serves nothing until its store is sound)."""
        try:
            ctx = self.ctx = self._build()
        except ValueError as e:  # a broker.conf setting the store or the role check refuses
            raise StartupError(str(e)) from None
        root = self.config.storePathRootDir
        try:
            ctx.store.load()
        except StoreError as e:
            raise StartupError(str(e)) from None
        except OSError as e:
            raise os_failure(f"cannot open the store {root}", e) from None
        try:
            self._start_loaded(ctx)
        except BaseException:
            ctx.store.shutdown()  # unlocked, and no abort file left behind: the next start is clean
            raise

    def _start_loaded(self, ctx: BrokerContext) -> None:
        ctx.topics.load()
        ctx.groups.load()
        ctx.offsets.load()
        ctx.schedule.load()
        if not self.config.is_slave:
            ctx.timer.load()
        ctx.transactions.load()
        ctx.filters.load()
        if self.acl is not None:
            from rmqtx.acl.plain import AclConfigError

            try:
                self.acl.load()
            except AclConfigError as e:  # refused as Java refuses it, said in one line
                raise StartupError(f"the ACL file {self.acl.path}: {e}") from None
            self.acl.start()
            self.dispatcher.guard = self.acl.guard
        ephemeral = self.config.listenPort == 0
        listening = listening_factory(self.factory, self.config.tls.server)
        try:
            self.port = self.reactor.listenTCP(self.config.listenPort, listening, interface=self.config.listenAddress)
        except CannotListenError as e:
            raise listen_failure("the broker", e) from None
        if ephemeral:
            self.config.update(listenPort=cast(IPv4Address, self.port.getHost()).port)
        else:
            self._listen_fast(listening)
        ctx.store.start(self.reactor)
        ctx.pop.load()  # replays the revive topic: needs the running store
        if not self.config.is_slave:  # a slave neither delivers delayed messages nor checks transactions
            ctx.schedule.start()
            ctx.timer.start()
            ctx.transactions.start()
        ctx.pop.start()
        ctx.ha.start(ephemeral)
        ctx.topics.persist()  # in a thread: its fsync took ~0.1 s of start-up on the reactor; stop drains it
        self._offset_flush = task.LoopingCall(ctx.offsets.persist)
        self._offset_flush.start(self.config.flushConsumerOffsetInterval / 1000, now=False)
        self._filter_flush = task.LoopingCall(ctx.filters.persist)
        self._filter_flush.start(FILTER_PERSIST_SECONDS, now=False)
        if self.config.namesrv_addrs:
            ctx.registrar.start()
        self.console_port = start_console(self, self.console_config, self.reactor)
        self._start_grpc()
        log.info(
            "broker {name} listening on {addr}, store {root}",
            name=self.config.brokerName,
            addr=self.config.broker_addr,
            root=self.config.storePathRootDir,
        )
        super().startService()

    def _listen_fast(self, listening: Any) -> None:
        """Java's second server on listenPort - 2 (its "VIP channel"): a Java slave fetches the master's
        topic config there. A port taken is logged, as the broker serves on without it."""
        port = self.config.listenPort - 2
        if port <= 0:
            return
        try:
            self.fast_port = self.reactor.listenTCP(port, listening, interface=self.config.listenAddress)
        except CannotListenError as e:
            log.warn("cannot listen on the fast port {port} (listenPort - 2): {why}", port=port, why=e.socketError)

    def _start_grpc(self) -> None:
        """The gRPC endpoint for the 5.x SDKs, when ``grpcPort`` is set (off by default)."""
        settings = self.config.grpc
        if settings.port is None:
            return
        try:
            import grpc  # noqa: F401  (the 'grpc' extra: grpcio and protobuf)

            from rmqtx.grpc.server import GrpcEndpoint
            from rmqtx.grpc.stubs import StubsMissing, find_stubs_dir
        except ImportError as e:
            raise missing_extra("grpcPort", "grpc", e) from None
        try:
            find_stubs_dir()
        except StubsMissing as e:
            raise StartupError(str(e)) from None
        self.grpc = GrpcEndpoint(self, settings.port, settings.listen_address, self.reactor)
        self.grpc.startService()

    async def _stop(self) -> None:
        ctx = self.ctx
        grpc_endpoint, self.grpc = self.grpc, None
        if grpc_endpoint is not None:
            await grpc_endpoint.stopService()
        if self.console_port is not None:
            await self.console_port.stopListening()
        if self.port is not None:
            await defer.maybeDeferred(self.port.stopListening)
        if self.fast_port is not None:
            await self.fast_port.stopListening()
        if ctx is not None:
            for loop in (self._offset_flush, self._filter_flush):
                if loop is not None and loop.running:
                    loop.stop()
            await ctx.registrar.stop()
            await ctx.ha.stop()
            ctx.holds.stop()
            ctx.pop.stop()
            ctx.schedule.stop()
            await ctx.timer.drain()
            ctx.transactions.stop()
        if self.acl is not None:
            self.acl.stop()
        self.factory.close_all()
        await self._namesrv_client.close()
        if ctx is not None:
            for config_file in (ctx.topics.file, ctx.groups.file, ctx.offsets.file, ctx.schedule.file, ctx.filters.file,
                                ctx.pop.modes.file):
                await config_file.drain()
            ctx.offsets.persist_now()
            ctx.filters.persist_now()
            ctx.schedule.persist_now()
            ctx.timer.shutdown()
            ctx.store.shutdown()

    def stopService(self) -> "defer.Deferred[None]":
        super().stopService()
        return defer.ensureDeferred(self._stop())
