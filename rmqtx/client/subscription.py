"""SubscriptionData as Java's FilterAPI builds it: tag expressions hashed, SQL92 passed through."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rmqtx.client.message import hashset_order
from rmqtx.common.javacompat import java_string_hash

SUB_ALL = "*"
TAG = "TAG"
SQL92 = "SQL92"


@dataclass
class SubscriptionData:
    """One topic's filter; ``sub_version`` changes when the consumer's queues change."""

    topic: str
    sub_string: str = SUB_ALL
    expression_type: str = TAG
    tags: list[str] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=lambda: int(time.time() * 1000))

    @classmethod
    def build(cls, topic: str, expression: str | None, expression_type: str | None = TAG) -> "SubscriptionData":
        """Parse ``"TagA || TagB"`` (or ``*``); SQL92 expressions are kept as written."""
        kind = (expression_type or TAG).upper()
        if kind != TAG:
            if kind != SQL92:
                raise ValueError(f"unknown expression type {expression_type!r}")
            return cls(topic, (expression or "").strip(), SQL92)
        text = (expression or "").strip()
        if text in ("", SUB_ALL):
            return cls(topic)
        tags = list(dict.fromkeys(t.strip() for t in text.split("||") if t.strip()))
        if not tags:
            raise ValueError(f"subString split error: {expression!r}")
        return cls(topic, text, TAG, tags, list(dict.fromkeys(java_string_hash(t) for t in tags)))

    @property
    def is_tag(self) -> bool:
        return self.expression_type == TAG

    def matches_tags(self, tags: str | None) -> bool:
        """Client-side re-check of a tag filter (the broker filters by hash code only)."""
        return not self.tags or (tags is not None and tags in self.tags)

    def to_json(self) -> dict:
        """The heartbeat's SubscriptionData bean (HashSets in Java iteration order)."""
        return {
            "classFilterMode": False,
            "codeSet": hashset_order(self.codes, lambda c: c),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": hashset_order(self.tags, java_string_hash),
            "topic": self.topic,
        }
