"""Timer messages (RocketMQ 5.x): any delivery time, kept in ``rmq_sys_wheel_timer`` and a timer wheel.

The send path moves a message with TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS to the timer
topic (TIMER_OUT_MS, REAL_TOPIC, REAL_QID added). An enqueue step reads that topic in order and links
each message into the wheel slot of its due time (a unit in the timer log); a dequeue step reads
slots as their time passes and puts each message back on its real topic. Due times further away than
the roll window park in a nearer slot and go round again through the timer topic (TIMER_ROLL_TIMES).
A message with TIMER_DEL_UNIQKEY ("realTopic+uniqKey", sent by RECALL_MESSAGE or a client) is linked
into the same slot as the message it cancels, marked MAGIC_DELETE; reading a slot first collects
those keys and then skips the messages they name, so a cancel holds across restarts (both are in
the files). No slot is read while the timer topic holds messages not linked yet, and a message goes
into its slot until that slot is read: a cancel back from its roll slot after a pause or a restart
still reaches its target's slot in time.
A slave follows (Java's shouldRunningDequeue false): it links the replicated timer topic into its own
wheel as far as the master has linked it, delivers nothing, and takes the master's read time from
GET_TIMER_CHECK_POINT (SlaveSynchronize); promoted, it delivers from that read time on.
All of it runs on the reactor in bounded batches; only syncing the files to disk runs in a thread.
"""

from __future__ import annotations

import random
import re
import time
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from twisted.internet import defer, task, threads
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqtx.broker.reput import copy_of, delay_level
from rmqtx.common.javacompat import java_float, java_string_hash
from rmqtx.common.message import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, PROPERTY_UNIQ_KEY, parse_properties
from rmqtx.common.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK
from rmqtx.common.topics import TIMER_TOPIC
from rmqtx.remoting.codes import ResponseCode
from rmqtx.store.record import Record, RecordError, decode_record
from rmqtx.store.results import PutStatus
from rmqtx.store.timer import (
    BLANK_SLOTS,
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    SLOTS_TOTAL,
    UNIT,
    TimerConfig,
    TimerFiles,
)

if TYPE_CHECKING:
    from rmqtx.store.message_store import MessageStore

log = Logger(namespace="rmqtx.broker.timer")

TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
REQUEST_KEYS = (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)
NEVER_ENQUEUED = str(2**63 - 1)  # Java's Long.MAX_VALUE: delivered without passing through the wheel
#: Work done per reactor turn before yielding.
ENQUEUE_BATCH = 256
DEQUEUE_UNITS = 512
EMPTY_SLOTS = 4096
#: How far past a message already due when enqueued the timer topic is searched for its cancel.
LATE_CANCEL_LOOKAHEAD = 1024
#: Java checks every 30 s for timer log files that only name deleted messages.
CLEAN_INTERVAL_S = 30.0
#: Rolls of the old master remembered by a slave (a roll window's worth on a busy broker is more: then a
#: takeover may put some back twice, as Java's does).
WENT_ROUND_KEPT = 1 << 16
_LONG = re.compile(r"[+-]?[0-9]+\Z")


class Refusal(NamedTuple):
    code: int
    remark: str


def _java_long(text: str | None) -> int:
    """Long.parseLong: digits with an optional sign, nothing else."""
    if text is None or not _LONG.match(text):
        raise ValueError(text)
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(text)
    return value


def is_timer_request(props: dict[str, str]) -> bool:
    return TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props or TIMER_DELAY_MS in props


def delete_key(real_topic: str, uniq_key: str) -> str:
    """The TIMER_DEL_UNIQKEY value that cancels the timer message ``uniq_key`` of ``real_topic``."""
    return f"{real_topic}+{uniq_key}"


def flow_controlled(num: int, limit: int, draw: Callable[[int], int] = random.randrange) -> bool:
    """Java's TimerMessageStore.isReject for a slot holding ``num`` units (timerCongestNumEachSlot =
    ``limit``): never up to the limit, always from twice it, and between the two by a draw that, as in
    Java, refuses less often the fuller the slot is."""
    if num <= limit:
        return False
    if num >= limit * 2:
        return True
    return draw(1000) > 1000 * (num - limit) / (limit + 0.1)


