"""Request processors, one module per request family; ``ALL`` is what the broker registers."""

from __future__ import annotations

from rmqtx.broker.processors.ack import AckProcessor
from rmqtx.broker.processors.admin import TopicAdminProcessor
from rmqtx.broker.processors.admin_5x import Admin5xProcessor
from rmqtx.broker.processors.admin_clients import ClientAdminProcessor
from rmqtx.broker.processors.admin_groups import GroupAdminProcessor
from rmqtx.broker.processors.admin_runtime import RuntimeAdminProcessor
from rmqtx.broker.processors.client_manage import ClientManageProcessor
from rmqtx.broker.processors.delivery import DeliveryProcessor
from rmqtx.broker.processors.assignment import AssignmentProcessor
from rmqtx.broker.processors.offsets import OffsetProcessor
from rmqtx.broker.processors.pop import PopProcessor
from rmqtx.broker.processors.pop_peek import PeekProcessor
from rmqtx.broker.processors.pull import PullProcessor
from rmqtx.broker.processors.query import QueryProcessor
from rmqtx.broker.processors.recall import RecallProcessor
from rmqtx.broker.processors.reply import ReplyProcessor
from rmqtx.broker.processors.send import SendProcessor
from rmqtx.broker.processors.transaction import EndTransactionProcessor

#: Each takes the BrokerContext and offers ``table() -> {request code: handler}``.
ALL = (
    SendProcessor,
    PullProcessor,
    ClientManageProcessor,
    OffsetProcessor,
    DeliveryProcessor,
    QueryProcessor,
    TopicAdminProcessor,
    GroupAdminProcessor,
    RuntimeAdminProcessor,
    ClientAdminProcessor,
    EndTransactionProcessor,
    ReplyProcessor,
    PopProcessor,
    PeekProcessor,
    AckProcessor,
    AssignmentProcessor,
    RecallProcessor,
    Admin5xProcessor,
)
