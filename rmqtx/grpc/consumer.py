"""The consumer side of the gRPC endpoint on the reactor: ReceiveMessage, AckMessage,
ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue as POP_MESSAGE, ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME and CONSUMER_SEND_MSG_BACK over the endpoint's loopback remoting
connection, as Apache's proxy turns them into broker calls.

A receipt handle is the message's POP_CK extra info plus its commit log offset, space separated,
which is the layout of Apache 5.x's ReceiptHandle (the proxy appends the offset the same way).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from rmqtx.client.message import MessageExt, decode_messages
from rmqtx.client.pop import stamp_messages
from rmqtx.client.util import java_fields
from rmqtx.common import pop_keys as keys
from rmqtx.common.message import PROPERTY_POP_CK
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ConsumerSendMsgBackRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

if TYPE_CHECKING:
    from rmqtx.grpc.backend import GrpcBackend

log = Logger(namespace="rmqtx.grpc")
#: Broker answers that mean "nothing to hand out now" (the proxy's MESSAGE_NOT_FOUND).
_EMPTY = (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.NO_MESSAGE)
#: When the request names none (a push consumer's auto renew), as Apache's proxy default.
DEFAULT_INVISIBLE_MS = 60_000
#: The broker keeps a long poll this much shorter than the client's deadline, so the answer arrives in time.
DEADLINE_MARGIN_S = 1.0
#: A receive naming no long polling timeout polls within these bounds (Apache's proxy defaults,
#: grpcClientConsumerMinLongPollingTimeoutMillis and ...MaxLongPollingTimeoutMillis).
MIN_POLL_MS = 5_000
MAX_POLL_MS = 20_000
#: The client's request timeout when its Telemetry settings have not named one (the SDKs' default).
DEFAULT_REQUEST_TIMEOUT_MS = 3_000
#: Apache's proxy answers an expired handle with its exception's text (Java's class name, then the reason).
EXPIRED_HANDLE = "org.apache.rocketmq.proxy.common.ProxyException: receipt handle is expired"
#: Older clients get BAD_REQUEST for too short a deadline, as from the proxy (Java string order).
ILLEGAL_POLLING_TIME_SINCE = "5.0.3"


def implied_polling_ms(remaining_ms: int | None, request_timeout_ms: int) -> int | None:
    """How long a receive without long_polling_timeout polls (golang/v5 sends none), as Apache's proxy
    derives it: the time left before the deadline less half the client's request timeout, within
    [MIN_POLL_MS, MAX_POLL_MS] but no later than the deadline; None when under MIN_POLL_MS is left."""
    if remaining_ms is None:
        return MAX_POLL_MS
    poll = min(max(remaining_ms - request_timeout_ms // 2, MIN_POLL_MS), MAX_POLL_MS)
    if poll <= remaining_ms:
        return poll
    return remaining_ms if remaining_ms >= MIN_POLL_MS else None


def short_deadline_code(client_version: str) -> str:
    """ILLEGAL_POLLING_TIME, or BAD_REQUEST for a client older than that code (or one naming no version)."""
    return "ILLEGAL_POLLING_TIME" if client_version and client_version >= ILLEGAL_POLLING_TIME_SINCE else "BAD_REQUEST"


def check_invisible(invisible_ms: int, minimum: int, maximum: int) -> None:
    """ILLEGAL_INVISIBLE_TIME outside [minimum, maximum] (no upper bound when maximum is 0 or less)."""
    if invisible_ms < minimum:
        raise _grpc_error("ILLEGAL_INVISIBLE_TIME", f"the invisibleTime is too small. min is {minimum}")
    if 0 < maximum < invisible_ms:
        raise _grpc_error("ILLEGAL_INVISIBLE_TIME", f"the invisibleTime is too large. max is {maximum}")


def receive_invisible_ms(backend: "GrpcBackend", request: Any) -> int:
    """A ReceiveMessage's invisible time: within minInvisibleTimeMillsForRecv (10 s) and maxInvisibleTimeMills
    (12 h) as Apache's proxy checks it; an auto-renewing receive (a push consumer's) is not checked, and
    takes the proxy's default when it names none."""
    named = request.HasField("invisible_duration")
    invisible_ms = request.invisible_duration.ToMilliseconds() if named else 0
    if getattr(request, "auto_renew", False):
        return invisible_ms if named and invisible_ms > 0 else DEFAULT_INVISIBLE_MS
    limits = backend.limits
    check_invisible(invisible_ms, limits.min_invisible_ms_for_recv, limits.max_invisible_ms)
    return invisible_ms


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """POP_CK fields and the commit log offset (Apache's ReceiptHandle layout)."""

    info: keys.ExtraInfo
    extra: str
    commit_log_offset: int

    @classmethod
    def decode(cls, text: str) -> "ReceiptHandle":
        parts = text.split(" ")
        if len(parts) < 8:
            raise ValueError(f"receipt handle has {len(parts)} parts")
        extra = " ".join(parts[:8])
        return cls(keys.ExtraInfo.parse(extra), extra, int(parts[8]) if len(parts) > 8 else -1)

    @staticmethod
    def encode(extra: str, commit_log_offset: int) -> str:
        return f"{extra} {commit_log_offset}"

    def expired(self, now_ms: int) -> bool:
        return self.info.pop_time + self.info.invisible_time <= now_ms

    @property
    def msg_offset(self) -> int:
        """The message's queue offset (_parse_handle refuses a handle without one)."""
        assert self.info.msg_offset is not None
        return self.info.msg_offset


