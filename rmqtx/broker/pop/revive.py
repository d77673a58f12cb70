"""Checkpoints and acks of popped messages, kept in the revive topic; un-acked ones come back.

As in Apache 5.x, each pop writes a checkpoint record (tag ``ck``) and each ack an ack record
(``ack``/``bAck``) to ``rmq_sys_REVIVE_LOG_<cluster>``; once a checkpoint's invisible time is up,
its un-acked messages are re-put to the group's pop retry topic (``%RETRY%group_topic``) with
one more reconsume time, or to ``%DLQ%group`` past the group's retryMaxTimes. The pending set lives
in memory and is rebuilt at start from the revive queues, read from the offset the
``CID_RMQ_SYS_REVIVE_GROUP`` committed there (the oldest checkpoint still pending).
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import orjson
from twisted.internet import defer, task
from twisted.logger import Logger

from rmqtx.common import pop_keys as keys
from rmqtx.common.message import (
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    parse_properties,
    properties_to_string,
)
from rmqtx.common.topics import DLQ_PREFIX, PERM_READ, PERM_WRITE, RETRY_PREFIX
from rmqtx.store.record import RecordError, decode_record
from rmqtx.store.results import GetStatus, MessageToStore, PutResult

if TYPE_CHECKING:
    from rmqtx.broker.core import BrokerCore
    from rmqtx.broker.pop.settings import PopSettings

log = Logger(namespace="rmqtx.broker.pop")
CkKey = tuple[str, str, int, int, int]  # group, topic, queue id, start offset, pop time
READ_BATCH = 32


@dataclass(eq=False)
class CheckPoint:
    """One pop of one queue: which offsets went out, when, for how long, and which came back acked."""

    group: str
    topic: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    offsets: list[int]
    revive_qid: int
    broker_name: str
    acked: set[int] = field(default_factory=set)
    #: Queue offset of this checkpoint's record in its revive queue (-1 until written).
    revive_offset: int = -1
    reviving: bool = False

    @property
    def key(self) -> CkKey:
        return (self.group, self.topic, self.queue_id, self.start_offset, self.pop_time)

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def done(self) -> bool:
        return self.acked.issuperset(self.offsets)

    def to_json(self) -> bytes:
        """Apache's PopCheckPoint field names (so a 5.x broker reading this store understands it)."""
        bitmap = 0
        for i, off in enumerate(self.offsets):
            if off in self.acked:
                bitmap |= 1 << i
        return orjson.dumps({
            "bm": bitmap, "bn": self.broker_name, "c": self.group,
            "d": [o - self.start_offset for o in self.offsets], "it": self.invisible_time,
            "n": len(self.offsets), "pt": self.pop_time, "q": self.queue_id, "ro": self.revive_offset,
            "so": self.start_offset, "t": self.topic,
        })

    @classmethod
    def from_json(cls, data: dict, revive_qid: int) -> "CheckPoint":
        start = int(data["so"])
        diffs = data.get("d") or list(range(int(data.get("n", 0))))
        offsets = [start + int(d) for d in diffs]
        bitmap = int(data.get("bm", 0))
        return cls(str(data["c"]), str(data["t"]), int(data["q"]), start, int(data["pt"]), int(data["it"]), offsets,
                   revive_qid, str(data.get("bn", "")), {o for i, o in enumerate(offsets) if bitmap >> i & 1})


