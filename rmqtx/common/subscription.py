"""Java's SubscriptionData bean: one topic's filter, as a consumer sends it in HEART_BEAT (and
CHECK_CLIENT_CONFIG) and the broker returns it in the consumer connection and subscription bodies.

One bean for the client and the broker; each side builds and encodes it its own way:

- the client builds it as Java's FilterAPI does (``build``: tags deduplicated in order, a bad
  expression refused, ``sub_version`` the time of building) and sends the sets in the order a Java
  ``HashSet`` iterates them (``client_json``), so the heartbeat's bytes are the Java client's;
- the broker reads the bean a client sent (``from_json``) or a pull's own expression
  (``from_expression``), taking what it is given, and writes it back (``broker_json``) with
  ``tagsSet`` as the client sent it and ``codeSet`` sorted, which is what the replayed 4.9.8 captures
  hold. The two encodings stay two functions: one changed to suit the other would change the bytes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rmqtx.common.javacompat import hashset_order, java_string_hash

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
    codes: list[int] = field(default_factory=list)  # the tags' Java hash codes, no duplicates
    sub_version: int = 0
    class_filter_mode: bool = False

    @classmethod
    def build(cls, topic: str, expression: str | None, expression_type: str | None = TAG) -> "SubscriptionData":
        """The client's: parse ``"TagA || TagB"`` (or ``*``); SQL92 expressions are kept as written."""
        now = int(time.time() * 1000)
        kind = (expression_type or TAG).upper()
        if kind != TAG:
            if kind != SQL92:
                raise ValueError(f"unknown expression type {expression_type!r}")
            return cls(topic, (expression or "").strip(), SQL92, sub_version=now)
        text = (expression or "").strip()
        if text in ("", SUB_ALL):
            return cls(topic, sub_version=now)
        tags = list(dict.fromkeys(t.strip() for t in text.split("||") if t.strip()))
        if not tags:
            raise ValueError(f"subString split error: {expression!r}")
        return cls(topic, text, TAG, tags, list(dict.fromkeys(java_string_hash(t) for t in tags)), now)

    @classmethod
    def from_json(cls, data: dict) -> "SubscriptionData":
        """The broker's: the bean of a heartbeat (Java, Go, Node and C++ clients), codes derived when missing."""
        sub = cls(
            topic=str(data.get("topic", "")),
            sub_string=str(data.get("subString") or SUB_ALL),
            tags=[str(t) for t in data.get("tagsSet") or []],
            codes=list(dict.fromkeys(int(c) for c in data.get("codeSet") or [])),
            sub_version=int(data.get("subVersion") or 0),
            expression_type=str(data.get("expressionType") or TAG),
            class_filter_mode=bool(data.get("classFilterMode", False)),
        )
        if sub.is_tag and not sub.codes and not sub.matches_all:
            sub.tags, sub.codes = parse_tags(sub.sub_string)
        return sub

    @classmethod
    def from_expression(cls, topic: str, expression: str | None, expression_type: str | None,
                        version: int = 0) -> "SubscriptionData":
        """The broker's: from a pull or pop request's own expression (pull consumers); nothing refused here."""
        expression = (expression or SUB_ALL).strip() or SUB_ALL
        sub = cls(topic=topic, sub_string=expression, sub_version=version, expression_type=expression_type or TAG)
        if sub.is_tag and not sub.matches_all:
            sub.tags, sub.codes = parse_tags(expression)
        return sub

    @property
    def is_tag(self) -> bool:
        return self.expression_type in ("", TAG)

    @property
    def matches_all(self) -> bool:
        return self.sub_string in ("", SUB_ALL)

    def matches_tags(self, tags: str | None) -> bool:
        """Client-side re-check of a tag filter (the broker filters by hash code only)."""
        return not self.tags or (tags is not None and tags in self.tags)

    def client_json(self) -> dict:
        """The client's encoding: the Java client's bean, its HashSets in Java's iteration order."""
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": hashset_order(self.codes, lambda c: c),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": hashset_order(self.tags, java_string_hash),
            "topic": self.topic,
        }

    def broker_json(self) -> dict:
        """The broker's encoding: the tags as the client sent them, the codes sorted."""
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.codes),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags),
            "topic": self.topic,
        }


def parse_tags(expression: str) -> tuple[list[str], list[int]]:
    """The broker's: ``"TagA || TagB"`` as its tags (as written) and their distinct Java hash codes."""
    tags = [t.strip() for t in expression.split("||") if t.strip()]
    return tags, list(dict.fromkeys(java_string_hash(t) for t in tags))
