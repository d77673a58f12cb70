"""TopicConfig, the bean brokers keep in ``topics.json`` and send to NameServers, defined once with
Java's field names (the JSON forms are Java's beans, key for key)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    def to_json(self) -> dict[str, Any]:
        """Bean form, keys in fastjson's (alphabetical) order."""
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.readQueueNums,
            "topicFilterType": self.topicFilterType,
            "topicName": self.topicName,
            "topicSysFlag": self.topicSysFlag,
            "writeQueueNums": self.writeQueueNums,
        }

    @classmethod
    def from_json(cls, data: Any, fallback_name: str | None = None) -> "TopicConfig":
        """From the bean form; ValueError when it is not one (a peer's body, a hand-edited file)."""
        if not isinstance(data, dict):
            raise ValueError("topic config is not an object")
        name = data.get("topicName", fallback_name)
        if not isinstance(name, str) or not name:
            raise ValueError("topic config without topicName")
        try:
            return cls(
                name,
                int(data.get("readQueueNums", 16)),
                int(data.get("writeQueueNums", 16)),
                int(data.get("perm", 6)),
                str(data.get("topicFilterType", "SINGLE_TAG")),
                int(data.get("topicSysFlag", 0)),
                bool(data.get("order", False)),
            )
        except (TypeError, ValueError):
            raise ValueError(f"topic config {name}: bad numbers") from None

    def compact(self) -> str:
        """The space-separated form of a compressed REGISTER_BROKER body (it carries no sys flag)."""
        return f"{self.topicName} {self.readQueueNums} {self.writeQueueNums} {self.perm} {self.topicFilterType}"

    @classmethod
    def from_compact(cls, text: str) -> "TopicConfig":
        parts = text.split(" ")
        if len(parts) != 5 or parts[4] not in FILTER_TYPES:
            raise ValueError(f"bad compressed topic config {text!r}")
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
        except ValueError:
            raise ValueError(f"bad compressed topic config {text!r}") from None