def _cancels(magic: int) -> bool:
    """A unit that cancels another in its slot (a rolling one only goes round again)."""
    return bool(magic & MAGIC_DELETE) and not magic & MAGIC_ROLL


class TpsCounter:
    """Java's PerfCounter rate: a window of at least 10 s, closed by the first count after it, gives
    (count + 0.1) * 1000 / elapsed ms; read as 0.0 once 13 s pass without a window closing."""

    WINDOW_MS = 10_000

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.start = int(clock() * 1000)
        self.count = 0
        self.last_tps = 0.0

    def flow(self, n: int = 1) -> None:
        self.count += n
        now = int(self.clock() * 1000)
        if now - self.start >= self.WINDOW_MS:
            self.last_tps = (self.count + 0.1) * 1000 / (now - self.start)
            self.start, self.count = now, 0

    def tps(self) -> str:
        fresh = int(self.clock() * 1000) - self.start <= self.WINDOW_MS + 3000
        return java_float(self.last_tps if fresh else 0.0)


class TimerMessageService:
    """The timer wheel of one broker: send-path redirect, enqueue, dequeue, flush, recovery."""

    def __init__(self, store: MessageStore, root: str, cfg: TimerConfig, clock: Callable[[], float] = time.time,
                 reactor: Any = None) -> None:
        self.store = store
        self.root = root
        self.cfg = cfg
        self.clock = clock
        self.reactor = reactor
        self.precision = cfg.timerPrecisionMs
        self.files: TimerFiles | None = None
        self.queue_offset = 0
        self.read_ms = 0
        self._loops: list[task.LoopingCall] = []
        self._enqueue_call = None
        self._syncing = False
        self._sync_d: defer.Deferred[None] | None = None
        self._dirty = True
        self._slot_chain: tuple[tuple[int, int, int], list[tuple], dict[str, str]] | None = None
        self._cancelled: set[str] = set()  # keys of the slot being read that found their message
        self._running = False
        self.following = False  # a slave's timer: links, delivers nothing
        #: (realTopic+uniqKey, TIMER_ROLL_TIMES) of the copies the master put back on the timer topic, seen while
        #: following: taking over from an older read time, a roll the old master made is not made again.
        self._went_round: dict[tuple[str, str], None] = {}
        self._late_cancels: set[str] | None = None
        self._late_seen: dict[str, None] = {}  # cancels that came due before being linked, oldest first
        #: The timer topic holds messages not linked yet. The dequeue reads no slot meanwhile, as Java's
        #: write time waits for the enqueue: one of them (a cancel going round) may belong to that slot.
        self._behind = True
        self._dequeue_waits = False
        #: Units counted in the wheel from the read time on (Java's timerCongestNum), kept as they change.
        self.congest = 0
        self.enqueue_rate = TpsCounter(clock)
        self.dequeue_rate = TpsCounter(clock)

    # -- send path ----------------------------------------------------------------------------
    def redirect(self, topic: str, queue_id: int, props: dict[str, str], sys_flag: int) -> tuple[str, int, Refusal | None]:
        """Where a message with timer properties is stored (Java 5.x's handleScheduleMessage); ``props`` changes in place."""
        if (sys_flag & TRANSACTION_MASK) not in (0, TRANSACTION_COMMIT) or topic == TIMER_TOPIC:
            return topic, queue_id, None
        if delay_level(props) > 0:  # a delay level wins; the timer keys go
            for key in REQUEST_KEYS:
                props.pop(key, None)
            return topic, queue_id, None
        if TIMER_OUT_MS in props or not is_timer_request(props):
            return topic, queue_id, None
        if not self.cfg.timerWheelEnable:
            return topic, queue_id, Refusal(
                ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false")
        now = int(self.clock() * 1000)
        try:
            if TIMER_DELAY_SEC in props:
                deliver = now + _java_long(props[TIMER_DELAY_SEC]) * 1000
            elif TIMER_DELAY_MS in props:
                deliver = now + _java_long(props[TIMER_DELAY_MS])
            else:
                deliver = _java_long(props[TIMER_DELIVER_MS])
        except ValueError:
            return topic, queue_id, self._illegal()
        if deliver <= now:
            if TIMER_DEL_UNIQKEY in props:
                return topic, queue_id, self._illegal()
            return topic, queue_id, None  # already due: stored on its topic as it is
        if deliver - now > self.cfg.timerMaxDelaySec * 1000:
            return topic, queue_id, self._illegal()
        p = self.precision
        deliver = deliver - p if deliver % p == 0 else deliver // p * p
        limit = self.cfg.timerCongestNumEachSlot
        if self.files is not None and flow_controlled(self.files.wheel.get(deliver)[3], limit):
            return topic, queue_id, Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"timer message is under flow control, max num limit is {limit * 2} or the current value is greater "
                f"than {limit} and less than {limit * 2}, trigger random flow control")
        props[TIMER_OUT_MS] = str(deliver)
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        if self._running:
            self._schedule_enqueue()  # runs after the caller has stored it, in this reactor turn
        return TIMER_TOPIC, 0, None

    def _illegal(self) -> Refusal:
        return Refusal(
            ResponseCode.MESSAGE_ILLEGAL,
            f"timer message illegal, the delay time should not be bigger than the max delay {self.cfg.timerMaxDelaySec * 1000}ms; "
            "or if set del msg, the delay time should be bigger than the current time",
        )

    # -- life ---------------------------------------------------------------------------------
    def _floor(self, ms: int) -> int:
        return ms // self.precision * self.precision

    def load(self) -> None:
        """Open the files, re-link timer log units written after the last sync, find where to go on (blocking, at start)."""
        files = self.files = TimerFiles(self.root, self.cfg, self.store.allocator)
        files.load()
        check = files.check
        now = self._floor(int(self.clock() * 1000))
        if check.last_read_time_ms == 0:  # a new checkpoint: nothing was ever read
            check.set(last_read_time_ms=now)
        last_unit = None
        start = max(0, check.last_flush_pos - self.cfg.mappedFileSizeTimerLog)
        for pos, unit in files.log.recover(start):
            files.wheel.revise(unit[3] + unit[4], pos, -1 if unit[2] & MAGIC_DELETE else 1)
            last_unit = unit
        self.queue_offset = check.last_queue_offset
        if last_unit is not None:  # units enqueued after the checkpoint last moved
            raw = self.store.look_message_by_offset(last_unit[5])
            try:
                rec = decode_record(raw) if raw else None
            except RecordError:
                rec = None
            if rec is not None and rec.topic == TIMER_TOPIC and rec.queue_offset + 1 > self.queue_offset:
                self.queue_offset = rec.queue_offset + 1
        self.queue_offset = max(self.queue_offset, self.store.get_min_offset_in_queue(TIMER_TOPIC, 0))
        self.queue_offset = min(self.queue_offset, max(0, self.store.get_max_offset_in_queue(TIMER_TOPIC, 0)))
        oldest = now - SLOTS_TOTAL * self.precision + BLANK_SLOTS * self.precision
        self.read_ms = max(check.last_read_time_ms, oldest)
        if self.read_ms != check.last_read_time_ms:
            check.set(last_read_time_ms=self.read_ms, slot_done=0)
        check.set(last_queue_offset=self.queue_offset, master_queue_offset=self.queue_offset)
        self.congest = files.wheel.count_from(self.read_ms)
        log.info("timer wheel loaded: read time {read}, timer queue offset {offset}, timer log at {pos}",
                 read=self.read_ms, offset=self.queue_offset, pos=files.log.write_pos)

    def start(self) -> None:
        """Deliver (a master): from the read time on, the master's last one when this broker followed it."""
        if self.files is None:
            return
        if self.following:  # promoted: nothing past what the old master linked was linked here
            self.stop()
            self.following = False
            check = self.files.check
            self.queue_offset = min(self.queue_offset, check.master_queue_offset)
            self.read_ms = self._floor(check.last_read_time_ms) or self.read_ms
            check.set(last_read_time_ms=self.read_ms, last_queue_offset=self.queue_offset,
                      master_queue_offset=self.queue_offset)
            self.congest = self.files.wheel.count_from(self.read_ms)
            self._slot_chain = None
            self._dirty = True
            log.info("timer wheel delivers from {read}, timer queue offset {offset}", read=self.read_ms,
                     offset=self.queue_offset)
        elif self._running:
            return
        self._run((self._dequeue, max(0.005, self.precision / 10000)), (self._enqueue, 0.1),
                  (self._sync, self.cfg.timerFlushIntervalMs / 1000), (self._clean, CLEAN_INTERVAL_S))

    def follow(self) -> None:
        """Link, deliver nothing (a slave, or a master that became one)."""
        if self.files is None or (self._running and self.following):
            return
        self.stop()
        self.following = True
        self._run((self._enqueue, 0.1), (self._sync, self.cfg.timerFlushIntervalMs / 1000))

    def follow_master(self, last_read_time_ms: int, master_queue_offset: int) -> None:
        """The master's checkpoint, read by SlaveSynchronize: how far it delivered and how far it linked."""
        files = self.files
        read_ms = self._floor(last_read_time_ms)
        if files is None or not self.following or (read_ms, master_queue_offset) == (
                self.read_ms, files.check.master_queue_offset):
            return  # an idle master: nothing to write, nor to sync each second
        self.read_ms = read_ms
        files.check.set(last_read_time_ms=read_ms, slot_done=0, master_queue_offset=master_queue_offset)
        self._dirty = True
        if self._running:
            self._schedule_enqueue()

    def _run(self, *loops: tuple[Callable[[], None], float]) -> None:
        if self.reactor is None:
            from twisted.internet import reactor

            self.reactor = reactor
        self._running = True
        for fn, seconds in loops:
            loop = task.LoopingCall(fn)
            loop.clock = self.reactor
            loop.start(seconds, now=False)
            self._loops.append(loop)
        self._schedule_enqueue()

    def stop(self) -> None:
        self._running = False
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []
        if self._enqueue_call is not None and self._enqueue_call.active():
            self._enqueue_call.cancel()
        self._enqueue_call = None

    def shutdown(self) -> None:
        """Blocking final sync and close (broker shutdown, before the store closes)."""
        self.stop()
        files = self.files
        if files is None:
            return
        files.check.set(last_flush_pos=files.log.write_pos)
        files.sync(files.metrics.encode())
        files.close()
        self.files = None

    # -- enqueue ------------------------------------------------------------------------------
    def _schedule_enqueue(self) -> None:
        self._behind = True
        if self._enqueue_call is None or not self._enqueue_call.active():
            self._enqueue_call = self.reactor.callLater(0, self._enqueue)

    def _enqueue(self) -> None:
        """Link the next messages of the timer topic into the wheel (or deliver them when already due)."""
        files = self.files
        if files is None or not self._running:
            return
        if self.cfg.timerStopEnqueue:
            self._caught_up()  # nothing will be linked: the dequeue goes on without it
            return
        store = self.store
        done = 0
        self._late_cancels = None
        offset = max(self.queue_offset, store.get_min_offset_in_queue(TIMER_TOPIC, 0))
        max_offset = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        if self.following:  # what the master has not linked yet it may deliver at once: not linked here
            max_offset = min(max_offset, files.check.master_queue_offset)
        while offset < max_offset and done < ENQUEUE_BATCH:
            if not files.log.ready():
                return  # the next timer log file is being made in a thread; the loop comes back
            result = store.get_message(TIMER_TOPIC, 0, offset, 32)
            if not result.messages:
                if result.next_begin_offset <= offset:
                    break  # nothing readable there now; what was readable is linked
                offset = result.next_begin_offset
                continue
            for raw, unit_offset in zip(result.messages, result.queue_offsets):
                if unit_offset >= max_offset:
                    break
                if not self._enqueue_one(raw, unit_offset):
                    self._moved(unit_offset)
                    return  # the real topic refused a due message: try again later
                offset = unit_offset + 1
                self._moved(offset)
                done += 1
                if not files.log.ready():
                    return
        self._moved(offset)
        if done >= ENQUEUE_BATCH and offset < max_offset:
            self._schedule_enqueue()
        else:
            self._caught_up()

    def _caught_up(self) -> None:
        self._behind = False
        if self._dequeue_waits:
            self._dequeue_waits = False
            self.reactor.callLater(0, self._dequeue)

    def _moved(self, offset: int) -> None:
        if offset != self.queue_offset and self.files is not None:
            self.queue_offset = offset
            self._dirty = True
            if self.following:
                self.files.check.set(last_queue_offset=offset)
            else:
                self.files.check.set(last_queue_offset=offset, master_queue_offset=offset)

    def _cancels_ahead(self, offset: int) -> set[str]:
        """TIMER_DEL_UNIQKEY values in the timer topic from ``offset`` on (a bounded look, once per enqueue call)."""
        if self._late_cancels is None:
            keys: set[str] = set()
            end = min(self.store.get_max_offset_in_queue(TIMER_TOPIC, 0), offset + LATE_CANCEL_LOOKAHEAD)
            while offset < end:
                result = self.store.get_message(TIMER_TOPIC, 0, offset, 32)
                if not result.messages:
                    if result.next_begin_offset <= offset:
                        break
                    offset = result.next_begin_offset
                    continue
                for raw in result.messages:
                    try:
                        key = parse_properties(decode_record(raw).properties).get(TIMER_DEL_UNIQKEY)
                    except RecordError:
                        continue
                    if key is not None:
                        keys.add(key)
                offset = result.queue_offsets[-1] + 1
            self._late_cancels = keys
        return self._late_cancels

    def _enqueue_one(self, raw: bytes, offset: int) -> bool:
        """False only when a due message could not be put (it stays next in line)."""
        try:
            rec = decode_record(raw)
            props = parse_properties(rec.properties)
            due = _java_long(props.get(TIMER_OUT_MS))
        except (RecordError, ValueError) as exc:
            log.error("timer topic: skipping a record without a usable TIMER_OUT_MS: {why}", why=exc)
            return True
        now = int(self.clock() * 1000)
        write_ms = self._floor(now)
        cancel = TIMER_DEL_UNIQKEY in props
        if self.following:  # linked as the master linked it when it was stored, past due or not
            write_ms = self._floor(rec.store_timestamp)
            rolls, uniq = props.get(TIMER_ROLL_TIMES), props.get(PROPERTY_UNIQ_KEY)
            if rolls is not None and uniq is not None and not cancel:  # a cancel may go round twice: harmless
                self._went_round[(delete_key(props.get(PROPERTY_REAL_TOPIC, ""), uniq), rolls)] = None
                if len(self._went_round) > WENT_ROUND_KEPT:
                    del self._went_round[next(iter(self._went_round))]
        elif due < self.read_ms:  # its slot is read (Java asks whether it is due; a slot not read yet still serves)
            if cancel:  # Java drops it: its slot is read. Kept in mind for a message that went round after it
                self._late_seen[props[TIMER_DEL_UNIQKEY]] = None
                if len(self._late_seen) > LATE_CANCEL_LOOKAHEAD:
                    del self._late_seen[next(iter(self._late_seen))]
                return True
            uniq = props.get(PROPERTY_UNIQ_KEY)
            key = None if uniq is None else delete_key(props.get(PROPERTY_REAL_TOPIC, ""), uniq)
            if key is not None and (key in self._late_seen or key in self._cancels_ahead(offset)):
                # Java would deliver it (its cancel is dropped as late); both came due while they went round
                # (a roll) or while the broker was down: the cancel was sent before the time, so it holds
                log.debug("timer message {uniq} due at enqueue has a cancel after it; not delivered", uniq=uniq)
                return True
            self.enqueue_rate.flow()
            return self._deliver(rec, props, NEVER_ENQUEUED, roll=False, now=now)
        magic = MAGIC_DEFAULT | (MAGIC_DELETE if cancel else 0)
        slot_ms, roll = self._slot_of(due, rec.store_timestamp, now)
        if roll:
            magic |= MAGIC_ROLL
        files = self.files
        assert files is not None
        _, first, last, num, slot_magic = files.wheel.get(slot_ms)
        real_topic = props.get(PROPERTY_REAL_TOPIC, "")
        unit = UNIT.pack(UNIT.size, last, magic, write_ms, slot_ms - write_ms, rec.physical_offset, rec.total_size,
                         java_string_hash(real_topic), 0)
        pos = files.log.append(unit)
        delta = -1 if cancel else 1  # Java counts a cancel as one unit less in its slot
        files.wheel.put(slot_ms, first if first != -1 else pos, pos, num + delta, slot_magic)
        files.metrics.add(real_topic, delta)
        self.congest += delta
        self.enqueue_rate.flow()
        return True

    def _slot_of(self, due: int, stored_ms: int, now: int) -> tuple[int, bool]:
        """The slot a message due at ``due`` is linked into, and whether it rolls: ``due`` itself, or a roll
        slot nearer than it.

        Counted from when the record was stored, not from when it is linked, so that master and slave
        put each unit in the same slot. Counted from the master's link time, a roll landed up to the
        master's enqueue lag after the slave's slot, and a new master taking over from a read time
        between the two skipped it although the old master had not rolled it yet. A store time whose
        roll slot has been read already (an enqueue more than half a roll window behind) counts from
        now instead; a slave doing so links later than the master, never earlier, which a takeover
        survives."""
        window, p = self.cfg.roll_window_slots, self.precision
        for base in (self._floor(stored_ms), self._floor(now)):
            if due - base < window * p:
                return due, False
            slot_ms = base + (window // 2 if due - base - window * p < window // 3 * p else window) * p
            if slot_ms >= self.read_ms:
                break
        return slot_ms, True

    # -- dequeue ------------------------------------------------------------------------------
    def _dequeue(self) -> None:
        """Deliver every slot whose time has passed, a bounded amount per call."""
        files = self.files
        if files is None or not self._running or self.cfg.timerStopDequeue:
            return
        now = int(self.clock() * 1000)
        write_ms = self._floor(now)
        check = files.check
        units = slots = 0
        while self.read_ms < write_ms and units < DEQUEUE_UNITS and slots < EMPTY_SLOTS:
            if self._behind:
                self._dequeue_waits = True  # the enqueue calls again once caught up
                return
            slot_ms, first, last, num, _ = files.wheel.get(self.read_ms)
            slots += 1
            if slot_ms != -1:
                cached = self._slot_chain
                if cached is not None and cached[0] == (self.read_ms, first, last):
                    _, chain, cancels = cached  # a large slot delivered over several calls is read once
                else:
                    chain = self._chain(first, last)
                    cancels = self._cancel_keys(chain)
                    if cached is None or cached[0][0] != self.read_ms:
                        self._cancelled = set()
                    self._slot_chain = ((self.read_ms, first, last), chain, cancels)
                start = check.slot_done if check.last_read_time_ms == self.read_ms else 0
                for i in range(start, len(chain)):
                    if units >= DEQUEUE_UNITS:
                        return  # the rest of this slot on the next call
                    if not self._deliver_unit(chain[i], now, cancels):
                        return
                    units += 1
                    check.set(last_read_time_ms=self.read_ms, slot_done=i + 1)
                for key, real_topic in cancels.items():  # cancels that found nothing: the count they took back returns
                    if key in self._cancelled:
                        continue
                    files.metrics.add(real_topic, 1)
                self.congest -= num
            self.read_ms += self.precision
            self._slot_chain = None
            check.set(last_read_time_ms=self.read_ms, slot_done=0)
        if self.read_ms < write_ms:
            self.reactor.callLater(0, self._dequeue)

    def _chain(self, first: int, last: int) -> list[tuple]:
        """The slot's units in the order they were linked."""
        assert self.files is not None
        chain: list[tuple] = []
        pos = last
        while pos >= 0 and pos >= first and len(chain) < 10_000_000:
            unit = self.files.log.unit(pos)
            if unit is None:
                break
            chain.append(unit)
            if unit[1] >= pos:
                break
            pos = unit[1]
        chain.reverse()
        return chain

    def _read_unit(self, unit: tuple) -> Record | None:
        """The timer topic record a unit names, or None."""
        offset_py, size_py = unit[5], unit[6]
        raw = self.store.look_message_by_offset(offset_py)
        try:
            return decode_record(raw) if raw is not None and len(raw) == size_py else None
        except RecordError:
            return None

    def _cancel_keys(self, chain: list[tuple]) -> dict[str, str]:
        """TIMER_DEL_UNIQKEY -> real topic of every cancelling unit of a slot (read before anything is delivered)."""
        keys: dict[str, str] = {}
        for unit in chain:
            if _cancels(unit[2]):
                rec = self._read_unit(unit)
                if rec is not None:
                    props = parse_properties(rec.properties)
                    key = props.get(TIMER_DEL_UNIQKEY)
                    if key is not None:
                        keys[key] = props.get(PROPERTY_REAL_TOPIC, "")
        return keys

    def _deliver_unit(self, unit: tuple, now: int, cancels: dict[str, str]) -> bool:
        magic, enqueue_ms = unit[2], unit[3]
        if _cancels(magic):
            return True  # done by being read: its key is in ``cancels``
        rec = self._read_unit(unit)
        if rec is None:
            log.warn("timer log unit names commit log offset {offset} which holds no message; skipped", offset=unit[5])
            return True
        props = parse_properties(rec.properties)
        real_topic = props.get(PROPERTY_REAL_TOPIC, "")
        uniq = props.get(PROPERTY_UNIQ_KEY)
        key = None if uniq is None or not cancels else delete_key(real_topic, uniq)
        if key is not None and key in cancels:  # every copy it names (a roll read twice, across a takeover)
            if key in self._cancelled and self.files is not None:
                self.files.metrics.add(real_topic, -1)  # a second copy: the cancel took one off the count, not two
            self._cancelled.add(key)
            log.debug("timer message {uniq} of {topic} cancelled; not delivered", uniq=uniq, topic=real_topic)
            return True
        roll = bool(magic & MAGIC_ROLL)
        # A copy the old master put back on the timer topic: this unit's message went round there, whether
        # it rolls here or not (a slave linking late counts from a later time, and may not roll it)
        if self._went_round and uniq is not None and not magic & MAGIC_DELETE:
            again = (delete_key(real_topic, uniq), str(int(props.get(TIMER_ROLL_TIMES, "0") or 0) + 1))
            if again in self._went_round:
                log.debug("timer message {uniq} went round on the old master already", uniq=uniq)
                if self.files is not None:
                    self.files.metrics.add(real_topic, -1)  # its copy is counted where it is linked
                return True
        ok = self._deliver(rec, props, str(enqueue_ms), roll, now)
        if ok and self.files is not None:  # a rolled one counts again when it is linked again
            self.files.metrics.add(real_topic, 1 if magic & MAGIC_DELETE else -1)
            self.dequeue_rate.flow()
        return ok

    def _deliver(self, rec: Record, props: dict[str, str], enqueue_ms: str, roll: bool, now: int) -> bool:
        """Put the copy on its real topic (or, rolling, back on the timer topic); False to retry later."""
        props[TIMER_ENQUEUE_MS] = enqueue_ms
        if roll:
            props[TIMER_ROLL_TIMES] = str(int(props.get(TIMER_ROLL_TIMES, "0") or 0) + 1)
        props[TIMER_DEQUEUE_MS] = str(now)
        if roll:
            topic, queue_id = rec.topic, rec.queue_id
        else:
            topic = props.pop(PROPERTY_REAL_TOPIC, "")
            queue_text = props.pop(PROPERTY_REAL_QUEUE_ID, "")
            if not topic or not queue_text.lstrip("-").isdigit():
                log.error("timer message at {offset} names no real topic/queue; dropped", offset=rec.physical_offset)
                return True
            queue_id = int(queue_text)
        result = self.store.append_message(copy_of(rec, topic, queue_id, props))
        self._dirty = True
        if result.status is PutStatus.PUT_OK:
            if roll:
                self._schedule_enqueue()
            return True
        if result.status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
            log.error("timer message at {offset} refused by the store ({status}); dropped",
                      offset=rec.physical_offset, status=result.status.name)
            return True
        return False

    # -- flush --------------------------------------------------------------------------------
    def _sync(self) -> None:
        """Every timerFlushIntervalMs: the files to disk in a thread, then the checkpoint says how far that reached."""
        files = self.files
        if files is None or self._syncing or not self._dirty:
            return  # a moving read time alone is not worth a sync: after a crash it re-reads empty slots
        self._dirty = False
        self._syncing = True
        pos = files.log.write_pos

        def done(_: object) -> None:
            self._syncing = False
            if self.files is files:
                files.check.set(last_flush_pos=pos)

        def failed(f: Failure) -> None:
            self._syncing = False
            self._dirty = True
            log.failure("timer files sync failed", f)

        d = self._sync_d = threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), files.sync,
                                                     files.metrics.encode())
        d.addCallbacks(done, failed)

    async def drain(self) -> None:
        """Stop the loops and wait for a sync in flight (before :meth:`shutdown`)."""
        self.stop()
        while self._syncing and self._sync_d is not None:
            waiter: defer.Deferred[None] = defer.Deferred()

            def release(result: object, waiter: defer.Deferred[None] = waiter) -> object:
                waiter.callback(None)
                return result

            self._sync_d.addBoth(release)
            await waiter

    # -- clean ------------------------------------------------------------------------------
    def _clean(self) -> None:
        """Drop whole timer log files whose every unit names a message the commit log no longer holds."""
        files = self.files
        if files is None:
            return
        min_phy = self.store.min_phy_offset
        count = 0
        for mf in files.log.queue.files[:-1]:
            unit = files.log.last_unit_of(mf)
            if unit is None or unit[5] >= min_phy:
                break
            count += 1
        if count:
            log.info("timer log: dropping {n} file(s) below commit log offset {offset}", n=count, offset=min_phy)
            files.log.queue.remove_first(count)

    # -- views --------------------------------------------------------------------------------
    def runtime_figures(self) -> dict[str, str]:
        """The timer keys of Java 5.x's GET_BROKER_RUNTIME_INFO."""
        now = int(self.clock() * 1000)
        behind = max(0, self.store.get_max_offset_in_queue(TIMER_TOPIC, 0)) - self.queue_offset
        return {
            "timerReadBehind": str(int((now - self.read_ms) / 1000)),  # Java's long division truncates
            "timerOffsetBehind": str(behind),
            "timerCongestNum": str(self.congest),
            "timerEnqueueTps": self.enqueue_rate.tps(),
            "timerDequeueTps": self.dequeue_rate.tps(),
        }

    def waiting(self) -> int:
        """Timer messages not delivered yet (linked in the wheel or still in the timer topic)."""
        files = self.files
        return sum(c for c, _ in files.metrics.counts.values()) if files else 0


def timer_config(props: dict[str, str]) -> TimerConfig:
    """The timer keys of ``props``; a broker has them parsed already as ``BrokerConfig.timer``."""
    return TimerConfig.from_properties(props)


__all__ = ["TimerMessageService", "TIMER_TOPIC", "TIMER_DEL_UNIQKEY", "Refusal", "delete_key", "flow_controlled",
           "is_timer_request", "timer_config"]
