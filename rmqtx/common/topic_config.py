"""TopicConfig, the bean brokers keep in ``topics.json`` and send to NameServers, defined once with
Java's field names (the JSON forms are Java's beans, key for key)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqtx.common import fastjson
from rmqtx.common.topics import PERM_READ, PERM_WRITE

FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


@dataclass(slots=True)
class TopicConfig:
    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False
    #: Apache 5.x's topic attributes (``message.type`` ...); written only when there are some, so a topic
    #: without them is 4.9.8's bean byte for byte.
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Bean form, keys in fastjson's (alphabetical) order."""
        head: dict[str, Any] = {"attributes": self.attributes_map()} if self.attributes else {}
        return {
            **head,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.readQueueNums,
            "topicFilterType": self.topicFilterType,
            "topicName": self.topicName,
            "topicSysFlag": self.topicSysFlag,
            "writeQueueNums": self.writeQueueNums,
        }

    def attributes_map(self) -> fastjson.JavaMap:
        """The attributes as Java's HashMap holds them, in its order (for every writer, pretty ones too)."""
        return fastjson.JavaMap({key: self.attributes[key] for key in fastjson.java_order(list(self.attributes))})

    @classmethod
    def from_json(cls, data: Any, fallback_name: str | None = None) -> "TopicConfig":
        """From the bean form; ValueError when it is not one (a peer's body, a hand-edited file)."""
        if not isinstance(data, dict):
            raise ValueError("topic config is not an object")
        name = data.get("topicName", fallback_name)
        if not isinstance(name, str) or not name:
            raise ValueError("topic config without topicName")
        attributes = data.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise ValueError(f"topic config {name}: attributes is not an object")
        try:
            return cls(
                name,
                int(data.get("readQueueNums", 16)),
                int(data.get("writeQueueNums", 16)),
                int(data.get("perm", 6)),
                str(data.get("topicFilterType", "SINGLE_TAG")),
                int(data.get("topicSysFlag", 0)),
                bool(data.get("order", False)),
                {str(k): str(v) for k, v in attributes.items()},
            )
        except (TypeError, ValueError):
            raise ValueError(f"topic config {name}: bad numbers") from None

    def compact(self) -> str:
        """The space-separated form of a compressed REGISTER_BROKER body (it carries no sys flag). Always 4.9.8's
        five fields: a 4.9.8 NameServer refuses a sixth (5.x brokers append the attributes as JSON), and no
        NameServer routes by attributes."""
        return f"{self.topicName} {self.readQueueNums} {self.writeQueueNums} {self.perm} {self.topicFilterType}"

    @classmethod
    def from_compact(cls, text: str) -> "TopicConfig":
        parts = text.split(" ")
        if len(parts) < 5 or parts[4] not in FILTER_TYPES:
            raise ValueError(f"bad compressed topic config {text!r}")
        attributes: dict[str, str] = {}
        if len(parts) >= 6:  # a 5.x broker's attributes; as Java, ignored when they do not parse (a blank inside)
            try:
                found = fastjson.loads(parts[5])
                if isinstance(found, dict):
                    attributes = {str(k): str(v) for k, v in found.items()}
            except ValueError:
                pass
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4], attributes=attributes)
        except ValueError:
            raise ValueError(f"bad compressed topic config {text!r}") from None