class ReviveService:
    def __init__(self, ctx: "BrokerCore", settings: "PopSettings", reactor: Any = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.ctx = ctx
        self.settings = settings
        self.reactor = reactor
        self.clock = clock
        self.topic = keys.revive_topic(ctx.config.brokerClusterName)
        self.pending: dict[CkKey, CheckPoint] = {}
        self._due: list[tuple[int, int, CkKey]] = []
        self._seq = itertools.count()
        self._next_qid = itertools.count()
        self._loop: task.LoopingCall | None = None
        self.revived = 0  # checkpoints brought back (statistics)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- checkpoints and acks ---------------------------------------------------------------
    def next_revive_qid(self) -> int:
        return next(self._next_qid) % max(self.settings.reviveQueueNum, 1)

    def _track(self, ck: CheckPoint) -> None:
        self.pending[ck.key] = ck
        heapq.heappush(self._due, (ck.revive_time, next(self._seq), ck.key))

    def add(self, ck: CheckPoint) -> "defer.Deferred[PutResult]":
        """Track a checkpoint now and write its record; fires once written."""
        self._track(ck)
        d = self._put(ck.revive_qid, keys.CK_TAG, ck.to_json(),
                      f"{ck.topic}@{ck.queue_id}@{ck.start_offset}@{ck.group}@{ck.pop_time}@{ck.broker_name}@ck")

        def written(res: PutResult) -> PutResult:
            if res.ok:
                ck.revive_offset = res.queue_offset
            return res

        return d.addCallback(written)

    def ack(self, group: str, topic: str, queue_id: int, start_offset: int, pop_time: int,
            offsets: list[int], revive_qid: int, broker_name: str) -> "defer.Deferred[PutResult]":
        """Mark offsets of a checkpoint acked (one record, ``ack`` or ``bAck``) and drop it once all are."""
        self._apply_ack((group, topic, queue_id, start_offset, pop_time), offsets)
        body: dict = {"bn": broker_name, "c": group, "pt": pop_time, "q": queue_id, "so": start_offset, "t": topic}
        if len(offsets) == 1:
            body["ao"] = offsets[0]
            tag, uniq = keys.ACK_TAG, f"{topic}@{queue_id}@{offsets[0]}@{group}@{pop_time}@{broker_name}@ack"
        else:
            body["ao"], body["aol"] = -1, offsets
            tag, uniq = keys.BATCH_ACK_TAG, f"{topic}@{queue_id}@{offsets}@{group}@{pop_time}@bAck"
        qid = revive_qid if 0 <= revive_qid < self.settings.reviveQueueNum else 0
        return self._put(qid, tag, orjson.dumps(dict(sorted(body.items()))), uniq)

    def _apply_ack(self, key: CkKey, offsets: list[int]) -> bool:
        ck = self.pending.get(key)
        if ck is None:
            return False
        ck.acked.update(o for o in offsets if o in ck.offsets)
        if ck.done and not ck.reviving:
            del self.pending[key]
        return True

    def _put(self, qid: int, tag: str, body: bytes, uniq: str) -> "defer.Deferred[PutResult]":
        ctx = self.ctx
        _, created = ctx.topics.create_system_topic(self.topic, self.settings.reviveQueueNum, PERM_READ | PERM_WRITE)
        if created:
            ctx.registrar.register_all(oneway=True)
        props = properties_to_string({PROPERTY_TAGS: tag, PROPERTY_UNIQ_KEY: uniq})
        now = self.now_ms()
        return ctx.store.put_message(MessageToStore(self.topic, qid, 0, body, props, 0, now, ctx.store_host, ctx.store_host))

    # -- start: rebuild from the revive queues ----------------------------------------------
    def load(self) -> None:
        """Replay each revive queue from its committed offset."""
        ctx = self.ctx
        if ctx.topics.get(self.topic) is None:
            return  # created with the first pop: a broker never popped from shows no 5.x topic
        for qid in range(self.settings.reviveQueueNum):
            offset = max(ctx.offsets.query(keys.REVIVE_GROUP, self.topic, qid), ctx.store.get_min_offset_in_queue(self.topic, qid))
            acks: list[tuple[CkKey, list[int]]] = []
            while True:
                got = ctx.store.get_message(self.topic, qid, offset, READ_BATCH)
                if got.status is not GetStatus.FOUND:
                    if got.next_begin_offset > offset and got.status is not GetStatus.OFFSET_OVERFLOW_ONE:
                        offset = got.next_begin_offset
                        continue
                    break
                for raw, qofs in zip(got.messages, got.queue_offsets):
                    self._replay(raw, qid, qofs, acks)
                offset = got.next_begin_offset
            for key, offsets in acks:
                self._apply_ack(key, offsets)
        log.info("pop: {n} checkpoints pending after replaying {topic}", n=len(self.pending), topic=self.topic)

    def _replay(self, raw: bytes, qid: int, qofs: int, acks: list) -> None:
        try:
            rec = decode_record(raw)
            data = orjson.loads(rec.body)
            tag = parse_properties(rec.properties).get(PROPERTY_TAGS)
            if tag == keys.CK_TAG:
                ck = CheckPoint.from_json(data, qid)
                ck.revive_offset = qofs
                if not ck.done:
                    self._track(ck)
            elif tag in (keys.ACK_TAG, keys.BATCH_ACK_TAG):
                offsets = [int(o) for o in data["aol"]] if tag == keys.BATCH_ACK_TAG else [int(data["ao"])]
                acks.append(((str(data["c"]), str(data["t"]), int(data["q"]), int(data["so"]), int(data["pt"])), offsets))
        except (RecordError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            log.warn("pop: unreadable revive record at {qid}/{off}", qid=qid, off=qofs)

    # -- revive -----------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = task.LoopingCall(self.revive_due)
        if self.reactor is not None:
            self._loop.clock = self.reactor
        self._loop.start(max(self.settings.reviveInterval, 50) / 1000, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.commit_revive_offsets()

    def revive_due(self) -> "defer.Deferred[None] | None":
        """Re-put the un-acked messages of every checkpoint whose invisible time is up."""
        now = self.now_ms()
        self.commit_revive_offsets()
        work = []
        while self._due and self._due[0][0] <= now:
            _, _, key = heapq.heappop(self._due)
            ck = self.pending.get(key)
            if ck is None or ck.reviving or ck.revive_time > now:
                continue
            ck.reviving = True
            work.append(defer.ensureDeferred(self._revive(ck)))
        if not work:
            return None
        return defer.DeferredList(work, consumeErrors=True).addCallback(lambda _: None)

    async def _revive(self, ck: CheckPoint) -> None:
        """Re-put what is not acked, then ack it in the revive log: a restart must not revive it again."""
        ok = True
        left = [o for o in ck.offsets if o not in ck.acked]
        for offset in left:
            try:
                ok = await self._revive_one(ck, offset) and ok
            except Exception:
                log.failure("pop: revive of {t}/{q}/{o} failed", t=ck.topic, q=ck.queue_id, o=offset)
                ok = False
        if ok and left:
            res = await self.ack(ck.group, ck.topic, ck.queue_id, ck.start_offset, ck.pop_time, left, ck.revive_qid,
                                 ck.broker_name)
            ok = res.ok
        ck.reviving = False
        if ok:
            self.pending.pop(ck.key, None)
            self.revived += 1
        else:  # try again at the next round
            heapq.heappush(self._due, (self.now_ms() + 1000, next(self._seq), ck.key))

    async def _revive_one(self, ck: CheckPoint, offset: int) -> bool:
        ctx = self.ctx
        got = ctx.store.get_message(ck.topic, ck.queue_id, offset, 1)
        if got.status is not GetStatus.FOUND or not got.messages:
            return True  # gone (retention, deleted topic): nothing to bring back
        rec = decode_record(got.messages[0])
        group_cfg = ctx.groups.find(ck.group)
        max_times = group_cfg.retryMaxTimes if group_cfg is not None else 16
        props = parse_properties(rec.properties)
        props.pop(PROPERTY_POP_CK, None)
        if rec.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
            props[PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        if rec.reconsume_times + 1 > max_times:
            target = DLQ_PREFIX + ck.group
        elif ck.topic.startswith(RETRY_PREFIX):
            target = ck.topic
        else:
            target = keys.pop_retry_topic(ck.topic, ck.group, self.settings.enableRetryTopicV2)
        _, created = ctx.topics.create_system_topic(target, 1, PERM_READ | PERM_WRITE)
        if created:
            ctx.registrar.register_all(oneway=True)
        msg = MessageToStore(target, 0, rec.flag, rec.body, properties_to_string(props), rec.sys_flag, rec.born_timestamp,
                             ctx.store_host, ctx.store_host, reconsume_times=rec.reconsume_times + 1)
        res = await ctx.store.put_message(msg)
        return res.ok

    def commit_revive_offsets(self) -> None:
        """Move each revive queue's committed offset up to its oldest pending checkpoint (one pass)."""
        ctx = self.ctx
        n = self.settings.reviveQueueNum
        oldest: dict[int, int] = {}
        for ck in self.pending.values():
            if 0 <= ck.revive_qid < n:
                seen = oldest.get(ck.revive_qid)
                offset = ck.revive_offset if ck.revive_offset >= 0 else -1
                oldest[ck.revive_qid] = offset if seen is None else (-1 if -1 in (seen, offset) else min(seen, offset))
        for qid in range(n):
            target = oldest.get(qid, ctx.store.get_max_offset_in_queue(self.topic, qid))
            if target >= 0 and target > ctx.offsets.query(keys.REVIVE_GROUP, self.topic, qid):
                ctx.offsets.commit(keys.REVIVE_GROUP, self.topic, qid, target)
