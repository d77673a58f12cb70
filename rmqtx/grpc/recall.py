"""RecallMessage (apache.rocketmq.v2, RocketMQ 5.3): cancel a pending timer message by its recall handle.

As Apache's proxy: the topic name is checked, then (enableTopicMessageTypeCheck) that the topic takes
DELAY messages, the handle decoded for its broker name, and the broker's RECALL_MESSAGE answer mapped
to a Code (TOPIC_NOT_EXIST -> TOPIC_NOT_FOUND, any other failure INTERNAL_SERVER_ERROR with the
broker's remark).
"""

from __future__ import annotations

from typing import Any

from rmqtx.broker.recall_handle import decode_handle
from rmqtx.common import topic_attributes
from rmqtx.grpc.backend import PROXY_EXCEPTION, GrpcError
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode

#: Apache's proxy waits 2 s for the broker's answer to a recall.
RECALL_TIMEOUT_S = 2.0
_CODES = {
    ResponseCode.TOPIC_NOT_EXIST: "TOPIC_NOT_FOUND",
    ResponseCode.SYSTEM_BUSY: "TOO_MANY_REQUESTS",
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: "NOT_IMPLEMENTED",
}


async def recall(backend: Any, topic: str, handle: str) -> str:
    """The recalled message's id; GrpcError otherwise."""
    backend.validate_topic(topic)
    if backend.limits.topic_message_type_check:  # as the proxy: only a DELAY (or MIXED) topic has timer messages
        why = topic_attributes.type_mismatch(backend.topic_message_type(topic), topic_attributes.DELAY)
        if why is not None:
            raise GrpcError("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", f"{PROXY_EXCEPTION}: {why}")
    try:
        broker_name = decode_handle(handle).broker_name
    except ValueError as exc:
        raise GrpcError("INTERNAL_SERVER_ERROR", str(exc)) from None
    fields = {"topic": topic, "recallHandle": handle, "bname": broker_name}
    response = await backend._call(RemotingCommand(RequestCode.RECALL_MESSAGE, ext_fields=fields), RECALL_TIMEOUT_S)
    if response.code != ResponseCode.SUCCESS:
        raise GrpcError(_CODES.get(response.code, "INTERNAL_SERVER_ERROR"), response.remark or str(response.code))
    return response.field("msgId") or ""


__all__ = ["recall"]
