"""The parts every broker processor and service shares: config, store, tables, clients, NameServer link.

HA and POP are built over these (they hold a :class:`BrokerCore`); :class:`rmqtx.broker.context.BrokerContext`
is the core with HA and POP added, which the processors are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    from rmqtx.broker.timer import TimerMessageService
    from rmqtx.broker.topics import TopicConfigManager
    from rmqtx.broker.transactions import TransactionService
    from rmqtx.store.message_store import MessageStore


@dataclass
class BrokerCore:
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
    #: 5.x timer messages (loaded and run on a master only)
    timer: "TimerMessageService"

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.config.brokerIP1, self.config.listenPort)
