"""Topic attributes as Apache 5.x keeps them (``queue.type``, ``cleanup.policy``, ``message.type``,
``reserve.time``): the ``+key=value,-key`` modification an UPDATE_AND_CREATE_TOPIC header carries, its
rules (which keys exist, which may change after creation, which values each takes), and the message
type a topic accepts and a message has. The refusals are worded as the 5.x broker words them, since
admin tools print the remark as is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from rmqtx.common.fastjson import java_order, table_capacity

MESSAGE_TYPE = "message.type"
#: TopicMessageType's values; NORMAL when a topic names none.
NORMAL, FIFO, DELAY, TRANSACTION, MIXED, UNSPECIFIED = "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED", "UNSPECIFIED"
MESSAGE_TYPES = (UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED)

JAVA_LONG_MAX = 2**63 - 1


class AttributeRefusal(ValueError):
    """A modification the broker refuses; ``str()`` is the remark (Java's exception message)."""


def _guava_set_buckets(size: int) -> int:
    """Buckets of Guava's ``Sets.newHashSet(e1, ..., eN)`` (the set Java prints in a refusal)."""
    wanted = size + 1 if size < 3 else int(size / 0.75 + 1.0)
    buckets = 1
    while buckets < wanted:
        buckets <<= 1
    return buckets


@dataclass(frozen=True)
class _Enum:
    changeable: bool
    values: tuple[str, ...]  # in the order Java built its set

    def verify(self, value: str) -> None:
        if value not in self.values:
            shown = ", ".join(java_order(list(self.values), _guava_set_buckets(len(self.values))))
            raise AttributeRefusal(f"value is not in set: [{shown}]")


@dataclass(frozen=True)
class _LongRange:
    changeable: bool
    low: int
    high: int

    def verify(self, value: str) -> None:
        if not re.fullmatch(r"[+-]?[0-9]+", value) or not -(2**63) <= int(value) <= JAVA_LONG_MAX:
            raise AttributeRefusal(f'For input string: "{value}"')  # Long.parseLong's NumberFormatException
        number = int(value)
        if not self.low <= number <= self.high:
            raise AttributeRefusal(f"value is not in range({self.low}, {self.high})")


#: TopicAttributes.ALL of Apache 5.x.
ATTRIBUTES: dict[str, _Enum | _LongRange] = {
    "queue.type": _Enum(False, ("BatchCQ", "SimpleCQ")),
    "cleanup.policy": _Enum(False, ("DELETE", "COMPACTION")),
    MESSAGE_TYPE: _Enum(True, MESSAGE_TYPES),
    "reserve.time": _LongRange(True, -1, JAVA_LONG_MAX),
}


def _java_split_eq(text: str) -> list[str]:
    """``String.split("=")``: trailing empty strings dropped."""
    parts = text.split("=")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_modification(text: str | None) -> dict[str, str]:
    """The header's ``+k1=v1,+k2=v2,-k3`` as {signed key: value} (AttributeParser.parseToMap's rules)."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for kv in text.split(","):
        if "=" in kv:
            splits = _java_split_eq(kv)
            if len(splits) < 2:
                raise AttributeRefusal(f"Index 1 out of bounds for length {len(splits)}")
            key, value = splits[0], splits[1]
            if "+" not in key:
                raise AttributeRefusal(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise AttributeRefusal(f"delete attribute format is wrong: {key}")
        if key in out:
            raise AttributeRefusal(f"key duplication: {key}")
        out[key] = value
    return out


def _in_java_order(entries: Mapping[str, str]) -> list[tuple[str, str]]:
    keys = java_order(list(entries), table_capacity(len(entries)))
    return [(k, entries[k]) for k in keys]


def alter(create: bool, current: Mapping[str, str], modification: Mapping[str, str]) -> dict[str, str]:
    """The topic's attributes after ``modification`` (signed keys), as AttributeUtil.alterCurrentAttributes
    decides: on creation only ``+`` keys; later ``+`` adds or replaces, ``-`` deletes a key the topic has;
    every key must be known, and only changeable ones may change after creation."""
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    update: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in _in_java_order(modification):
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise AttributeRefusal("kv string format wrong.")
        if real in seen:
            raise AttributeRefusal(f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith("+"):
                raise AttributeRefusal(f"only add attribute is supported while creating topic. key: {real}")
            init[real] = value
        elif key.startswith("+"):
            (update if real in current else add)[real] = value
        elif key.startswith("-"):
            if real not in current:
                raise AttributeRefusal(f"attempt to delete a nonexistent key: {real}")
            delete[real] = value
        else:
            raise AttributeRefusal(f"wrong format key: {real}")
    for group, is_init, is_delete in ((init, True, False), (add, False, False), (update, False, False),
                                      (delete, False, True)):
        for key, value in _in_java_order(group):
            attribute = ATTRIBUTES.get(key)
            if attribute is None:
                raise AttributeRefusal(f"unsupported key: {key}")
            if not is_init and not attribute.changeable:
                raise AttributeRefusal(f"attempt to update an unchangeable attribute. key: {key}")
            if not is_delete:
                attribute.verify(value)
    final = dict(current)
    final.update(init)
    final.update(add)
    final.update(update)
    for key in delete:
        final.pop(key, None)
    return final


def topic_message_type(attributes: Mapping[str, str] | None) -> str:
    """The message type a topic accepts: its ``message.type``, NORMAL when it has none."""
    value = (attributes or {}).get(MESSAGE_TYPE)
    return value if value in MESSAGE_TYPES else NORMAL


def message_type(properties: Mapping[str, str]) -> str:
    """What a message is, from its properties (TopicMessageType.parseFromMessageProperty's order)."""
    if properties.get("TRAN_MSG") == "true":
        return TRANSACTION
    if any(properties.get(k) is not None for k in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")):
        return DELAY
    if properties.get("__SHARDINGKEY") is not None:
        return FIFO
    return NORMAL


def type_mismatch(topic_type: str, msg_type: str) -> str | None:
    """The proxy's refusal text when a message of ``msg_type`` may not go to a topic of ``topic_type``."""
    if msg_type == UNSPECIFIED or (msg_type != topic_type and topic_type != MIXED):
        return f"TopicMessageType validate failed, the expected type is {topic_type}, but actual type is {msg_type}"
    return None
