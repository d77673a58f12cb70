"""Delay levels: messages with DELAY wait in SCHEDULE_TOPIC_XXXX and are re-put to their topic when due."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from twisted.internet import task
from twisted.logger import Logger

from rmqtx.broker.jsonfiles import JsonConfigFile
from rmqtx.broker.reput import due_copy
from rmqtx.common.message import PROPERTY_DELAY, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rmqtx.common.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK
from rmqtx.common.topics import SCHEDULE_TOPIC
from rmqtx.store.record import Record, RecordError, decode_record, parse_delay_levels

if TYPE_CHECKING:
    from rmqtx.store.message_store import MessageStore

log = Logger(namespace="rmqtx.broker.schedule")

#: How often each level is checked for due messages (Java waits 100 ms between checks).
CHECK_INTERVAL_S = 0.1
BATCH = 32


class ScheduleMessageService:
    """Per level progress in ``config/delayOffset.json``; due messages are re-put in order, once."""

    def __init__(self, store: MessageStore, store_root: str, delay_spec: str, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.levels = parse_delay_levels(delay_spec)
        self.file = JsonConfigFile(Path(store_root) / "config" / "delayOffset.json")
        self.offsets: dict[int, int] = {}
        self._loop: task.LoopingCall | None = None
        self._dirty = False

    @property
    def max_level(self) -> int:
        return len(self.levels)

    def load(self) -> None:
        data = self.file.load()
        if data:
            self.offsets = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}

    def to_json(self) -> dict:
        return {"offsetTable": dict(sorted(self.offsets.items()))}

    def redirect(self, topic: str, queue_id: int, props: dict[str, str], sys_flag: int) -> tuple[str, int]:
        """Where a message is stored: its own queue, or the schedule queue of its delay level."""
        level_text = props.get(PROPERTY_DELAY)
        if not level_text or (sys_flag & TRANSACTION_MASK) not in (0, TRANSACTION_COMMIT):
            return topic, queue_id
        try:
            level = int(level_text)
        except ValueError:
            return topic, queue_id
        if level <= 0:
            return topic, queue_id
        if level > self.max_level:
            level = self.max_level
            props[PROPERTY_DELAY] = str(level)  # Java stores the capped level
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return SCHEDULE_TOPIC, level - 1

    def start(self) -> None:
        self._loop = task.LoopingCall(self.deliver_due)
        self._loop.start(CHECK_INTERVAL_S, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def persist_now(self) -> None:
        """Blocking write of the progress (shutdown)."""
        self.file.save_now(self.to_json())

    def deliver_due(self) -> None:
        """Re-put every due message of every level; persist progress when it moved."""
        now_ms = int(self.clock() * 1000)
        for level in range(1, self.max_level + 1):
            self._deliver_level(level, now_ms)
        if self._dirty:
            self._dirty = False
            self.file.save(self.to_json())

    def _deliver_level(self, level: int, now_ms: int) -> None:
        queue_id = level - 1
        offset = self.offsets.get(level, 0)
        max_offset = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, queue_id)
        if offset >= max_offset:
            return
        offset = max(offset, self.store.get_min_offset_in_queue(SCHEDULE_TOPIC, queue_id))
        delay_ms = self.levels[level - 1]
        while offset < max_offset:
            result = self.store.get_message(SCHEDULE_TOPIC, queue_id, offset, BATCH)
            if not result.messages:
                break
            for raw, unit_offset in zip(result.messages, result.queue_offsets or range(offset, offset + len(result.messages))):
                try:
                    record = decode_record(raw)
                except RecordError as exc:
                    log.error("schedule queue {level}: skipping unreadable record: {why}", level=level, why=exc)
                    offset = unit_offset + 1
                    continue
                if record.store_timestamp + delay_ms > now_ms:
                    self._set(level, unit_offset)
                    return
                self._reput(record)
                offset = unit_offset + 1
                self._set(level, offset)
            offset = max(offset, result.next_begin_offset)
        self._set(level, offset)

    def _set(self, level: int, offset: int) -> None:
        if self.offsets.get(level) != offset:
            self.offsets[level] = offset
            self._dirty = True

    def _reput(self, record: Record) -> None:
        """Put the scheduled copy on its real topic as Java does (its DELAY stays in the stored string)."""
        copy = due_copy(record)
        if copy is None:
            log.error("scheduled record at {offset} has no usable real topic/queue; dropped", offset=record.physical_offset)
            return
        self.store.put_message(copy)
