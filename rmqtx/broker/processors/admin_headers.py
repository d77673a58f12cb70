"""Request and response headers of the admin codes, with the Java classes' field names and order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rmqtx.remoting.header import CommandHeader


@dataclass(slots=True)
class GetTopicConfigRequestHeader(CommandHeader):
    """GET_TOPIC_CONFIG (351, 5.x): ``lo`` asks for the static-topic mapping too."""

    topic: str
    lo: Optional[bool] = None


@dataclass(slots=True)
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    groupName: str
    removeOffset: bool = False


@dataclass(slots=True)
class GetSubscriptionGroupConfigRequestHeader(CommandHeader):
    group: str


@dataclass(slots=True)
class GetConsumeStatsRequestHeader(CommandHeader):
    consumerGroup: str
    topic: Optional[str] = None


@dataclass(slots=True)
class GetConsumeStatsInBrokerHeader(CommandHeader):
    isOrder: bool


@dataclass(slots=True)
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    topic: str
    group: str


@dataclass(slots=True)
class QueryCorrectionOffsetHeader(CommandHeader):
    compareGroup: str
    topic: str
    filterGroups: Optional[str] = None


@dataclass(slots=True)
class CloneGroupOffsetRequestHeader(CommandHeader):
    srcGroup: str
    destGroup: str
    topic: Optional[str] = None
    offline: bool = False


@dataclass(slots=True)
class QueryConsumeQueueRequestHeader(CommandHeader):
    topic: str
    queueId: int
    index: int
    count: int
    consumerGroup: Optional[str] = None


@dataclass(slots=True)
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    statsName: str
    statsKey: str


@dataclass(slots=True)
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumerGroup: str


@dataclass(slots=True)
class GetProducerConnectionListRequestHeader(CommandHeader):
    producerGroup: str


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumerGroup: str
    clientId: str
    jstackEnable: bool = False


@dataclass(slots=True)
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    consumerGroup: str
    clientId: Optional[str] = None
    msgId: Optional[str] = None
    brokerName: Optional[str] = None


@dataclass(slots=True)
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and the RESET_CONSUMER_CLIENT_OFFSET (220) it sends."""

    topic: str
    group: str
    timestamp: int
    isForce: bool


@dataclass(slots=True)
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) and GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str
    group: str
    clientAddr: Optional[str] = None


@dataclass(slots=True)
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    topic: str
