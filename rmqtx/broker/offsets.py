"""Committed consumer offsets: ``config/consumerOffset.json`` (``topic@group`` -> queue -> offset)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rmqtx.broker.jsonfiles import JsonConfigFile

if TYPE_CHECKING:
    from twisted.internet import defer

SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, store_root: str) -> None:
        self.file = JsonConfigFile(Path(store_root) / "config" / "consumerOffset.json")
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    def load(self) -> None:
        data = self.file.load()
        if data:
            for key, queues in (data.get("offsetTable") or {}).items():
                self.table[key] = {int(q): int(o) for q, o in queues.items()}

    def to_json(self) -> dict:
        return {"offsetTable": {k: dict(sorted(v.items())) for k, v in self.table.items()}}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table.setdefault(f"{topic}{SEPARATOR}{group}", {})[queue_id] = offset
        self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for that queue."""
        return self.table.get(f"{topic}{SEPARATOR}{group}", {}).get(queue_id, -1)

    def queues_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(f"{topic}{SEPARATOR}{group}", {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        return {k.split(SEPARATOR, 1)[1] for k in self.table if k.split(SEPARATOR, 1)[0] == topic}

    def topics_of_group(self, group: str) -> set[str]:
        return {k.split(SEPARATOR, 1)[0] for k in self.table if k.split(SEPARATOR, 1)[1] == group}

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.split(SEPARATOR, 1)[0] == topic]:
            del self.table[key]
        self.dirty = True

    def persist(self, force: bool = False) -> defer.Deferred[None] | None:
        """Write when something changed (the 5 s timer) or when forced."""
        if not (self.dirty or force):
            return None
        self.dirty = False
        return self.file.save(self.to_json())

    def persist_now(self) -> None:
        self.file.save_now(self.to_json())
        self.dirty = False
