"""Recall handles of RocketMQ 5.3: what a timer message's send answers, and what RECALL_MESSAGE takes.

A handle is base64url of ``v1 topic brokerName timestamp uniqKey`` (Java's RecallMessageHandle.HandleV1).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import NamedTuple

from rmqtx.common.topics import RETRY_PREFIX

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}\Z")
_LONG = re.compile(r"[+-]?[0-9]+\Z")


class RecallHandle(NamedTuple):
    topic: str
    broker_name: str
    timestamp: str
    uniq_key: str


def build_handle(topic: str, broker_name: str, timestamp: str, uniq_key: str) -> str:
    """What a send of a timer message answers in ``recallHandle`` (Java's HandleV1.buildHandle)."""
    return base64.urlsafe_b64encode(" ".join(("v1", topic, broker_name, timestamp, uniq_key)).encode()).decode()


def decode_handle(handle: str) -> RecallHandle:
    """Java's RecallMessageHandle.decodeHandle; ValueError("recall handle is invalid") otherwise."""
    invalid = ValueError("recall handle is invalid")
    if not handle or not _BASE64URL.match(handle) or len(handle.rstrip("=")) % 4 == 1:
        raise invalid
    if "=" in handle and len(handle) % 4:
        raise invalid  # padded, then it must be whole
    try:
        raw = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        raise invalid from None
    items = raw.split(" ")
    while items and items[-1] == "":  # String.split drops trailing empty strings
        items.pop()
    if not items or items[0] != "v1" or len(items) < 5:
        raise invalid
    return RecallHandle(items[1], items[2], items[3], items[4])


def recall_handle_for(props: dict[str, str], broker_name: str) -> str | None:
    """The handle a send answers for a message stored to the timer (Java's attachRecallHandle)."""
    out_ms, real_topic = props.get("TIMER_OUT_MS"), props.get("REAL_TOPIC")
    if out_ms is None or real_topic is None or real_topic.startswith(RETRY_PREFIX) or not _LONG.match(out_ms):
        return None
    uniq_key = props.get("UNIQ_KEY")
    return build_handle(real_topic, broker_name, str(int(out_ms) + 1), "null" if uniq_key is None else uniq_key)


__all__ = ["RecallHandle", "build_handle", "decode_handle", "recall_handle_for"]