def _grpc_error(code: str, message: str) -> Exception:
    from rmqtx.grpc.backend import GrpcError

    return GrpcError(code, message)


def _broker_error(response: RemotingCommand) -> Exception:
    from rmqtx.grpc.backend import _BROKER_CODES

    code = _BROKER_CODES.get(response.code, "INTERNAL_SERVER_ERROR")
    if response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
        code = "CONSUMER_GROUP_NOT_FOUND"
    elif response.code == ResponseCode.POLLING_FULL:
        code = "TOO_MANY_REQUESTS"
    return _grpc_error(code, response.remark or f"broker answered {response.code}")


async def receive(backend: "GrpcBackend", group: str, topic: str, expression_type: str, expression: str,
                  batch: int, invisible_ms: int, poll_ms: int, fifo: bool, attempt_id: str = "",
                  max_attempts: int = 0) -> list[MessageExt]:
    """POP_MESSAGE from every queue of the topic (queueId -1, as the proxy pops); [] when nothing came.

    As the proxy filters a pop's result: a message delivered ``max_attempts`` times already (a FIFO
    message popped again and again, whose count the broker keeps) goes to ``%DLQ%group`` instead, so
    it no longer blocks its queue."""
    backend.topic_config(topic)
    if batch <= 0:
        raise _grpc_error("BAD_REQUEST", "batch_size must be positive")
    header = PopMessageRequestHeader(group, topic, -1, min(batch, 32), invisible_ms, max(poll_ms, 0),
                                     int(time.time() * 1000), keys.INIT_MAX, expression_type or "TAG",
                                     expression or "*", fifo, attempt_id or None)
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_fields())
    response = await backend._call(request, timeout=poll_ms / 1000 + 5)
    if response.code in _EMPTY:
        return []
    if response.code != ResponseCode.SUCCESS:
        raise _broker_error(response)
    answer = PopMessageResponseHeader.from_command(response)
    msgs = decode_messages(response.body or b"", backend.broker_name)
    stamp_messages(msgs, topic, backend.broker_name, answer, fifo)
    kept = []
    for msg in msgs:
        handle = ReceiptHandle.encode(msg.properties[PROPERTY_POP_CK], msg.commit_log_offset)
        msg.properties[PROPERTY_POP_CK] = handle
        if 0 < max_attempts <= msg.reconsume_times:
            message_id = msg.properties.get("UNIQ_KEY") or msg.msg_id
            try:
                await to_dead_letter(backend, group, topic, handle, message_id, max_attempts)
                continue
            except Exception as exc:  # as the proxy: a failed forward hands the message out after all
                log.info("gRPC receive: {id} not forwarded to the DLQ: {exc}", id=message_id, exc=exc)
        kept.append(msg)
    return kept


