"""Orderly pop: a queue popped in order stays locked for its group until all is acked or the time is up.

The committed offset only moves when the popped messages are acked in full; when the invisible
time runs out first, the same messages are popped again with their consume count raised (the
``orderCountInfo`` the 5.x client turns into reconsume times). The lock state is in memory (Apache
persists it in consumerOrderInfo.json): after a restart the un-acked messages are popped again from the
committed offset at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqtx.common import pop_keys as keys


@dataclass(eq=False)
class OrderInfo:
    attempt_id: str | None
    pop_time: int
    invisible_time: int
    offsets: list[int]
    acked: set[int] = field(default_factory=set)
    counts: dict[int, int] = field(default_factory=dict)
    #: offset -> when it becomes visible again, for offsets whose invisible time was changed (5.x keeps it per offset)
    next_visible: dict[int, int] = field(default_factory=dict)

    def locked_until(self) -> int:
        """When the last un-acked offset becomes visible again (0 when all are acked)."""
        default = self.pop_time + self.invisible_time
        return max((self.next_visible.get(off, default) for off in self.offsets if off not in self.acked), default=0)

    def next_offset(self) -> int:
        """The first un-acked offset, or one past the last when all are acked."""
        for off in self.offsets:
            if off not in self.acked:
                return off
        return self.offsets[-1] + 1


class OrderInfoManager:
    def __init__(self) -> None:
        self.table: dict[tuple[str, str, int], OrderInfo] = {}

    def blocked(self, topic: str, group: str, queue_id: int, attempt_id: str | None, now_ms: int) -> bool:
        """True while an earlier orderly pop of this queue is un-acked and still invisible."""
        info = self.table.get((topic, group, queue_id))
        if info is None or len(info.acked) >= len(info.offsets):
            return False
        if attempt_id and attempt_id == info.attempt_id:
            return False  # the same client retrying its request gets the same messages
        return now_ms < info.locked_until()

    def update(self, topic: str, group: str, queue_id: int, attempt_id: str | None, pop_time: int,
               invisible_time: int, offsets: list[int], out: list[str]) -> None:
        """Record a pop; offsets popped before (and not acked) count one more consumption.

        Appends the orderCountInfo entries: one per offset with its count, then the queue's minimum.
        """
        key = (topic, group, queue_id)
        old = self.table.get(key)
        counts: dict[int, int] = {}
        if old is not None:
            same_attempt = attempt_id is not None and attempt_id == old.attempt_id
            for off in offsets:
                if off in old.offsets:
                    counts[off] = old.counts.get(off, 0) + (0 if same_attempt else 1)
        self.table[key] = OrderInfo(attempt_id, pop_time, invisible_time, list(offsets), counts=counts)
        for off, n in counts.items():
            out.append(f"{keys.retry_mark(topic)} {keys.order_count_key(queue_id, off)} {n}")
        least = min(counts.values()) if counts and len(counts) == len(offsets) else 0
        out.append(keys.offset_info(topic, queue_id, least))

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int:
        """Ack one offset: the offset to commit now, -1 when not part of the pop, -2 for another pop's time."""
        info = self.table.get((topic, group, queue_id))
        if info is None:
            return offset + 1
        if pop_time != info.pop_time:
            return -2
        if offset not in info.offsets:
            return -1
        info.acked.add(offset)
        return info.next_offset()

    def change_invisible(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                         now_ms: int, invisible_time: int) -> int | None:
        """An orderly CHANGE_MESSAGE_INVISIBLETIME: this offset becomes visible ``invisible_time`` from now
        (the queue stays locked while any un-acked offset is invisible); the pop keeps its time (acks name
        it), so the answer is the invisible time counted from it, or None when the pop is gone."""
        info = self.table.get((topic, group, queue_id))
        if info is None or info.pop_time != pop_time or offset not in info.offsets:
            return None
        info.next_visible[offset] = now_ms + invisible_time
        return now_ms + invisible_time - pop_time

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        self.table.pop((topic, group, queue_id), None)
