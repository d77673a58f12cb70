"""Offsets and pulls of one queue for the gRPC endpoint, on the reactor: GetOffset, QueryOffset,
UpdateOffset and PullMessage as QUERY_CONSUMER_OFFSET, GET_MIN_OFFSET / GET_MAX_OFFSET /
SEARCH_OFFSET_BY_TIMESTAMP, UPDATE_CONSUMER_OFFSET and PULL_MESSAGE over the endpoint's loopback
remoting connection (the broker calls a proxy in cluster mode makes).

Apache's 5.x proxy leaves these four unimplemented; the answers follow rocketmq-apis' messages and
the v1 proxy's pull service (QueryOffset BEGINNING / END / TIMESTAMP as the queue's first offset,
its end, and the offset of the first message stored at or after the time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqtx.common.subscription import SubscriptionData
from rmqtx.client.message import MessageExt, decode_messages
from rmqtx.common.sysflag import FLAG_SUBSCRIPTION, FLAG_SUSPEND
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import (
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

if TYPE_CHECKING:
    from rmqtx.grpc.backend import GrpcBackend

#: Most messages one PullMessage hands out (the broker's own cap for a pull).
MAX_PULL_BATCH = 32
#: PULL_MESSAGE sysFlag bits (no commit bit: offsets move by UpdateOffset only).


def _error(code: str, message: str) -> Exception:
    from rmqtx.grpc.backend import GrpcError

    return GrpcError(code, message)


def _broker_error(response: RemotingCommand) -> Exception:
    from rmqtx.grpc.consumer import _broker_error as convert

    return convert(response)


def _queue(backend: "GrpcBackend", topic: str, queue_id: int) -> None:
    """The topic must exist and the queue be one of its read queues (BAD_REQUEST otherwise)."""
    config = backend.topic_config(topic)
    if not 0 <= queue_id < config.readQueueNums:
        raise _error("BAD_REQUEST", f"queue id {queue_id} is illegal, topic {topic} has {config.readQueueNums} read queues")


def _group(group: str) -> None:
    if not group:
        raise _error("ILLEGAL_CONSUMER_GROUP", "consumer group is empty")


async def _offset_call(backend: "GrpcBackend", code: int, fields: dict) -> RemotingCommand:
    return await backend._call(RemotingCommand.request(code, fields))


async def get_offset(backend: "GrpcBackend", group: str, topic: str, queue_id: int) -> int:
    """The group's committed offset of the queue; OFFSET_NOT_FOUND when it has none."""
    _group(group)
    _queue(backend, topic, queue_id)
    header = QueryConsumerOffsetRequestHeader(group, topic, queue_id)
    response = await _offset_call(backend, RequestCode.QUERY_CONSUMER_OFFSET, header.to_fields())
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        raise _error("OFFSET_NOT_FOUND", f"group {group} has no offset in {topic}/{queue_id}")
    if response.code != ResponseCode.SUCCESS:
        raise _broker_error(response)
    return OffsetResponseHeader.from_command(response).offset


async def query_offset(backend: "GrpcBackend", topic: str, queue_id: int, policy: str, timestamp_ms: int | None) -> int:
    """BEGINNING: the queue's min offset; END: its max offset; TIMESTAMP: the offset stored at or after the time."""
    _queue(backend, topic, queue_id)
    if policy not in ("BEGINNING", "END", "TIMESTAMP"):
        raise _error("BAD_REQUEST", "query offset policy must be BEGINNING, END or TIMESTAMP")
    if policy == "TIMESTAMP":
        if timestamp_ms is None:
            raise _error("BAD_REQUEST", "query offset policy TIMESTAMP needs a timestamp")
        code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
        fields = SearchOffsetRequestHeader(topic, queue_id, timestamp_ms).to_fields()
    else:
        code = RequestCode.GET_MAX_OFFSET if policy == "END" else RequestCode.GET_MIN_OFFSET
        fields = TopicQueueRequestHeader(topic, queue_id).to_fields()
    response = await _offset_call(backend, code, fields)
    if response.code != ResponseCode.SUCCESS:
        raise _broker_error(response)
    return OffsetResponseHeader.from_command(response).offset


async def update_offset(backend: "GrpcBackend", group: str, topic: str, queue_id: int, offset: int) -> None:
    """Commit the group's offset of the queue (ILLEGAL_OFFSET below 0)."""
    _group(group)
    _queue(backend, topic, queue_id)
    if offset < 0:
        raise _error("ILLEGAL_OFFSET", f"offset {offset} is negative")
    header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
    response = await _offset_call(backend, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_fields())
    if response.code != ResponseCode.SUCCESS:
        raise _broker_error(response)


@dataclass
class Pulled:
    messages: list[MessageExt]
    next_offset: int


async def pull(backend: "GrpcBackend", group: str, topic: str, queue_id: int, offset: int, batch: int,
               expression_type: str, expression: str, poll_ms: int) -> Pulled:
    """PULL_MESSAGE from one queue at ``offset``, long polling up to ``poll_ms`` when nothing is there;
    a moved or too small offset gives no message and the offset to go on from."""
    _group(group)
    _queue(backend, topic, queue_id)
    if offset < 0:
        raise _error("ILLEGAL_OFFSET", f"offset {offset} is negative")
    if batch <= 0:
        raise _error("BAD_REQUEST", "batch_size must be positive")
    suspend = max(poll_ms, 0)
    header = PullMessageRequestHeader(
        consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset, maxMsgNums=min(batch, MAX_PULL_BATCH),
        sysFlag=FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend else 0), commitOffset=0, suspendTimeoutMillis=suspend,
        subscription=expression or "*", subVersion=0, expressionType=expression_type or "TAG",
    )
    request = header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE))
    response = await backend._call(request, timeout=suspend / 1000 + 5)
    if response.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                         ResponseCode.PULL_OFFSET_MOVED):
        answer = PullMessageResponseHeader.from_command(response)
        msgs = decode_messages(response.body or b"", backend.broker_name) if response.code == ResponseCode.SUCCESS else []
        sub = SubscriptionData.from_expression(topic, expression or "*", expression_type or "TAG")
        if sub.is_tag and not sub.matches_all:  # the broker matched tag hash codes; the tags must match
            msgs = [m for m in msgs if m.properties.get("TAGS") in sub.tags]
        return Pulled(msgs, answer.nextBeginOffset)
    if response.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:
        raise _error("ILLEGAL_FILTER_EXPRESSION", response.remark or "the filter expression does not parse")
    raise _broker_error(response)