def _parse_handle(text: str) -> ReceiptHandle:
    try:
        handle = ReceiptHandle.decode(text)
    except ValueError as exc:
        # Apache 5.4's proxy: a handle its decoder cannot parse is an INTERNAL_SERVER_ERROR (measured by
        # tests/grpc/test_vs_apache.py); only an expired one is INVALID_RECEIPT_HANDLE
        raise _grpc_error("INTERNAL_SERVER_ERROR", f"Parse failed, receipt handle {text!r}: {exc}") from None
    if handle.info.msg_offset is None:
        raise _grpc_error("INTERNAL_SERVER_ERROR", "Parse failed, receipt handle without the message offset")
    return handle


async def ack(backend: "GrpcBackend", group: str, topic: str, receipt_handle: str) -> None:
    """ACK_MESSAGE for one entry; INVALID_RECEIPT_HANDLE once its invisible time is over (as the proxy)."""
    handle = _parse_handle(receipt_handle)
    if handle.expired(int(time.time() * 1000)):
        raise _grpc_error("INVALID_RECEIPT_HANDLE", EXPIRED_HANDLE)
    info = handle.info
    header = AckMessageRequestHeader(group, keys.real_topic(topic, group, info.mark), info.queue_id, handle.extra,
                                     handle.msg_offset)
    response = await backend._call(RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_fields()))
    if response.code != ResponseCode.SUCCESS:
        raise _broker_error(response)


async def change_invisible(backend: "GrpcBackend", group: str, topic: str, receipt_handle: str,
                           invisible_ms: int) -> str:
    """CHANGE_MESSAGE_INVISIBLETIME; the new receipt handle names the broker's new checkpoint. As the
    proxy, 0 (visible again at once) up to maxInvisibleTimeMills."""
    check_invisible(invisible_ms, 0, backend.limits.max_invisible_ms)
    handle = _parse_handle(receipt_handle)
    if handle.expired(int(time.time() * 1000)):
        raise _grpc_error("INVALID_RECEIPT_HANDLE", EXPIRED_HANDLE)
    info = handle.info
    real = keys.real_topic(topic, group, info.mark)
    header = ChangeInvisibleTimeRequestHeader(group, real, info.queue_id, handle.extra, handle.msg_offset, invisible_ms)
    response = await backend._call(RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_fields()))
    if response.code != ResponseCode.SUCCESS:
        raise _broker_error(response)
    answer = ChangeInvisibleTimeResponseHeader.from_command(response)
    extra = keys.extra_info(handle.msg_offset, answer.popTime, answer.invisibleTime, answer.reviveQid, real,
                            info.broker_name, info.queue_id, handle.msg_offset)
    return ReceiptHandle.encode(extra, handle.commit_log_offset)


async def to_dead_letter(backend: "GrpcBackend", group: str, topic: str, receipt_handle: str, message_id: str,
                         max_attempts: int) -> None:
    """CONSUMER_SEND_MSG_BACK with delay level -1 (straight to %DLQ%group), then ACK, as the proxy does."""
    handle = _parse_handle(receipt_handle)
    if handle.commit_log_offset < 0:
        raise _grpc_error("INVALID_RECEIPT_HANDLE", "receipt handle without the commit log offset")
    header = ConsumerSendMsgBackRequestHeader(offset=handle.commit_log_offset, group=group, delayLevel=-1,
                                              originMsgId=message_id, originTopic=topic,
                                              maxReconsumeTimes=max_attempts or None)
    response = await backend._call(RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, java_fields(header)))
    if response.code != ResponseCode.SUCCESS:
        raise _broker_error(response)
    await ack(backend, group, topic, receipt_handle)
