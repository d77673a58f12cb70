"""Queue position requests (GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME)."""

from __future__ import annotations

from rmqtx.client.message import MessageQueue
from rmqtx.client.mq_client import MQClientInstance
from rmqtx.client.util import java_fields
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.headers import SearchOffsetRequestHeader, TopicQueueRequestHeader


async def _ask(client: MQClientInstance, mq: MessageQueue, code: int, fields: dict[str, str], answer: str) -> int:
    addr = await client.find_master_addr(mq.broker_name, mq.topic)
    response = await client.call(addr, RemotingCommand.request(code, fields))
    return int(response.field(answer) or 0)


async def max_offset(client: MQClientInstance, mq: MessageQueue) -> int:
    """The offset the next message of ``mq`` will get."""
    fields = java_fields(TopicQueueRequestHeader(mq.topic, mq.queue_id, mq.broker_name))
    return await _ask(client, mq, RequestCode.GET_MAX_OFFSET, fields, "offset")


async def min_offset(client: MQClientInstance, mq: MessageQueue) -> int:
    fields = java_fields(TopicQueueRequestHeader(mq.topic, mq.queue_id, mq.broker_name))
    return await _ask(client, mq, RequestCode.GET_MIN_OFFSET, fields, "offset")


async def search_offset(client: MQClientInstance, mq: MessageQueue, timestamp: int) -> int:
    """The first offset stored at or after ``timestamp`` (epoch ms)."""
    fields = java_fields(SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp, mq.broker_name))
    return await _ask(client, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields, "offset")


async def earliest_msg_store_time(client: MQClientInstance, mq: MessageQueue) -> int:
    fields = java_fields(TopicQueueRequestHeader(mq.topic, mq.queue_id, mq.broker_name))
    return await _ask(client, mq, RequestCode.GET_EARLIEST_MSG_STORETIME, fields, "timestamp")
