"""PopConsumer: RocketMQ 5.x POP consumption over remoting, as the 5.x Java client's pop calls do it.

``receive`` pops from every broker of the topic (all queues, queueId -1, or one queue), long polling
on the last; each message carries its ``POP_CK`` extra info, built from the answer the way the Java
client builds it, which ``ack`` and ``change_invisible_time`` send back.
"""

from __future__ import annotations

import random
import time
from typing import Any

from rmqtx.client.config import ClientConfig
from rmqtx.client.consumer import CLUSTERING, CONSUME_FROM_LAST_OFFSET, _ConsumerBase
from rmqtx.client.errors import MQBrokerError
from rmqtx.client.message import MessageExt, decode_messages
from rmqtx.common.subscription import SubscriptionData
from rmqtx.client.util import deferred
from rmqtx.common import pop_keys as keys
from rmqtx.common.message import PROPERTY_FIRST_POP_TIME, PROPERTY_POP_CK
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

_EMPTY = (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_FULL)


def _entries(text: str | None) -> dict[str, str]:
    """``mark qid value;...`` as {"mark@qid": value}."""
    out: dict[str, str] = {}
    for entry in (text or "").split(";"):
        parts = entry.split(" ")
        if len(parts) == 3:
            out[f"{parts[0]}@{parts[1]}"] = parts[2]
    return out


def stamp_messages(msgs: list[MessageExt], topic: str, broker_name: str, header: PopMessageResponseHeader,
                   order: bool) -> None:
    """Give each popped message its POP_CK (and, popped in order, its consume count as reconsumeTimes)."""
    starts = _entries(header.startOffsetInfo)
    counts = _entries(header.orderCountInfo) if order else {}
    for m in msgs:
        if PROPERTY_POP_CK not in m.properties:
            start = int(starts.get(f"{keys.retry_mark(m.topic)}@{m.queue_id}", m.queue_offset))
            m.properties[PROPERTY_POP_CK] = keys.extra_info(
                start, header.popTime, header.invisibleTime, header.reviveQid, m.topic, broker_name, m.queue_id, m.queue_offset)
            if order:
                mark = keys.retry_mark(m.topic)
                count = counts.get(f"{mark}@{keys.order_count_key(m.queue_id, m.queue_offset)}", counts.get(f"{mark}@{m.queue_id}"))
                if count is not None and int(count) > 0:
                    m.reconsume_times = int(count)
        m.properties.setdefault(PROPERTY_FIRST_POP_TIME, str(header.popTime))
        m.broker_name = broker_name
        m.topic = topic



def _offset(info: keys.ExtraInfo, msg: MessageExt) -> int:
    """The offset an ack or change names: the checkpoint's, else the message's own (as Java's client sends)."""
    return info.msg_offset if info.msg_offset is not None else msg.queue_offset

class PopConsumer(_ConsumerBase):
    """Pops, acks and changes invisible times for one group (like the 5.x SimpleConsumer)."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(self, group: str, namesrv_addr: str | None = None, *, config: ClientConfig | None = None,
                 reactor: Any = None, access_key: str | None = None, secret_key: str | None = None) -> None:
        super().__init__(group, namesrv_addr, config, reactor, CLUSTERING, CONSUME_FROM_LAST_OFFSET, None,
                         access_key, secret_key)

    @deferred
    async def start(self) -> None:
        client = await self._join()
        client.start()

    @deferred
    async def shutdown(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.unregister_consumer(self.group)

    @deferred
    async def receive(self, topic: str, max_nums: int = 32, invisible_time: float = 60.0, poll_time: float = 15.0,
                      expression: str = "*", *, order: bool = False, queue_id: int = -1,
                      from_first: bool = False) -> list[MessageExt]:
        """Up to ``max_nums`` messages, invisible to the group for ``invisible_time`` seconds unless acked."""
        client = self._running()
        self.subscriptions.setdefault(topic, SubscriptionData.build(topic, "*"))
        route = await client.route(topic)
        names = sorted({mq.broker_name for mq in route.subscribe_queues(topic)})
        random.shuffle(names)
        for i, name in enumerate(names):
            last = i == len(names) - 1
            header = PopMessageRequestHeader(
                self.group, topic, queue_id, max_nums, int(invisible_time * 1000), int(poll_time * 1000) if last else 0,
                int(time.time() * 1000), keys.INIT_MIN if from_first else keys.INIT_MAX, "TAG", expression, order,
            )
            addr = await client.find_master_addr(name, topic)
            timeout = (poll_time if last else 0) + 10
            response = await client.call(addr, RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_fields()),
                                         timeout, ok=(ResponseCode.SUCCESS, *_EMPTY))
            if response.code != ResponseCode.SUCCESS:
                continue
            answer = PopMessageResponseHeader.from_command(response)
            msgs = decode_messages(response.body, name)
            stamp_messages(msgs, topic, name, answer, order)
            return msgs
        return []

    async def _target(self, msg: MessageExt) -> tuple[str, keys.ExtraInfo]:
        info = keys.ExtraInfo.parse(msg.properties.get(PROPERTY_POP_CK))
        return await self._running().find_master_addr(info.broker_name, msg.topic), info

    @deferred
    async def ack(self, msg: MessageExt) -> None:
        """ACK_MESSAGE; a refusal (the checkpoint is gone, the offset illegal) raises MQBrokerError."""
        addr, info = await self._target(msg)
        header = AckMessageRequestHeader(self.group, keys.real_topic(msg.topic, self.group, info.mark), info.queue_id,
                                         msg.properties[PROPERTY_POP_CK], _offset(info, msg))
        await self._running().call(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_fields()))

    @deferred
    async def change_invisible_time(self, msg: MessageExt, invisible_time: float) -> None:
        """CHANGE_MESSAGE_INVISIBLETIME: the message comes back ``invisible_time`` seconds from now unless acked
        (its POP_CK is updated to the new checkpoint, which a later ack must name)."""
        addr, info = await self._target(msg)
        real = keys.real_topic(msg.topic, self.group, info.mark)
        header = ChangeInvisibleTimeRequestHeader(self.group, real, info.queue_id, msg.properties[PROPERTY_POP_CK],
                                                  _offset(info, msg), int(invisible_time * 1000))
        response = await self._running().call(
            addr, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_fields()))
        answer = ChangeInvisibleTimeResponseHeader.from_command(response)
        if info.msg_offset is None:
            raise MQBrokerError(ResponseCode.MESSAGE_ILLEGAL, "POP_CK without the message offset", addr)
        msg.properties[PROPERTY_POP_CK] = keys.extra_info(
            info.msg_offset, answer.popTime, answer.invisibleTime, answer.reviveQid, real, info.broker_name,
            info.queue_id, info.msg_offset)
