"""BrokerService: the broker's parts (store, tables, processors, ports, HA, POP ...) as one Twisted service.

The console and the gRPC endpoint are not among them: ``rmqtx.launcher`` adds those beside the broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet.interfaces import IListeningPort
from twisted.logger import Logger

from rmqtx.broker.clients import ClientManager
from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.context import BrokerContext
from rmqtx.broker.core import BrokerCore
from rmqtx.broker.filters import ConsumerFilterManager
from rmqtx.broker.groups import SubscriptionGroupManager
from rmqtx.broker.ha.role import HARole
from rmqtx.broker.locks import RebalanceLockManager
from rmqtx.broker.long_polling import PullHoldService
from rmqtx.broker.offsets import ConsumerOffsetManager
from rmqtx.broker.parts import AclGuard, AuthGuard, ConfigFiles, Deliveries, RemotingListener, StoreService, Upkeep
from rmqtx.broker.pop.service import PopService
from rmqtx.broker.processors import ALL as PROCESSORS
from rmqtx.broker.processors.send import SendProcessor
from rmqtx.broker.registration import NamesrvRegistrar
from rmqtx.broker.schedule import ScheduleMessageService
from rmqtx.broker.stats import BrokerStats
from rmqtx.broker.timer import TimerMessageService
from rmqtx.broker.topics import TopicConfigManager
from rmqtx.broker.transactions import TransactionService
from rmqtx.remoting.client import RemotingClient
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import Dispatcher, RemotingProtocol, RemotingServerFactory, batch_writes
from rmqtx.services import OrderedServices, Step
from rmqtx.startup import StartupError, missing_extra
from rmqtx.store.message_store import MessageStore

if TYPE_CHECKING:
    from rmqtx.acl.service import AclService
    from rmqtx.acl2.service import AuthService

log = Logger(namespace="rmqtx.broker")


def notify_consumers(group: str, conns: list[RemotingProtocol]) -> None:
    """NOTIFY_CONSUMER_IDS_CHANGED, oneway and in JSON, to each member of ``group``."""
    for conn in conns:
        conn.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}))


def build_context(cfg: BrokerConfig, namesrv_client: RemotingClient, reactor: Any) -> BrokerContext:
    """Every part, wired, nothing started: the core first, then HA and POP over it."""
    root = cfg.storePathRootDir
    store = MessageStore(cfg.store)
    store.flush.release_hook = batch_writes  # answers a group commit releases leave one write per connection
    topics = TopicConfigManager(cfg, root)
    clients = ClientManager(notify_consumers)
    offsets = ConsumerOffsetManager(root)
    schedule = ScheduleMessageService(store, root, cfg.messageDelayLevel)
    timer = TimerMessageService(store, root, cfg.timer, reactor=reactor)
    core = BrokerCore(
        config=cfg,
        store=store,
        topics=topics,
        groups=SubscriptionGroupManager(cfg, root),
        offsets=offsets,
        clients=clients,
        holds=PullHoldService(reactor),
        registrar=NamesrvRegistrar(cfg, topics, namesrv_client),
        schedule=schedule,
        locks=RebalanceLockManager(),
        transactions=TransactionService(cfg, store, topics, offsets, clients, lambda: (cfg.brokerIP1, cfg.listenPort),
                                        schedule=schedule, timer=timer),
        filters=ConsumerFilterManager(cfg, lambda group: clients.consumer_group(group) is not None),
        stats=BrokerStats(),
        timer=timer,
    )
    ha = HARole(core, namesrv_client, reactor)
    core.registrar.on_registered.append(ha.on_registered)
    ctx = BrokerContext.over(core, ha, PopService(core, reactor))
    ha.pop_revive = ctx.pop.revive
    store.add_arrival_listener(ctx.holds.notify_arrival)
    store.add_arrival_listener(ctx.stats.on_arrival)
    store.add_arrival_listener(ctx.pop.holds.notify_arrival)
    if cfg.enableCalcFilterBitMap:
        store.set_bitmap_calculator(ctx.filters.calc_bitmap)
    return ctx


class BrokerService(OrderedServices):
    """A RocketMQ broker: its parts as child services, started in order (the store recovers before anything
    listens) and stopped in reverse, one after another (the config files drain before the store closes).

    Start order: store, config files, [ACL], the ports, the store's own services, POP's replay of its revive
    topic, schedule/timer/transactions (a master's), POP, HA, then the persist timers and the NameServer
    registration. Stop: the ports stop listening first, then the children newest first; the children with
    nothing to start ("namesrv client", "connections", "pull holds") only place their stop in that order.
    """

    def __init__(self, config: BrokerConfig, reactor: Any = None) -> None:
        super().__init__()
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.config = config
        self.dispatcher = Dispatcher()
        self.factory = RemotingServerFactory(self.dispatcher, idle_timeout=config.channelExpiredTimeout / 1000)
        self._namesrv_client = RemotingClient(reactor, tls=config.tls.client.options())
        try:
            ctx = self.ctx = build_context(config, self._namesrv_client, reactor)
        except ValueError as e:  # a setting a part refuses when it is made
            raise StartupError(str(e)) from None
        self.acl: "AclService | None" = None
        self.auth: "AuthService | None" = None  # ACL 2.0
        self._wire(ctx)
        self.listener = RemotingListener(self.factory, config, reactor)
        for part in (
            StoreService(ctx.store, config.storePathRootDir),
            ConfigFiles(ctx),
            Step("namesrv client", stop=self._namesrv_client.close),
            Step("connections", stop=self.factory.close_all),
            AclGuard(self.acl, self.dispatcher) if self.acl is not None else None,
            AuthGuard(self.auth, self.dispatcher) if self.auth is not None else None,
            self.listener,
            Step("store services", start=lambda: ctx.store.start(self.reactor)),
            Step("pop replay", start=ctx.pop.load),  # replays the revive topic: needs the running store
            Deliveries(ctx),
            Step("pop", start=ctx.pop.start, stop=ctx.pop.stop),
            Step("pull holds", stop=ctx.holds.stop),
            Step("ha", start=lambda: ctx.ha.start(self.listener.ephemeral), stop=ctx.ha.stop),
            Upkeep(ctx),
        ):
            if part is not None:
                part.setServiceParent(self)

    def _wire(self, ctx: BrokerContext) -> None:
        """The processors' tables on the dispatcher (and ACL's, when on), and the dispatcher's hooks."""
        cfg = self.config
        for processor_class in PROCESSORS:
            processor = processor_class(ctx)
            self.dispatcher.register_many(processor.table())
            if isinstance(processor, SendProcessor) and processor.lane is not None:
                self.dispatcher.lane = processor.lane.handler()
        if cfg.aclEnable:
            from rmqtx.acl.service import AclService, default_acl_path  # only when on: it loads YAML

            self.acl = AclService(
                default_acl_path(cfg.aclFilePath), lambda: (cfg.brokerClusterName, cfg.brokerName, cfg.broker_addr), self.reactor
            )
            self.dispatcher.register_many(self.acl.table_of_handlers())  # with ACL off they stay "not supported"
        self._wire_acl2()
        replicas = ctx.ha.replicas
        if replicas is not None:  # controller mode: the controller's word after an election
            self.dispatcher.register_many({RequestCode.NOTIFY_BROKER_ROLE_CHANGED: lambda request, conn: replicas.on_notify(request)})
        self.dispatcher.on_close.append(ctx.clients.connection_closed)
        self.dispatcher.before_read.append(ctx.store.hold_arrivals)
        self.dispatcher.after_read.append(ctx.store.flush_arrivals)

    def _wire_acl2(self) -> None:
        """ACL 2.0 when broker.conf turns it on or names its metadata providers (Apache then keeps users
        and ACLs and answers the admin codes 3001-3010 even with the checks off)."""
        from pathlib import Path

        from rmqtx.acl2.settings import AuthSettings

        cfg = self.config
        try:
            settings = AuthSettings.from_properties(cfg.properties)
        except ValueError as e:
            raise StartupError(str(e)) from None
        if not settings.active:
            return
        from rmqtx.acl2.service import AuthService
        from rmqtx.acl2.store import require_rocksdict

        try:
            require_rocksdict()
        except ImportError as e:
            raise missing_extra("ACL 2.0 (its users and ACLs live in RocksDB)", "rocksdb", e) from None

        from rmqtx.acl.service import default_acl_path

        self.auth = AuthService(settings, Path(cfg.storePathRootDir).expanduser() / "config",
                                lambda: cfg.brokerClusterName, self.dispatcher.processors, self.reactor,
                                default_acl_path(cfg.aclFilePath))
        self.dispatcher.register_many(self.auth.table_of_handlers())
        if settings.inner_credentials is not None:  # the broker's own requests (Apache's BrokerOuterAPI signs them)
            from rmqtx.acl.signing import RequestSigner

            self._namesrv_client.signer = RequestSigner(*settings.inner_credentials)

    @property
    def namesrv_client(self) -> RemotingClient:
        """The client the broker talks to its NameServers with (the console reuses it)."""
        return self._namesrv_client

    @property
    def port(self) -> IListeningPort | None:
        return self.listener.port

    @property
    def fast_port(self) -> Any:
        return self.listener.fast_port

    # -- life -------------------------------------------------------------------------------
    def startService(self) -> None:
        super().startService()
        log.info(
            "broker {name} listening on {addr}, store {root}",
            name=self.config.brokerName,
            addr=self.config.broker_addr,
            root=self.config.storePathRootDir,
        )

    async def _stop_children(self) -> None:
        await self.listener.stop_listening()  # no new connection while the parts stop
        await super()._stop_children()
