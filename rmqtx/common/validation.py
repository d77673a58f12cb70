"""Message checks shared by the broker's send path and the gRPC endpoint, with Apache 5.x's limits.

The size rule is the store's, and so holds for every way a message reaches it (remoting send, gRPC
send, transactions, timers): the *body* may be up to ``maxMessageSize``, and the stored record may
exceed it by 64 KiB for header, topic and properties. The other checks are the proxy's: Apache's
broker makes none of them on its remoting path, so only the gRPC endpoint calls them. A failed
check raises :class:`MessageRefusal`, named by its apache.rocketmq.v2.Code.
"""

from __future__ import annotations

from typing import Iterable, Mapping

#: Room a stored record has beside its body (Apache's MessageExtEncoder reserves 64 KiB).
RECORD_OVERHEAD = 64 * 1024
#: Apache's proxy defaults: maxUserPropertySize (tag, keys and user properties, UTF-8 bytes) and
#: userPropertyMaxNum.
MAX_USER_PROPERTY_SIZE = 16 * 1024
USER_PROPERTY_MAX_NUM = 128

#: Property names a client may not set as user properties (Apache's MessageConst.STRING_HASH_SET).
SYSTEM_PROPERTY_NAMES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
    "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
    "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
    "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
    "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
    "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
    "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
})


class MessageRefusal(Exception):
    """A message a check refuses: ``code`` is an apache.rocketmq.v2.Code name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- size: the store's rule (every send path) ----------------------------------------------------
def body_too_large(body_size: int, max_message_size: int) -> bool:
    """The body alone is judged against maxMessageSize (0 or less: no limit, as the proxy's check)."""
    return 0 < max_message_size < body_size


def max_record_size(max_message_size: int) -> int:
    """The largest stored record: a full body plus the 64 KiB reserved for the rest (int-capped, as Java)."""
    return min(max_message_size + RECORD_OVERHEAD, 0x7FFFFFFF)


def check_body(body: bytes, max_message_size: int) -> None:
    """MESSAGE_BODY_EMPTY / MESSAGE_BODY_TOO_LARGE, the proxy's checks of a body before it is sent."""
    if not body:
        raise MessageRefusal("MESSAGE_BODY_EMPTY", "message body cannot be empty")
    if body_too_large(len(body), max_message_size):
        raise MessageRefusal("MESSAGE_BODY_TOO_LARGE", f"message body cannot exceed the max {max_message_size}")


# -- text: the proxy's checks of what a 5.x client sets ------------------------------------------
def is_control(ch: str) -> bool:
    """Java's Character.isISOControl: U+0000..U+001F and U+007F..U+009F."""
    code = ord(ch)
    return code <= 0x1F or 0x7F <= code <= 0x9F


def has_control(text: str) -> bool:
    return any(is_control(ch) for ch in text)


def _blank(text: str) -> bool:
    return not text.strip()


def check_tag(tag: str) -> None:
    """ILLEGAL_MESSAGE_TAG: blank, ``|`` (the filter's separator) or a control character."""
    if not tag:
        return
    if _blank(tag):
        raise MessageRefusal("ILLEGAL_MESSAGE_TAG", "tag cannot be the char sequence of whitespace")
    if "|" in tag:
        raise MessageRefusal("ILLEGAL_MESSAGE_TAG", "tag cannot contain '|'")
    if has_control(tag):
        raise MessageRefusal("ILLEGAL_MESSAGE_TAG", "tag cannot contain control character")


def check_key(key: str) -> None:
    """ILLEGAL_MESSAGE_KEY: blank or a control character (the index would store it as is)."""
    if not key:
        return
    if _blank(key):
        raise MessageRefusal("ILLEGAL_MESSAGE_KEY", "key cannot be the char sequence of whitespace")
    if has_control(key):
        raise MessageRefusal("ILLEGAL_MESSAGE_KEY", "key cannot contain control character")


def check_properties(user_properties: Mapping[str, str], tag: str, keys: Iterable[str],
                     max_size: int = MAX_USER_PROPERTY_SIZE, max_num: int = USER_PROPERTY_MAX_NUM) -> None:
    """The proxy's checks of a message's user properties, tag and keys, in its order: how many, system
    names, control characters (property, then tag, then keys), then their total UTF-8 size."""
    if len(user_properties) > max_num:
        raise MessageRefusal("MESSAGE_PROPERTIES_TOO_LARGE", f"too many user properties, max is {max_num}")
    size = 0
    for key, value in user_properties.items():
        if key in SYSTEM_PROPERTY_NAMES:
            raise MessageRefusal("ILLEGAL_MESSAGE_PROPERTY_KEY", f"property is used by system: {key}")
        if has_control(key):
            raise MessageRefusal("ILLEGAL_MESSAGE_PROPERTY_KEY", "the key of property cannot contain control character")
        if has_control(value):
            raise MessageRefusal("ILLEGAL_MESSAGE_PROPERTY_KEY", "the value of property cannot contain control character")
        size += len(key.encode()) + len(value.encode())
    check_tag(tag)
    size += len(tag.encode())
    for key in keys:
        check_key(key)
        size += len(key.encode())
    if size > max_size:
        raise MessageRefusal("MESSAGE_PROPERTIES_TOO_LARGE", f"the total size of user property is too large, max is {max_size}")


__all__ = [
    "MAX_USER_PROPERTY_SIZE", "MessageRefusal", "RECORD_OVERHEAD", "SYSTEM_PROPERTY_NAMES", "USER_PROPERTY_MAX_NUM",
    "body_too_large", "check_body", "check_key", "check_properties", "check_tag", "has_control", "is_control",
    "max_record_size",
]
