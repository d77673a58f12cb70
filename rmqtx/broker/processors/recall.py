"""RECALL_MESSAGE (370, RocketMQ 5.3): cancel a pending timer message by the recall handle its send gave.

The handle is base64url of ``v1 topic brokerName timestamp uniqKey``. A recall stores a small message
with TIMER_DEL_UNIQKEY through the timer, due at the same time as the one it cancels, so the timer
wheel finds both in one slot and skips the cancelled one (rmqtx.broker.timer). Off unless
``recallMessageEnable=true``, as in Java 5.3.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Optional

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.processors.send import _born_host
from rmqtx.broker.recall_handle import decode_handle
from rmqtx.broker.timer import TIMER_DEL_UNIQKEY, TIMER_DELIVER_MS, delete_key
from rmqtx.common.message import PROPERTY_TAGS, PROPERTY_UNIQ_KEY, properties_to_string
from rmqtx.common.topics import PERM_WRITE
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.header import CommandHeader
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.results import MessageToStore, PutStatus

RECALL_TAG = "_RECALL_TAG_"
_STORED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE)
_NOT_AVAILABLE = "recall failed, broker service not available"
_LONG = re.compile(r"[+-]?[0-9]+\Z")


@dataclass(slots=True)
class RecallMessageRequestHeader(CommandHeader):
    topic: str
    recallHandle: str
    producerGroup: Optional[str] = None


def _to_long(text: str) -> int:
    """NumberUtils.toLong(text, -1): a Java long, else -1."""
    if len(text) > 20 or not _LONG.match(text):
        return -1
    value = int(text)
    return value if -(2**63) <= value < 2**63 else -1


class RecallProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {RequestCode.RECALL_MESSAGE: self.recall}

    def recall(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ctx, cfg = self.ctx, self.ctx.config
        header = RecallMessageRequestHeader.from_command(request)
        fields = {"MSG_REGION": cfg.regionId}

        def answer(code: int, remark: str | None = None) -> RemotingCommand:
            return request.make_response(code, remark, ext_fields=fields)

        if not cfg.switches.recall_message_enable:
            return answer(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if cfg.is_slave:
            return answer(ResponseCode.SLAVE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if not cfg.brokerPermission & PERM_WRITE and not cfg.switches.allow_recall_when_broker_not_writeable:
            return answer(ResponseCode.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if ctx.topics.get(header.topic) is None:
            return answer(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist")
        try:
            handle = decode_handle(header.recallHandle)
        except ValueError as exc:
            return answer(ResponseCode.ILLEGAL_OPERATION, str(exc))
        if header.topic != handle.topic:
            return answer(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if cfg.brokerName != handle.broker_name:
            return answer(ResponseCode.ILLEGAL_OPERATION, _NOT_AVAILABLE)
        timer = ctx.timer
        max_delay_ms = (timer.cfg.timerMaxDelaySec if timer is not None else 3 * 24 * 3600) * 1000
        timestamp = _to_long(handle.timestamp)
        left = timestamp - int(time.time() * 1000)
        if left <= 0 or left >= max_delay_ms:
            return answer(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        now = int(time.time() * 1000)
        props = {
            PROPERTY_TAGS: RECALL_TAG,
            TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.uniq_key),
            PROPERTY_UNIQ_KEY: handle.uniq_key,
            TIMER_DELIVER_MS: handle.timestamp,
            "BORN_TIMESTAMP": str(now),
            "TRACE_CONTEXT": "",
        }
        if header.producerGroup is not None:
            props["PGROUP"] = header.producerGroup
        topic, queue_id = handle.topic, 0
        if timer is None:
            return answer(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        topic, queue_id, refusal = timer.redirect(topic, queue_id, props, 0)
        if refusal is not None:  # the store's timer hook refuses it: Java answers its generic failure
            return answer(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        msg = MessageToStore(topic, queue_id, 0, b"0", properties_to_string(props), 0, now, _born_host(conn), ctx.store_host)
        result = ctx.store.append_message(msg, props)
        if result.status not in _STORED:
            return answer(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        fields["msgId"] = handle.uniq_key
        return answer(ResponseCode.SUCCESS)


__all__ = ["RecallProcessor"]
