"""Topic names, prefixes and permissions every layer shares (Java's ``TopicValidator``, ``MixAll``,
``PermName`` and ``TopicSysFlag``), defined once here."""

from __future__ import annotations

import re

DEFAULT_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TIMER_TOPIC = "rmq_sys_wheel_timer"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"

#: PermName: what a topic's queues allow.
PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1
#: TopicSysFlag: unit (and unit-subscribed) topics.
FLAG_UNIT, FLAG_UNIT_SUB = 0x1, 0x2

TOPIC_MAX_LENGTH = 127
_VALID_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def validate_name(name: str | None, what: str = "topic") -> str | None:
    """Why ``name`` is not a safe topic or group name (it becomes a path), or None if it is."""
    if not name:
        return f"The specified {what} is blank."
    if not _VALID_NAME.match(name):
        return f"The specified {what}[{name}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(name) > TOPIC_MAX_LENGTH:
        return f"The specified {what} is longer than {what} max length {TOPIC_MAX_LENGTH}."
    return None


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def retry_topic(group: str) -> str:
    """A consumer group's retry topic, ``%RETRY%group``."""
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    """A consumer group's dead-letter topic, ``%DLQ%group``."""
    return DLQ_PREFIX + group

#: Consumer groups of the broker's own (MixAll.CID_RMQ_SYS_PREFIX): a 5.x proxy refuses them to clients.
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
#: The client's Validators: the longest group name.
GROUP_MAX_LENGTH = 255
