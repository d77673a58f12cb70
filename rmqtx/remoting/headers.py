"""The request and response headers rmqtx reads and writes, with Java's field names and order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rmqtx.accel import accel
from rmqtx.remoting.header import CommandHeader


# -- send ------------------------------------------------------------------------------------
@dataclass(slots=True)
class SendMessageRequestHeader(CommandHeader):
    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: int
    flag: int
    properties: Optional[str] = None
    reconsumeTimes: Optional[int] = None
    unitMode: Optional[bool] = False
    batch: Optional[bool] = False
    maxReconsumeTimes: Optional[int] = None
    brokerName: Optional[str] = None


#: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE short field names, a..n, onto SendMessageRequestHeader.
V2_SHORT_NAMES: dict[str, str] = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}
_V2_LONG_NAMES = {long: short for short, long in V2_SHORT_NAMES.items()}
_TRUE = ("true", "1")


def send_v2_values_py(ext: dict[str, str]) -> tuple | None:
    """SendMessageRequestHeader's values from well-formed V2 fields, or None (missing field, bad number)."""
    get = ext.get
    try:
        j, k, l, m = get("j"), get("k"), get("l"), get("m")
        return (
            ext["a"], ext["b"], ext["c"], int(ext["d"]), int(ext["e"]), int(ext["f"]), int(ext["g"]),
            int(ext["h"]), get("i"),
            None if j is None else int(j),
            False if k is None else k.strip().lower() in _TRUE,  # parse_bool, inline
            False if m is None else m.strip().lower() in _TRUE,
            None if l is None else int(l),
            get("n"),
        )
    except (KeyError, ValueError):
        return None


send_v2_values = send_v2_values_py
if accel is not None:
    send_v2_values = accel.send_v2_values  # noqa: F811


def send_header_from_v2(ext: dict[str, str] | None) -> SendMessageRequestHeader:
    """Read a SEND_MESSAGE_V2 header (short names) as a SendMessageRequestHeader.

    The common case (every required field present and well formed) is read in one call; anything
    else goes the generic way, which raises the errors Java words.
    """
    ext = ext or {}
    values = send_v2_values(ext)
    if values is not None:
        return SendMessageRequestHeader(*values)
    return SendMessageRequestHeader.from_fields(
        {V2_SHORT_NAMES[k]: v for k, v in ext.items() if k in V2_SHORT_NAMES}
    )


def send_header_to_v2(header: SendMessageRequestHeader) -> tuple[dict[str, str], tuple[str, ...]]:
    """The V2 ext fields (short names) and their binary order for a send header."""
    fields = {_V2_LONG_NAMES[k]: v for k, v in header.to_fields().items()}
    return fields, tuple(fields)


@dataclass(slots=True)
class SendMessageResponseHeader(CommandHeader):
    FAST = True
    msgId: str
    queueId: int
    queueOffset: int
    transactionId: Optional[str] = None


# -- pull and offsets ------------------------------------------------------------------------
@dataclass(slots=True)
class PullMessageRequestHeader(CommandHeader):
    FAST = True
    consumerGroup: str
    topic: str
    queueId: int
    queueOffset: int
    maxMsgNums: int
    sysFlag: int
    commitOffset: int
    suspendTimeoutMillis: int
    subscription: Optional[str] = None
    subVersion: int = 0
    expressionType: Optional[str] = None
    bname: Optional[str] = None


@dataclass(slots=True)
class PullMessageResponseHeader(CommandHeader):
    FAST = True
    suggestWhichBrokerId: int
    nextBeginOffset: int
    minOffset: int
    maxOffset: int


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: int
    bname: Optional[str] = None
    #: 5.x: false asks for QUERY_NOT_FOUND rather than offset 0 when the group has no offset.
    setZeroIfNotFound: Optional[bool] = None


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: int
    commitOffset: int
    bname: Optional[str] = None


@dataclass(slots=True)
class OffsetResponseHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP answers."""

    offset: int


@dataclass(slots=True)
class TopicQueueRequestHeader(CommandHeader):
    """GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME."""

    topic: str
    queueId: int
    bname: Optional[str] = None


@dataclass(slots=True)
class SearchOffsetRequestHeader(CommandHeader):
    topic: str
    queueId: int
    timestamp: int
    bname: Optional[str] = None


@dataclass(slots=True)
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int


@dataclass(slots=True)
class ViewMessageRequestHeader(CommandHeader):
    offset: int


@dataclass(slots=True)
class QueryMessageRequestHeader(CommandHeader):
    topic: str
    key: str
    maxNum: int
    beginTimestamp: int
    endTimestamp: int


@dataclass(slots=True)
class QueryMessageResponseHeader(CommandHeader):
    indexLastUpdateTimestamp: int
    indexLastUpdatePhyoffset: int


# -- clients ---------------------------------------------------------------------------------
@dataclass(slots=True)
class UnregisterClientRequestHeader(CommandHeader):
    clientID: str
    producerGroup: Optional[str] = None
    consumerGroup: Optional[str] = None


@dataclass(slots=True)
class ConsumerGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP, NOTIFY_CONSUMER_IDS_CHANGED."""

    consumerGroup: str


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: int
    group: str
    delayLevel: int
    originMsgId: Optional[str] = None
    originTopic: Optional[str] = None
    unitMode: bool = False
    maxReconsumeTimes: Optional[int] = None
    bname: Optional[str] = None


