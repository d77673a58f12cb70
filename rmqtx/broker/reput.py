"""The copies the broker writes of a stored message (schedule due, send-back, DLQ, commit), built as Java 4.9.8 builds them.

Java decodes the stored record's properties into a HashMap, changes some keys and writes the map
back: the new string is in HashMap order, and keys Java only clears from the in-memory map after
writing the string (DELAY when a delayed message is due, REAL_TOPIC/REAL_QID/TRAN_MSG on commit)
stay in what is stored. Only the decision where the copy goes uses the cleared map.
"""

from __future__ import annotations

from rmqtx.common.message import (
    PROPERTY_DELAY,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT,
    parse_properties,
    properties_to_string,
)
from rmqtx.common.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK
from rmqtx.store.record import Record
from rmqtx.store.results import MessageToStore


def delay_level(props: dict[str, str]) -> int:
    """Java's getDelayTimeLevel: the DELAY property as an int, 0 when absent."""
    text = props.get(PROPERTY_DELAY)
    try:
        return int(text) if text else 0
    except ValueError:
        return 0


def sendback_properties(record: Record, offset_msg_id: str, level: int) -> dict[str, str]:
    """CONSUMER_SEND_MSG_BACK's copy: RETRY_TOPIC kept or set, WAIT=false, DELAY=level (0 for the DLQ), ORIGIN_MESSAGE_ID.

    ``offset_msg_id`` is the record's own offset id: the origin of a first send-back.
    """
    props = parse_properties(record.properties)
    if PROPERTY_RETRY_TOPIC not in props:
        props[PROPERTY_RETRY_TOPIC] = record.topic
    props[PROPERTY_WAIT] = "false"
    props[PROPERTY_DELAY] = str(level)
    if not (props.get(PROPERTY_ORIGIN_MESSAGE_ID) or "").strip():
        props[PROPERTY_ORIGIN_MESSAGE_ID] = offset_msg_id
    return props


def copy_of(record: Record, topic: str, queue_id: int, props: dict[str, str], **changes: object) -> MessageToStore:
    """A new message from a stored record (body, flags, times, hosts, reconsume times) on ``topic``/``queue_id``
    with ``props`` as its stored string; ``changes`` override any other field."""
    fields = dict(
        topic=topic, queue_id=queue_id, flag=record.flag, body=record.body, properties=properties_to_string(props),
        sys_flag=record.sys_flag, born_timestamp=record.born_timestamp, born_host=(record.born_host, record.born_port),
        store_host=(record.store_host, record.store_port), reconsume_times=record.reconsume_times,
    )
    fields.update(changes)
    return MessageToStore(**fields)  # type: ignore[arg-type]


def due_copy(record: Record) -> MessageToStore | None:
    """A due SCHEDULE_TOPIC_XXXX record on its real topic and queue; None when it names none (or the half topic).

    The stored string is the decoded map re-written: DELAY, REAL_TOPIC and REAL_QID stay in it.
    The copy has no prepared transaction offset; store host and reconsume times are the record's.
    """
    props = parse_properties(record.properties)
    topic = props.get(PROPERTY_REAL_TOPIC)
    queue_text = props.get(PROPERTY_REAL_QUEUE_ID, "")
    if not topic or topic == "RMQ_SYS_TRANS_HALF_TOPIC" or not queue_text.lstrip("-").isdigit():
        return None
    return copy_of(record, topic, int(queue_text), props)


def committed_copy(half: Record) -> tuple[MessageToStore, dict[str, str]]:
    """END_TRANSACTION commit: the half message on its real topic, sysFlag COMMIT, every half property kept.

    Also returns the map Java routes with (REAL_TOPIC, REAL_QID and TRAN_MSG cleared): when it
    still holds a DELAY level the caller sends the copy through the schedule topic, whose string
    is then re-written from that map.
    """
    props = parse_properties(half.properties)
    copy = copy_of(
        half, props.get(PROPERTY_REAL_TOPIC, ""), int(props.get(PROPERTY_REAL_QUEUE_ID, "0") or 0), props,
        sys_flag=(half.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT, prepared_transaction_offset=half.physical_offset,
    )
    routing = {k: v for k, v in props.items() if k not in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED)}
    return copy, routing
