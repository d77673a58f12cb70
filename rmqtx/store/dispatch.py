"""One dispatch pipeline (Java's CommitLogDispatchers fed by its reput): every record that reaches
the commit log, by a put, by recovery or by replication, becomes one :class:`DispatchRequest` that
the same ordered dispatchers turn into a consume queue unit (with its ext unit and filter bit map)
and index entries. Arrival listeners stay outside: a put tells them once per reactor turn, a
replica once per chunk, recovery never (nobody waits while the store loads)."""
from __future__ import annotations

import logging
from typing import Callable, Protocol

from rmqtx.common.message import PROPERTY_DELAY, PROPERTY_TAGS, parse_properties
from rmqtx.common.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK
from rmqtx.common.topics import SCHEDULE_TOPIC

from . import record as R
from .consume_queue import ConsumeQueue
from .dispatch_request import DispatchRequest

log = logging.getLogger(__name__)

_NO_QUEUE = (TRANSACTION_PREPARED, TRANSACTION_ROLLBACK)

#: (topic, message properties) -> filter bit map to keep in the ext unit, or None.
BitmapCalculator = Callable[[str, "dict[str, str]"], "bytes | None"]


class Dispatcher(Protocol):
    """One step of the pipeline."""

    def dispatch(self, req: DispatchRequest) -> None: ...


class ConsumeQueueDispatcher:
    """Writes the record's consume queue unit (and, with ext on, its ext unit and filter bit map)."""

    def __init__(self, queues: dict[tuple[str, int], ConsumeQueue], queue_for: Callable[[str, int], ConsumeQueue],
                 dirty: set[ConsumeQueue], delay_levels: list[int]) -> None:
        self.queues = queues
        self.queue_for = queue_for  # makes a missing queue (recovery, replica)
        self.dirty = dirty
        self.delay_levels = delay_levels
        self.bitmap_calc: BitmapCalculator | None = None

    def tags_code(self, topic: str, props: dict[str, str], store_ts: int) -> int:
        """The unit's tag field: String.hashCode of TAGS, or the delivery time of a delayed record."""
        if topic == SCHEDULE_TOPIC:
            level = props.get(PROPERTY_DELAY)
            if level and level.isdigit() and int(level) > 0:
                lv = min(int(level), len(self.delay_levels))
                return store_ts + self.delay_levels[lv - 1]
        tags = props.get(PROPERTY_TAGS)
        return R.tags_hash(tags) if tags else 0

    def dispatch(self, req: DispatchRequest) -> None:
        # the put path's per-message work: no call that is not needed (tests/broker/test_call_budget.py),
        # the request unpacked at once (cheaper than reading its fields one by one)
        topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, _, props = req
        if (sys_flag & TRANSACTION_MASK) in _NO_QUEUE:
            return
        try:
            cq = self.queues[(topic, queue_id)]
        except KeyError:
            cq = self.queue_for(topic, queue_id)
        if tags_code is None:  # what tags_code() says, its common case inline
            if topic == SCHEDULE_TOPIC:
                tags_code = self.tags_code(topic, props or {}, store_ts)
            else:
                tags = props.get(PROPERTY_TAGS) if props else None
                tags_code = R.tags_hash(tags) if tags else 0
        if cq.ext is not None:
            cq.put(phys, size, tags_code, queue_offset, store_ts, self._bitmap(req))
        elif not cq.put_next(phys, size, tags_code, queue_offset):
            cq.put(phys, size, tags_code, queue_offset)
        if cq not in self.dirty:
            self.dirty.add(cq)

    def _bitmap(self, req: DispatchRequest) -> bytes | None:
        """The filter bit map of what was stored (parsed anew: the writer's dict may hold more)."""
        if self.bitmap_calc is None:
            return None
        try:
            return self.bitmap_calc(req.topic, parse_properties(req.properties))
        except Exception:
            log.exception("filter bit map calculation failed for topic %s", req.topic)
            return None


class DispatchPipeline:
    """The ordered dispatchers every stored record goes through, whoever wrote it."""

    def __init__(self, dispatchers: list[Dispatcher]) -> None:
        self._dispatchers = list(dispatchers)
        self._steps = tuple(d.dispatch for d in self._dispatchers)  # bound once: this runs per message put
        #: store time of the last record dispatched (the checkpoint's logics time)
        self.dispatched_ts = 0

    @property
    def dispatchers(self) -> tuple[Dispatcher, ...]:
        return tuple(self._dispatchers)

    def add(self, dispatcher: Dispatcher) -> None:
        """One more step, after the others (Java's dispatcher list is open the same way)."""
        self._dispatchers.append(dispatcher)
        self._steps = tuple(d.dispatch for d in self._dispatchers)

    def dispatch(self, req: DispatchRequest) -> None:
        if req[9] is None:  # props: the writer did not parse them
            req = req._replace(props=parse_properties(req.properties))
        for step in self._steps:
            step(req)
        self.dispatched_ts = req[5]  # store_timestamp
