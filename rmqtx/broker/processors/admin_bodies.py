"""Shared pieces of the admin bodies: MessageQueue-keyed maps, connections, Java system topics.

Java keys TopicStatsTable, ConsumeStats and ResetOffsetBody by MessageQueue beans in a HashMap;
fastjson writes each key as an object, in the map's bucket order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from rmqtx.broker.clients import ClientChannel
from rmqtx.common.fastjson import OrderedMap, table_capacity
from rmqtx.common.javacompat import java_string_hash
from rmqtx.common.topics import (
    BENCHMARK_TOPIC,
    DEFAULT_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    validate_name,
)
from rmqtx.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rmqtx.broker.config import BrokerConfig

_MASK32 = 0xFFFFFFFF
#: TopicValidator's fixed system topics; the broker adds its cluster, name and trace topic.
SYSTEM_TOPICS = frozenset(
    {DEFAULT_TOPIC, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC, "RMQ_SYS_TRACE_TOPIC",
     TRANS_OP_HALF_TOPIC, "TRANS_CHECK_MAX_TIME_TOPIC", SELF_TEST_TOPIC, OFFSET_MOVED_EVENT}
)

MQ = tuple[str, str, int]  # topic, brokerName, queueId


def mq_key(mq: MQ) -> tuple:
    """A MessageQueue as the fastjson writer takes a bean key (sorted items)."""
    topic, broker, queue_id = mq
    return (("brokerName", broker), ("queueId", queue_id), ("topic", topic))


def mq_json(mq: MQ) -> dict:
    return dict(mq_key(mq))


def _mq_hash(mq: MQ) -> int:
    topic, broker, queue_id = mq
    h = (31 + java_string_hash(broker)) & _MASK32
    h = (31 * h + queue_id) & _MASK32
    return (31 * h + java_string_hash(topic)) & _MASK32


def mq_map(entries: Iterable[tuple[MQ, Any]]) -> OrderedMap:
    """``HashMap<MessageQueue, V>`` filled in the given order, written in Java's iteration order."""
    items = list(entries)
    mask = table_capacity(len(items)) - 1

    def bucket(indexed: tuple[int, tuple[MQ, Any]]) -> tuple[int, int]:
        h = _mq_hash(indexed[1][0])
        return ((h ^ (h >> 16)) & mask, indexed[0])

    return OrderedMap((mq_key(mq), value) for _, (mq, value) in sorted(enumerate(items), key=bucket))


def mq_set_order(mqs: Iterable[MQ], initial: int = 16) -> list[MQ]:
    """Iteration order of a ``HashSet<MessageQueue>`` of ``initial`` capacity filled with ``mqs`` in order."""
    items = list(dict.fromkeys(mqs))
    mask = table_capacity(len(items), initial) - 1

    def bucket(indexed: tuple[int, MQ]) -> tuple[int, int]:
        h = _mq_hash(indexed[1])
        return ((h ^ (h >> 16)) & mask, indexed[0])

    return [mq for _, mq in sorted(enumerate(items), key=bucket)]


def connection_json(channel: ClientChannel) -> dict:
    """A ``Connection`` bean (mqadmin consumerConnection / producerConnection rows)."""
    return {
        "clientAddr": channel.conn.peer,
        "clientId": channel.client_id,
        "language": channel.language,
        "version": channel.version,
    }


def topic_remark(topic: str | None) -> str | None:
    """Java's TopicValidator remark for a name that must not reach a file path, or None."""
    why = validate_name(topic)
    if why is None:
        return None
    if not topic:
        return "The specified topic is blank."
    if "illegal" in why:
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return "The specified topic is longer than topic max length."


def system_topics(config: BrokerConfig) -> set[str]:
    """The broker's system topic set (GET_SYSTEM_TOPIC_LIST_FROM_BROKER, the create/delete guard)."""
    cluster = config.brokerClusterName
    return set(SYSTEM_TOPICS) | {cluster, config.brokerName, config.msgTraceTopicName, f"{cluster}_REPLY_TOPIC"}


def is_system_topic(topic: str, config: BrokerConfig) -> bool:
    return topic in system_topics(config) or topic.startswith(SYSTEM_TOPIC_PREFIX)


def ok(request: RemotingCommand, body: bytes = b"") -> RemotingCommand:
    """SUCCESS without remark or ext fields, as Java's ``createResponseCommand(null)`` ends up."""
    return request.make_response(0, body=body)
