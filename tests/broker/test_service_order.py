"""The broker's parts start and stop in one fixed order (docs/layout.md, "The broker as services"): a real
broker on loopback, each part's start and stop recorded as it is called."""

from __future__ import annotations

import os

from twisted.internet import defer, tcp
from twisted.trial import unittest

from rmqtx.acl.service import AclService
from rmqtx.broker.filters import ConsumerFilterManager
from rmqtx.broker.groups import SubscriptionGroupManager
from rmqtx.broker.ha.role import HARole
from rmqtx.broker.jsonfiles import JsonConfigFile
from rmqtx.broker.long_polling import PullHoldService
from rmqtx.broker.offsets import ConsumerOffsetManager
from rmqtx.broker.pop.service import PopService
from rmqtx.broker.registration import NamesrvRegistrar
from rmqtx.broker.schedule import ScheduleMessageService
from rmqtx.broker.timer import TimerMessageService
from rmqtx.broker.topics import TopicConfigManager
from rmqtx.broker.transactions import TransactionService
from rmqtx.console import ConsoleService
from rmqtx.remoting.client import RemotingClient
from rmqtx.remoting.protocol import RemotingServerFactory
from rmqtx.startup import StartupError
from rmqtx.store.message_store import MessageStore
from tests.broker.inprocess import InProcessCluster

RECORDED = {
    MessageStore: ["load", "start", "shutdown"],
    TopicConfigManager: ["load", "persist"],
    SubscriptionGroupManager: ["load"],
    ConsumerOffsetManager: ["load", "persist_now"],
    ScheduleMessageService: ["load", "start", "stop", "persist_now"],
    TimerMessageService: ["load", "start", "follow", "drain", "shutdown"],
    TransactionService: ["load", "start", "stop"],
    ConsumerFilterManager: ["load", "persist_now"],
    PopService: ["load", "start", "stop"],
    PullHoldService: ["stop"],
    HARole: ["start", "stop"],
    NamesrvRegistrar: ["start", "stop"],
    RemotingServerFactory: ["close_all"],
    RemotingClient: ["close"],
    JsonConfigFile: ["drain"],
    AclService: ["load", "start", "stop"],
    ConsoleService: ["startService", "stopService"],
}

LOADS = ["MessageStore.load", "TopicConfigManager.load", "SubscriptionGroupManager.load", "ConsumerOffsetManager.load",
         "ScheduleMessageService.load", "TimerMessageService.load", "TransactionService.load", "ConsumerFilterManager.load",
         "AclService.load", "AclService.start", "listen"]
STOPS = ["NamesrvRegistrar.stop", "HARole.stop", "PullHoldService.stop", "PopService.stop", "ScheduleMessageService.stop",
         "TimerMessageService.drain", "TransactionService.stop", "AclService.stop", "RemotingServerFactory.close_all",
         "RemotingClient.close", *["JsonConfigFile.drain"] * 6, "ConsumerOffsetManager.persist_now",
         "ConsumerFilterManager.persist_now", "ScheduleMessageService.persist_now", "TimerMessageService.shutdown",
         "MessageStore.shutdown"]


class ServiceOrderTest(unittest.TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.calls: list[str] = []
        for cls, names in RECORDED.items():
            for name in names:
                self.patch(cls, name, self._recorder(f"{cls.__name__}.{name}", getattr(cls, name)))
        self.cluster: InProcessCluster | None = None

    def _recorder(self, label: str, method):
        calls = self.calls

        def record(*args, **kwargs):
            calls.append(label)
            return method(*args, **kwargs)

        return record

    def _record_ports(self, broker) -> None:
        """The broker's own listening ports (not the NameServer's, nor HA's)."""
        ports: list = []
        original = broker.reactor.listenTCP

        def listen(*args, **kwargs):
            port = original(*args, **kwargs)
            if args[1] is broker.factory:  # not HA's, nor the console's
                self.calls.append("listen")
                ports.append(port)
            return port

        self.patch(broker.reactor, "listenTCP", listen)
        stop = tcp.Port.stopListening

        def stop_listening(port):
            if port in ports:
                self.calls.append("stop listening")
            return stop(port)

        self.patch(tcp.Port, "stopListening", stop_listening)

    def _cluster(self, **conf: str) -> InProcessCluster:
        cluster = self.cluster = InProcessCluster(aclEnable="true", **conf)
        cluster.broker_conf["aclFilePath"] = os.path.join(cluster.tmp.name, "plain_acl.yml")
        cluster.namesrv.startService()
        cluster.namesrv_addr = f"127.0.0.1:{cluster.namesrv.port.getHost().port}"
        return cluster

    def _start(self, cluster: InProcessCluster) -> None:
        from rmqtx.broker.config import BrokerConfig
        from rmqtx.broker.service import BrokerService
        from rmqtx.launcher import with_endpoints

        cluster.broker = BrokerService(BrokerConfig.from_properties({**cluster.broker_conf, "namesrvAddr": cluster.namesrv_addr}))
        self._record_ports(cluster.broker)
        cluster.node = with_endpoints(cluster.broker)
        self.calls.clear()
        cluster.node.startService()

    async def _stop_recorded(self, cluster: InProcessCluster) -> list[str]:
        self.calls.append("--")
        await cluster.stop_broker()
        return self.calls[self.calls.index("--") + 1:]

    def tearDown(self) -> "defer.Deferred[None] | None":
        return defer.ensureDeferred(self.cluster.stop()) if self.cluster is not None else None

    async def _master(self) -> None:
        cluster = self._cluster(consolePort="0")
        self._start(cluster)
        self.assertEqual(self.calls, [*LOADS, "MessageStore.start", "PopService.load", "ScheduleMessageService.start",
                                   "TimerMessageService.start", "TransactionService.start", "PopService.start",
                                   "HARole.start", "TopicConfigManager.persist", "NamesrvRegistrar.start",
                                   "ConsoleService.startService"])
        self.assertEqual(await self._stop_recorded(cluster), ["ConsoleService.stopService", "stop listening", *STOPS])

    def test_master_with_console(self):
        return defer.ensureDeferred(self._master())

    async def _slave(self) -> None:
        cluster = self._cluster(brokerRole="SLAVE", brokerId="1")
        self._start(cluster)
        self.assertEqual(self.calls, [*LOADS, "MessageStore.start", "PopService.load", "TimerMessageService.follow",
                                      "PopService.start", "HARole.start", "TopicConfigManager.persist",
                                      "NamesrvRegistrar.start"])
        self.assertEqual(await self._stop_recorded(cluster), ["stop listening", *STOPS])  # a slave stops them all the same

    def test_slave_starts_no_schedule_or_transactions_and_its_timer_follows(self):
        return defer.ensureDeferred(self._slave())

    async def _failed_start(self) -> None:
        cluster = self._cluster()

        def refuse(acl: AclService) -> None:
            self.calls.append("AclService.load")
            raise StartupError("refused")

        self.patch(AclService, "load", refuse)
        with self.assertRaises(StartupError):
            self._start(cluster)
        self.assertEqual(self.calls, [*LOADS[:LOADS.index("AclService.load") + 1], "MessageStore.shutdown"])
        self.assertFalse(cluster.broker.running)
        self.assertFalse(os.path.exists(os.path.join(cluster.broker_conf["storePathRootDir"], "abort")))
        self.assertEqual(await self._stop_recorded(cluster), [])  # nothing had started but the store, now closed

    def test_a_part_that_cannot_start_closes_the_store(self):
        return defer.ensureDeferred(self._failed_start())
