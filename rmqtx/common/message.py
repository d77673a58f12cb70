"""Message properties as RocketMQ strings them: ``name\\x01value\\x02name\\x01value``."""

from __future__ import annotations

from rmqtx.accel import accel
from rmqtx.common.javacompat import hashmap_order

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_WAIT = "WAIT"
PROPERTY_DELAY = "DELAY"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_CONSUME_START_TIME = "CONSUME_START_TIME"
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_CORRELATION_ID = "CORRELATION_ID"
PROPERTY_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PROPERTY_TTL = "TTL"
PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
PROPERTY_ARRIVE_TIME = "ARRIVE_TIME"
PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"


def parse_properties_py(text: str | None) -> dict[str, str]:
    """Properties string to a dict as Java's split does: items that are not ``name\x01value`` are skipped.

    A trailing separator (non-Java clients add one) is accepted.
    """
    props: dict[str, str] = {}
    if not text:
        return props
    for item in text.split(PROPERTY_SEPARATOR):
        pair = item.split(NAME_VALUE_SEPARATOR)
        while pair and not pair[-1]:
            pair.pop()  # Java's String.split drops trailing empty strings
        if len(pair) == 2:
            props[pair[0]] = pair[1]
    return props


parse_properties = parse_properties_py
if accel is not None:
    parse_properties = accel.parse_properties  # noqa: F811


def join_properties(props: dict[str, str], order: tuple[str, ...]) -> str:
    """``name\x01value`` of each name in ``order``, joined by ``\x02``."""
    return PROPERTY_SEPARATOR.join([f"{name}{NAME_VALUE_SEPARATOR}{props[name]}" for name in order])


join_properties_py = join_properties
if accel is not None:
    join_properties = accel.join_properties  # noqa: F811


def properties_to_string(props: dict[str, str]) -> str:
    """The string Java 4.9 stores: HashMap order (as inserted here), no trailing separator."""
    return join_properties(props, hashmap_order(tuple(props)))
