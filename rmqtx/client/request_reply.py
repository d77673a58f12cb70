"""Request-reply as Java 4.9's client does it: the requester marks the message, the replier answers on
``<cluster>_REPLY_TOPIC``, and the broker pushes the reply (PUSH_REPLY_MESSAGE_TO_CLIENT) to the requester."""

from __future__ import annotations

import time
import uuid
import zlib

from twisted.internet import defer
from twisted.logger import Logger

from rmqtx.client.errors import MQClientError
from rmqtx.client.message import Message, MessageExt
from rmqtx.common.message import (
    PROPERTY_ARRIVE_TIME,
    PROPERTY_CLUSTER,
    PROPERTY_CORRELATION_ID,
    PROPERTY_MESSAGE_TYPE,
    PROPERTY_REPLY_TO_CLIENT,
    PROPERTY_TTL,
    parse_properties,
)
from rmqtx.common.sysflag import SYSFLAG_COMPRESSED
from rmqtx.remoting import RemotingCommand, RemotingProtocol
from rmqtx.remoting.codes import ResponseCode
from rmqtx.remoting.headers import ReplyMessageRequestHeader

log = Logger(namespace="rmqtx.client.reply")

REPLY_MESSAGE_FLAG = "reply"
#: Java's ClientErrorCode values for request-reply failures.
REQUEST_TIMEOUT_CODE = 10006
CREATE_REPLY_MESSAGE_CODE = 10007


class RequestTimeoutError(MQClientError):
    """The request was sent but no reply came within the timeout (Java's RequestTimeoutException)."""


def reply_topic(cluster: str) -> str:
    return f"{cluster}_REPLY_TOPIC"


def create_reply_message(request: MessageExt, body: bytes) -> Message:
    """The reply to ``request`` (Java's MessageUtil.createReplyMessage): its cluster's reply topic, marked as a reply."""
    if request is None:
        raise MQClientError(CREATE_REPLY_MESSAGE_CODE, "create reply message fail, requestMessage cannot be null.")
    cluster = request.properties.get(PROPERTY_CLUSTER)
    if cluster is None:
        raise MQClientError(
            CREATE_REPLY_MESSAGE_CODE,
            f"create reply message fail, requestMessage error, property[{PROPERTY_CLUSTER}] is null.",
        )
    reply = Message(reply_topic(cluster), body)
    reply.properties = {}  # Java builds it with the no-argument constructor: no WAIT
    for name, value in (
        (PROPERTY_MESSAGE_TYPE, REPLY_MESSAGE_FLAG),
        (PROPERTY_CORRELATION_ID, request.properties.get(PROPERTY_CORRELATION_ID)),
        (PROPERTY_REPLY_TO_CLIENT, request.properties.get(PROPERTY_REPLY_TO_CLIENT)),
        (PROPERTY_TTL, request.properties.get(PROPERTY_TTL)),
    ):
        if value is not None:
            reply.properties[name] = value
    return reply


def is_reply(msg: Message) -> bool:
    return msg.properties.get(PROPERTY_MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


def mark_request(msg: Message, client_id: str, timeout: float) -> str:
    """Java's prepareSendRequest: a fresh correlation id, who to reply to, and the TTL in ms."""
    correlation_id = str(uuid.uuid4())
    msg.properties[PROPERTY_CORRELATION_ID] = correlation_id
    msg.properties[PROPERTY_REPLY_TO_CLIENT] = client_id
    msg.properties[PROPERTY_TTL] = str(int(timeout * 1000))
    return correlation_id


class ReplyWaiters:
    """Requests waiting for their reply, by correlation id (one table per client instance)."""

    def __init__(self) -> None:
        self.waiting: dict[str, defer.Deferred[MessageExt]] = {}

    def add(self, correlation_id: str) -> "defer.Deferred[MessageExt]":
        d: defer.Deferred[MessageExt] = defer.Deferred()
        self.waiting[correlation_id] = d
        return d

    def discard(self, correlation_id: str) -> None:
        self.waiting.pop(correlation_id, None)

    def on_push(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (326): hand the reply to its request; SUCCESS even when none waits."""
        try:
            msg = reply_from_push(request)
        except Exception as exc:
            log.warn("unreadable reply message: {exc}", exc=exc)
            return request.make_response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = msg.properties.get(PROPERTY_CORRELATION_ID) or ""
        waiter = self.waiting.pop(correlation_id, None)
        if waiter is None:
            log.warn("reply {cid} from {host} matches no request", cid=correlation_id, host=msg.born_host)
        elif not waiter.called:
            waiter.callback(msg)
        return request.make_response(ResponseCode.SUCCESS)


def reply_from_push(request: RemotingCommand) -> MessageExt:
    """The MessageExt Java's client builds from a pushed reply (body inflated, ARRIVE_TIME added)."""
    header = ReplyMessageRequestHeader.from_command(request)
    msg = MessageExt.__new__(MessageExt)
    msg.topic = header.topic
    msg.flag = header.flag
    msg.properties = parse_properties(header.properties)
    msg.properties[PROPERTY_ARRIVE_TIME] = str(int(time.time() * 1000))
    msg.transaction_id = None
    body = request.body or b""
    msg.body = zlib.decompress(body) if header.sysFlag & SYSFLAG_COMPRESSED else body
    msg.queue_id = header.queueId
    msg.queue_offset = 0
    msg.commit_log_offset = 0
    msg.store_size = 0
    msg.sys_flag = header.sysFlag
    msg.born_timestamp = header.bornTimestamp
    msg.born_host = header.bornHost
    msg.store_timestamp = header.storeTimestamp
    msg.store_host = header.storeHost
    msg.reconsume_times = header.reconsumeTimes or 0
    msg.prepared_transaction_offset = 0
    msg.body_crc = 0
    msg.offset_msg_id = ""
    msg.broker_name = None
    return msg


def timeout_error(topic: str, timeout: float) -> RequestTimeoutError:
    return RequestTimeoutError(
        REQUEST_TIMEOUT_CODE,
        f"send request message to <{topic}> OK, but wait reply message timeout, {int(timeout * 1000)} ms.",
    )