@dataclass(slots=True)
class EndTransactionRequestHeader(CommandHeader):
    producerGroup: str
    tranStateTableOffset: int
    commitLogOffset: int
    commitOrRollback: int
    fromTransactionCheck: Optional[bool] = False
    msgId: str = ""
    transactionId: Optional[str] = None
    bname: Optional[str] = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    tranStateTableOffset: int
    commitLogOffset: int
    msgId: Optional[str] = None
    transactionId: Optional[str] = None
    offsetMsgId: Optional[str] = None


# -- name server -----------------------------------------------------------------------------
@dataclass(slots=True)
class RegisterBrokerRequestHeader(CommandHeader):
    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str
    brokerId: int
    compressed: bool = False
    bodyCrc32: int = 0


@dataclass(slots=True)
class RegisterBrokerResponseHeader(CommandHeader):
    haServerAddr: Optional[str] = None
    masterAddr: Optional[str] = None


@dataclass(slots=True)
class BrokerIdentityRequestHeader(CommandHeader):
    """UNREGISTER_BROKER and QUERY_DATA_VERSION."""

    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: int


@dataclass(slots=True)
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool


@dataclass(slots=True)
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str


@dataclass(slots=True)
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str
    value: str


@dataclass(slots=True)
class KVConfigKeyRequestHeader(CommandHeader):
    """GET_KV_CONFIG and DELETE_KV_CONFIG."""

    namespace: str
    key: str


@dataclass(slots=True)
class GetKVConfigResponseHeader(CommandHeader):
    value: Optional[str] = None


@dataclass(slots=True)
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str


@dataclass(slots=True)
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str
    clusterName: Optional[str] = None


@dataclass(slots=True)
class BrokerNameRequestHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER."""

    brokerName: str


@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipeTopicCount: int


@dataclass(slots=True)
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    addTopicCount: int


@dataclass(slots=True)
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str


# -- admin -----------------------------------------------------------------------------------
@dataclass(slots=True)
class CreateTopicRequestHeader(CommandHeader):
    topic: str
    defaultTopic: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicFilterType: str
    topicSysFlag: Optional[int] = None
    order: bool = False
    attributes: Optional[str] = None  # 5.x: "+message.type=FIFO,-key" (rmqtx.common.topic_attributes)


@dataclass(slots=True)
class TopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO and the like."""

    topic: str


# -- request-reply ---------------------------------------------------------------------------
@dataclass(slots=True)
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a reply to the requesting client."""

    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: int
    flag: int
    properties: Optional[str] = None
    reconsumeTimes: Optional[int] = None
    unitMode: bool = False
    bornHost: str = ""
    storeHost: str = ""
    storeTimestamp: int = 0


# -- pop (RocketMQ 5.x) ----------------------------------------------------------------------
@dataclass(slots=True)
class PopMessageRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: int
    maxMsgNums: int
    invisibleTime: int
    pollTime: int
    bornTime: int
    initMode: int
    expType: Optional[str] = None
    exp: Optional[str] = None
    order: Optional[bool] = False
    attemptId: Optional[str] = None


@dataclass(slots=True)
class PopMessageResponseHeader(CommandHeader):
    popTime: int
    invisibleTime: int
    reviveQid: int
    restNum: int
    startOffsetInfo: Optional[str] = None
    msgOffsetInfo: Optional[str] = None
    orderCountInfo: Optional[str] = None


@dataclass(slots=True)
class AckMessageRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: int
    extraInfo: str
    offset: int


@dataclass(slots=True)
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: int
    extraInfo: str
    offset: int
    invisibleTime: int


@dataclass(slots=True)
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    popTime: int
    invisibleTime: int
    reviveQid: int


@dataclass(slots=True)
class PeekMessageRequestHeader(CommandHeader):
    topic: str
    queueId: int
    maxMsgNums: int
    consumerGroup: str


@dataclass(slots=True)
class NotificationRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: int
    pollTime: int
    bornTime: int
    order: Optional[bool] = False
    attemptId: Optional[str] = None


@dataclass(slots=True)
class NotificationResponseHeader(CommandHeader):
    hasMsg: bool
    pollingFull: Optional[bool] = False


@dataclass(slots=True)
class PollingInfoRequestHeader(CommandHeader):
    consumerGroup: str
    topic: str
    queueId: int


@dataclass(slots=True)
class PollingInfoResponseHeader(CommandHeader):
    pollingNum: int
