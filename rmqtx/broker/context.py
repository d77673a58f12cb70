"""What every broker processor needs to reach: config, store, tables, clients, NameServer link."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmqtx.broker.clients import ClientManager
    from rmqtx.broker.config import BrokerConfig
    from rmqtx.broker.filters import ConsumerFilterManager
    from rmqtx.broker.groups import SubscriptionGroupManager
    from rmqtx.broker.locks import RebalanceLockManager
    from rmqtx.broker.long_polling import PullHoldService
    from rmqtx.broker.offsets import ConsumerOffsetManager
    from rmqtx.broker.registration import NamesrvRegistrar
    from rmqtx.broker.schedule import ScheduleMessageService
    from rmqtx.broker.stats import BrokerStats
    from rmqtx.broker.topics import TopicConfigManager
    from rmqtx.broker.transactions import TransactionService
    from rmqtx.store.message_store import MessageStore

FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


@dataclass
class BrokerContext:
    config: "BrokerConfig"
    store: "MessageStore"
    topics: "TopicConfigManager"
    groups: "SubscriptionGroupManager"
    offsets: "ConsumerOffsetManager"
    clients: "ClientManager"
    holds: "PullHoldService"
    registrar: "NamesrvRegistrar"
    schedule: "ScheduleMessageService"
    locks: "RebalanceLockManager"
    transactions: "TransactionService"
    filters: "ConsumerFilterManager"
    stats: "BrokerStats"
    #: The role's HA parts (rmqtx.broker.ha.role.HARole), set once the context is built.
    ha: Any = None
    #: Timer messages (rmqtx.broker.timer.TimerMessageService); None on a broker without one.
    timer: Any = None
    #: POP consumption (rmqtx.broker.pop.service.PopService), set once the context is built.
    pop: Any = None

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.config.brokerIP1, self.config.listenPort)
