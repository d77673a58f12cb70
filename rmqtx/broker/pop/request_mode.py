"""Per topic and group: PULL or POP, as SET_MESSAGE_REQUEST_MODE sets it (``config/messageRequestMode.json``)."""

from __future__ import annotations

from pathlib import Path

from rmqtx.broker.jsonfiles import JsonConfigFile

MODES = ("PULL", "POP")


class MessageRequestModeManager:
    def __init__(self, store_root: str) -> None:
        self.file = JsonConfigFile(Path(store_root) / "config" / "messageRequestMode.json")
        #: topic -> group -> {"consumerGroup", "mode", "popShareQueueNum", "topic"}
        self.table: dict[str, dict[str, dict]] = {}

    def load(self) -> None:
        data = self.file.load()
        if data:
            for topic, groups in (data.get("messageRequestModeMap") or {}).items():
                self.table[topic] = {g: dict(v) for g, v in (groups or {}).items()}

    def get(self, topic: str, group: str) -> dict | None:
        return self.table.get(topic, {}).get(group)

    def set(self, topic: str, group: str, mode: str, share: int) -> None:
        """Record and persist (Java persists on every change)."""
        self.table.setdefault(topic, {})[group] = {
            "consumerGroup": group, "mode": mode, "popShareQueueNum": share, "topic": topic,
        }
        self.file.save(self.to_json())

    def to_json(self) -> dict:
        return {"messageRequestModeMap": self.table}
