"""BrokerService: store, tables, processors and the listening port, as one Twisted service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.application import service
from twisted.internet import defer, task
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
from rmqtx.broker.processors import ALL as PROCESSORS
from rmqtx.broker.registration import NamesrvRegistrar
from rmqtx.broker.schedule import ScheduleMessageService
from rmqtx.broker.stats import BrokerStats
from rmqtx.broker.topics import TopicConfigManager
from rmqtx.broker.transactions import TransactionService
from rmqtx.remoting.client import RemotingClient
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import Dispatcher, RemotingProtocol, RemotingServerFactory, batch_writes
from rmqtx.remoting.tls import TlsClientSettings, listening_factory
from rmqtx.store.config import StoreConfig
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
        self.port = None
        self.ctx: BrokerContext | None = None
        self._offset_flush: task.LoopingCall | None = None
        self._filter_flush: task.LoopingCall | None = None
        self._namesrv_client = RemotingClient(reactor, tls=TlsClientSettings.from_properties(config.properties).options())
        self.acl: "AclService | None" = None

    # -- wiring -----------------------------------------------------------------------------
    def _notify_consumers(self, group: str, conns: list[RemotingProtocol]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED, oneway and in JSON, to each member of ``group``."""
        for conn in conns:
            conn.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}))

    def _build(self) -> BrokerContext:
        cfg = self.config
        cfg.check_role()
        store = MessageStore(StoreConfig.from_properties(cfg.store_properties()))
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
        ctx.registrar.on_registered.append(ctx.ha.on_registered)
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
        self.dispatcher.after_read.append(store.flush_arrivals)
        if cfg.enableCalcFilterBitMap:
            store.set_bitmap_calculator(filters.calc_bitmap)
        return ctx

    # -- life -------------------------------------------------------------------------------
    def startService(self) -> None:
        """Blocking recovery first (the broker serves nothing until its store is sound)."""
        ctx = self.ctx = self._build()
        ctx.store.load()
        ctx.topics.load()
        ctx.groups.load()
        ctx.offsets.load()
        ctx.schedule.load()
        ctx.transactions.load()
        ctx.filters.load()
        if self.acl is not None:
            self.acl.load()
            self.acl.start()
            self.dispatcher.guard = self.acl.guard
        ephemeral = self.config.listenPort == 0
        listening = listening_factory(self.factory, self.config.properties)
        self.port = self.reactor.listenTCP(self.config.listenPort, listening, interface=self.config.listenAddress)
        if ephemeral:
            self.config.listenPort = self.port.getHost().port
        ctx.store.start(self.reactor)
        if not self.config.is_slave:  # a slave neither delivers delayed messages nor checks transactions
            ctx.schedule.start()
            ctx.transactions.start()
        ctx.ha.start(ephemeral)
        ctx.topics.file.save_now(ctx.topics.to_json())
        self._offset_flush = task.LoopingCall(ctx.offsets.persist)
        self._offset_flush.start(self.config.flushConsumerOffsetInterval / 1000, now=False)
        self._filter_flush = task.LoopingCall(ctx.filters.persist)
        self._filter_flush.start(FILTER_PERSIST_SECONDS, now=False)
        if self.config.namesrv_addrs:
            ctx.registrar.start()
        log.info(
            "broker {name} listening on {addr}, store {root}",
            name=self.config.brokerName,
            addr=self.config.broker_addr,
            root=self.config.storePathRootDir,
        )
        super().startService()

    async def _stop(self) -> None:
        ctx = self.ctx
        if self.port is not None:
            await self.port.stopListening()
        if ctx is not None:
            for loop in (self._offset_flush, self._filter_flush):
                if loop is not None and loop.running:
                    loop.stop()
            await ctx.registrar.stop()
            await ctx.ha.stop()
            ctx.holds.stop()
            ctx.schedule.stop()
            ctx.transactions.stop()
        if self.acl is not None:
            self.acl.stop()
        self.factory.close_all()
        await self._namesrv_client.close()
        if ctx is not None:
            for config_file in (ctx.topics.file, ctx.groups.file, ctx.offsets.file, ctx.schedule.file, ctx.filters.file):
                await config_file.drain()
            ctx.offsets.persist_now()
            ctx.filters.persist_now()
            ctx.schedule.persist_now()
            ctx.store.shutdown()

    def stopService(self) -> "defer.Deferred[None]":
        super().stopService()
        return defer.ensureDeferred(self._stop())
