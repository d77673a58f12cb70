"""MessageStore: the facade the broker calls (Java's DefaultMessageStore, Twisted flavoured)."""
from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from concurrent.futures import Executor
from typing import Any, Callable

from twisted.internet import task
from twisted.internet.defer import Deferred, succeed

from rmqtx.common.message import PROPERTY_KEYS, PROPERTY_UNIQ_KEY, parse_properties
from rmqtx.common.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK

from . import record as R
from .allocator import FileAllocator
from .checkpoint import Checkpoint
from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue import UNIT, UNIT_SIZE, ConsumeQueue, batch_limits, load_consume_queues, scan_units
from .consume_queue_ext import MAX_ADDR as EXT_MAX_ADDR
from .consume_queue_ext import ExtUnit
from .cq_maps import MappedQueues
from .cq_rocksdb import RocksConsumeQueue, RocksUnits
from .visibility import ConfirmGate
from .dispatch import BitmapCalculator, ConsumeQueueDispatcher, DispatchPipeline, Dispatcher
from .flush import FlushService
from .index import IndexService
from .mapped_file import StoreError
from .message_filter import MessageFilter
from .recovery import Recovery
from .results import BatchToStore, GetResult, GetStatus, MessageToStore, PutResult, PutStatus
from .retention import RetentionService
from .times import TIME_AT_SYNC, TIME_BY_CALLER, TIME_NOW, StoreTimes

__all__ = ["MessageStore", "StoreConfig", "MessageToStore", "BatchToStore", "PutStatus", "PutResult",
           "GetStatus", "GetResult", "StoreError", "StoreLockedError"]

log = logging.getLogger(__name__)

_NO_QUEUE = (TRANSACTION_PREPARED, TRANSACTION_ROLLBACK)
#: How often consume queues unused since the last look are unmapped (see cq_maps)
MAPS_SWEEP_SECONDS = 60.0

_TOTAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class StoreLockedError(StoreError):
    """Another store instance holds the directory's lock file."""


class MessageStore:
    """Commit log + consume queues + index under one root directory."""

    def __init__(self, config: StoreConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        #: put and get times for brokerStatus (Java's StoreStatsService)
        self.times = StoreTimes(int(clock() * 1000))
        self.root = config.store_path_root_dir
        self._allocator = FileAllocator("rmqtx-store-alloc")
        self.commitlog = CommitLog(config, self._allocator)
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        #: the bound on mapped consume-queue files (None: every file mapped, from load on)
        self.cq_maps = (MappedQueues(config.mapped_consume_queue_files_max)
                        if config.mapped_consume_queue_files_max > 0 and not config.rocksdb_queues else None)
        #: storeType=defaultRocksDB: the database of every queue's units (opened by load)
        self.rocks: RocksUnits | None = None
        self._sweep_call: Any = None
        self.index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num,
                                  config.max_msgs_num_batch, self._allocator, clock, config.warm_maped_file_enable)
        self.checkpoint: Checkpoint | None = None
        self.dirty_cqs: set[ConsumeQueue] = set()
        self.disk_full = False
        self._listeners: list[Callable[[str, int, int], None]] = []
        # queues grown since the listeners last heard (told once per reactor turn, as Java's reput
        # thread tells long polling after dispatch): (topic, queue id) -> new max offset
        self._arrived: dict[tuple[str, int], int] = {}
        self._arrival_call = None
        self._holding = False  # a read is on whose end calls flush_arrivals: no call scheduled for its puts
        self._lock_fd: int | None = None
        self._running = False
        self._sync = config.sync_flush
        self._slave = config.is_slave
        #: SYNC_FLUSH: a put is acknowledged only once :meth:`put_message`'s Deferred / :meth:`call_when_flushed` says so
        self.sync_flush = config.sync_flush
        self._index_enabled = config.message_index_enable
        self._ext_root = config.consume_queue_ext_dir if config.enable_consume_queue_ext else None
        self._cq_root = config.consume_queue_dir  # joined once: a burst of new queues makes 100,000
        self._cq_dispatcher = ConsumeQueueDispatcher(self.consume_queues, self._cq, self.dirty_cqs,
                                                     R.parse_delay_levels(config.message_delay_level))
        steps: list[Dispatcher] = [self._cq_dispatcher]
        if self._index_enabled:
            steps.append(self.index)
        #: every stored record goes through it: puts here, recovery and the replica's appends
        self.pipeline = DispatchPipeline(steps)
        self.flush = FlushService(config, self.commitlog, self.dirty_cqs, self.index, self.pipeline,
                                  self._files_pending)
        self.retention = RetentionService(config, clock, self.commitlog, self.consume_queues, self.index,
                                          self._set_disk_full)
        self._reactor: Any = None
        #: Consume queues whose units wait for a file the allocator thread is making.
        self.waiting_cqs: set[ConsumeQueue] = set()
        # queues whose file the allocator made, for the reactor's next turn (see _cq_made_in_thread)
        self._made_lock = threading.Lock()
        self._made_cqs: list[ConsumeQueue] = []
        self._made_told = False
        self._batch_limits: dict[tuple[int, int, int, int, int], tuple[tuple[int, int], tuple[int, int]]] = {}
        #: controller mode without readUnCommitted: dispatch waits for the confirm offset (None: at once)
        self.gate: ConfirmGate | None = None
        #: the last stop left no abort file (set by load)
        self.stopped_cleanly = True

    # ---- lifecycle --------------------------------------------------------------------------

    @property
    def abort_path(self) -> str:
        return os.path.join(self.root, "abort")

    def load(self) -> None:
        """Lock the directory, recover what is on disk and mark the store as running (blocking)."""
        os.makedirs(self.root, exist_ok=True)
        self._acquire_lock()
        try:
            clean = not os.path.exists(self.abort_path)
            self.stopped_cleanly = clean
            self.checkpoint = Checkpoint(os.path.join(self.root, "checkpoint"))
            self.commitlog.queue.load()
            if self.config.rocksdb_queues:
                self.rocks = RocksUnits(self.config.consume_queue_dir)
                self.consume_queues.update(self.rocks.load_queues())  # type: ignore[arg-type]
            else:
                self.consume_queues.update(load_consume_queues(  # in place: the pipeline holds this table
                    self.config.consume_queue_dir, self.config.mapped_file_size_consume_queue, self._allocator,
                    self._ext_root, self.config.mapped_file_size_consume_queue_ext,
                    self.config.warm_maped_file_enable, self.cq_maps))
            if self._index_enabled:
                self.index.load()
            self.flush.checkpoint = self.checkpoint
            Recovery(self.config, self.commitlog, self.consume_queues, self.index, self.checkpoint,
                     self.pipeline, self.rocks.built if self.rocks is not None else None).run(clean)
            if self.rocks is not None:
                self.rocks.write_now()  # what recovery dispatched
            self.dirty_cqs.update(self.consume_queues.values())
            with open(self.abort_path, "wb"):
                pass
        except BaseException:
            if self.rocks is not None:
                self.rocks.close()
                self.rocks = None
            self._release_lock()
            raise
        self._running = True

    def _acquire_lock(self) -> None:
        path = os.path.join(self.root, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # refuses a second store in this process too
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # what a Java broker checks
        except OSError:
            os.close(fd)
            raise StoreLockedError(f"store directory {self.root} is locked by another running store "
                                   f"(lock file {path})") from None
        os.pwrite(fd, b"lock", 0)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def start(self, reactor: Any = None) -> None:
        """Start periodic flush and retention on the reactor."""
        if reactor is None:
            from twisted.internet import reactor
        self._reactor = reactor
        for cq in self.consume_queues.values():
            cq.later = self._cq_later
        self.index.later = self._index_later
        if self.rocks is not None:
            self.rocks.reactor = reactor
        self.flush.start(reactor)
        self.retention.start(reactor)
        if self.cq_maps is not None:
            self.cq_maps.dispose = self._close_in_thread
            self._sweep_call = task.LoopingCall(self._sweep_maps)
            self._sweep_call.clock = reactor
            self._sweep_call.start(MAPS_SWEEP_SECONDS, now=False)

    def _close_in_thread(self, mm: Any) -> None:
        """An evicted queue's old mapping, closed by the file thread (see MappedFile.unmap), before the
        files waiting to be made: each mapping holds a descriptor until closed."""
        self._allocator.call_first(mm.close)

    def _sweep_maps(self) -> None:
        assert self.cq_maps is not None
        idle = self.cq_maps.sweep()
        if idle:
            log.debug("unmapped %d idle consume queues (%d files stay mapped)", idle, self.cq_maps.files)

    # ---- files made in the allocator thread -----------------------------------------------------

    def _when_made(self, fut: Any, fn: Callable[..., None], *args: Any) -> None:
        """fn(*args) on the reactor once fut (a file being made) is done; after 1 s to retry a failure (fut None)."""
        reactor = self._reactor
        if fut is None:
            reactor.callLater(1.0, fn, *args)
        else:
            fut.add_done_callback(lambda _f: reactor.callFromThread(fn, *args))

    def _cq_later(self, cq: ConsumeQueue, fut: Any) -> None:
        self.waiting_cqs.add(cq)
        if fut is None:
            self._when_made(None, self._cq_file_made, cq)
            return
        reactor = self._reactor
        fut.add_done_callback(lambda _f: self._cq_made_in_thread(reactor, cq))

    def _cq_made_in_thread(self, reactor: Any, cq: ConsumeQueue) -> None:
        """The allocator made a queue's file: queue it for the reactor, which hears once per batch
        (a burst of new queues is thousands of files, each a wake-up of the reactor otherwise)."""
        with self._made_lock:
            self._made_cqs.append(cq)
            if self._made_told:
                return
            self._made_told = True
        reactor.callFromThread(self._cq_files_made)

    def _cq_files_made(self) -> None:
        with self._made_lock:
            made, self._made_cqs = self._made_cqs, []
            self._made_told = False
        for cq in made:
            self._cq_file_made(cq)

    def _cq_file_made(self, cq: ConsumeQueue) -> None:
        """Write a queue's waiting units into its new file (readers saw them in memory already)."""
        if not self._running or cq not in self.waiting_cqs:
            return
        if self.consume_queues.get((cq.topic, cq.queue_id)) is not cq:  # deleted meanwhile
            self.waiting_cqs.discard(cq)
            return
        try:
            done = cq.write_pending()
        except OSError as e:
            log.error("consume queue %s/%d: %s", cq.topic, cq.queue_id, e)
            return
        if done:
            self.waiting_cqs.discard(cq)
        self.dirty_cqs.add(cq)

    def _index_later(self, index: IndexService, fut: Any) -> None:
        self._when_made(fut, self._index_file_made)

    def _index_file_made(self) -> None:
        if self._running and self.index.waiting:
            try:
                self.index.write_pending()
            except OSError as e:
                log.error("index: %s", e)

    @property
    def allocator(self) -> Executor:
        """The one thread that makes and deletes the store's files; the broker's timer files use it too,
        so file work stays in one queue."""
        return self._allocator

    @property
    def files_pending(self) -> bool:
        """Dispatched units or index entries still wait for a file: the checkpoint's logics time must not pass them."""
        return self._files_pending()

    def _files_pending(self) -> bool:
        return bool(self.waiting_cqs) or self.index.waiting or (self.rocks is not None and self.rocks.unwritten)

    def _set_disk_full(self, full: bool) -> None:
        """Retention's verdict after each look at the disk: refuse puts while it is nearly full."""
        self.disk_full = full

    def _write_waiting(self) -> None:
        """Shutdown: wait for files being made (fine now) and write what waited for them."""
        if self.cq_maps is not None:
            self.cq_maps.dispose = None
        for cq in list(self.waiting_cqs):
            cq.later = None
            cq.write_pending()
            self.dirty_cqs.add(cq)
        self.waiting_cqs.clear()
        self.index.later = None
        self.index.write_pending()

    def shutdown(self) -> None:
        """Stop services, flush everything, write the checkpoint, remove abort, unlock."""
        if not self._running:
            return
        self._running = False
        if self._sweep_call is not None and self._sweep_call.running:
            self._sweep_call.stop()
        self._sweep_call = None
        self.flush_arrivals()
        self._reactor = None
        self.retention.stop()
        self.flush.stop()
        self._write_waiting()
        if self.rocks is not None:
            self.rocks.close()  # every waiting unit written first
        self.flush.flush_all_now()
        self.commitlog.queue.close()
        for cq in self.consume_queues.values():
            cq.close()
        self.index.close()
        self._allocator.shutdown(wait=True)
        assert self.checkpoint is not None
        self.checkpoint.close()
        os.unlink(self.abort_path)
        self._release_lock()

    # ---- put ----------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    def set_slave(self, slave: bool) -> None:
        """Controller mode switches the role at run time: a slave's commit log takes replicated bytes only."""
        self._slave = slave

    def _refuse(self) -> PutResult | None:
        if not self._running:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="message store is not running")
        if self._slave:  # a slave's commit log is written by replication only (Java's checkStoreStatus)
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE)
        if self.disk_full:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="disk full: message store is not writeable")
        return None

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None and self.rocks is not None:
            cq = self.consume_queues[(topic, queue_id)] = RocksConsumeQueue(topic, queue_id, self.rocks)  # type: ignore
        if cq is None:
            cq = ConsumeQueue(topic, queue_id, self._cq_root,
                              self.config.mapped_file_size_consume_queue, self._allocator,
                              self._ext_root, self.config.mapped_file_size_consume_queue_ext,
                              self.config.warm_maped_file_enable)
            cq.maps = self.cq_maps
            if self._reactor is not None:
                cq.later = self._cq_later
            self.consume_queues[(topic, queue_id)] = cq
        return cq

    def _prepare_queue(self, topic: str, queue_id: int, sys_flag: int) -> ConsumeQueue | None:
        """The record's consume queue, with a file ready for its unit (a full disk fails here, before the write)."""
        if (sys_flag & TRANSACTION_MASK) in _NO_QUEUE or self.commitlog.topic_bytes(topic) is None:
            return None
        cq = self._cq(topic, queue_id)
        cq.ensure_room(self.commitlog.topic_queue_table.get((topic, queue_id), 0))
        return cq

    def put_message(self, msg: MessageToStore, timed: bool = True) -> Deferred:
        """Write and dispatch now; the Deferred fires at once (async flush) or after the group sync.
        ``timed`` False: the caller waits for more (a slave) and reports the end with :meth:`put_done`."""
        res = self.append_message(msg, None, TIME_AT_SYNC if timed else TIME_BY_CALLER)
        if self._sync and res.status is PutStatus.PUT_OK:
            return self._await_flush(res, timed)
        return succeed(res)

    def append_message(self, msg: MessageToStore, props: dict[str, str] | None = None,
                       timing: int = TIME_NOW) -> PutResult:
        """Write and dispatch one message without a Deferred (the broker's send path).

        Under SYNC_FLUSH a PUT_OK result is not durable yet: wait for :meth:`call_when_flushed`, and
        pass ``timing=TIME_AT_SYNC`` so that the put is timed until then (TIME_NOW: timed at once).
        ``props`` is the parsed ``msg.properties`` when the caller has it, to skip a re-parse.
        """
        if not self._running or self._slave or self.disk_full:
            return self._refuse()  # type: ignore[return-value]
        begin = int(self.clock() * 1000)
        try:
            cq = self.consume_queues.get((msg.topic, msg.queue_id))
            if cq is None or cq.needs_file or (msg.sys_flag & TRANSACTION_MASK) in _NO_QUEUE:
                cq = self._prepare_queue(msg.topic, msg.queue_id, msg.sys_flag)
            res, req = self.commitlog.put_message(msg, begin, props)
        except OSError as e:
            log.error("put failed: %s", e)
            self._failed(begin)
            return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, remark=f"create mapped file failed: {e}")
        if req is None:
            self._refused(res, msg.topic, begin)
        elif timing == TIME_NOW or (timing == TIME_AT_SYNC and not self._sync):
            now = int(self.clock() * 1000)
            times = self.times
            if now == begin and now < times.window_end:  # StoreTimes.put's common case, inline (the send path)
                times.counts[0] += 1
                times.latency[0] += 1
            else:
                times.put(now - begin, now)
        if req is not None:
            if self.gate is not None:
                self.gate.hold(req, cq is not None)
                self.gate.release()
                return res
            self.pipeline.dispatch(req)
            if self._listeners and cq is not None:
                self._arrive(msg.topic, msg.queue_id, req.queue_offset + 1)
        return res

    def _refused(self, res: PutResult, topic: str, begin: int) -> None:
        """A put the commit log did not write is a failed put, unless Java's store would have refused it
        before timing it (a topic name or properties too long)."""
        if res.status is not PutStatus.PROPERTIES_SIZE_EXCEEDED and self.commitlog.topic_bytes(topic) is not None:
            self._failed(begin)

    def _failed(self, begin: int) -> None:
        now = int(self.clock() * 1000)
        self.times.put(now - begin, now, False)

    def _arrive(self, topic: str, queue_id: int, new_max: int) -> None:
        arrived = self._arrived
        if not arrived and not self._holding and self._reactor is not None:
            self._arrival_call = self._reactor.callLater(0, self.flush_arrivals)
        arrived[(topic, queue_id)] = new_max
        if self._reactor is None:  # not started (offline use, tests): at once
            self.flush_arrivals()

    def hold_arrivals(self) -> None:
        """A batch of puts begins whose end calls :meth:`flush_arrivals` (a remoting read): its puts
        schedule no reactor call of their own (one scheduled and cancelled per read weighs on small reads)."""
        self._holding = True

    def flush_arrivals(self) -> None:
        """Tell the arrival listeners about every queue grown since the last time, once each: at the
        end of the reactor turn, or sooner from whoever knows a batch of puts is over (the end of a read)."""
        self._holding = False
        if not self._arrived:
            return
        call, self._arrival_call = self._arrival_call, None
        if call is not None and call.active():
            call.cancel()
        arrived, self._arrived = self._arrived, {}
        for (topic, queue_id), new_max in arrived.items():
            self._notify(topic, queue_id, new_max)

    def put_messages(self, batch: BatchToStore, timed: bool = True) -> Deferred:
        """Write a client batch as consecutive records; one result for all (comma-joined ids).
        ``timed`` as for :meth:`put_message`."""
        res = self._refuse()
        if res is None:
            begin = int(self.clock() * 1000)
            try:
                cq = self._prepare_queue(batch.topic, batch.queue_id, batch.sys_flag)
                res, reqs = self.commitlog.put_batch(batch, begin)
            except OSError as e:
                log.error("batch put failed: %s", e)
                self._failed(begin)
                return succeed(PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, remark=f"create mapped file failed: {e}"))
            if not reqs:
                self._refused(res, batch.topic, begin)
            elif timed and not self._sync:  # one time for the batch, as Java's; a synced one in _await_flush
                now = int(self.clock() * 1000)
                self.times.put(now - begin, now)
            gate = self.gate
            if gate is not None:
                for req in reqs:
                    gate.hold(req, cq is not None)
                gate.release()
            else:
                for req in reqs:
                    self.pipeline.dispatch(req)
            if reqs:
                if self._listeners and cq is not None and gate is None:
                    self._arrive(batch.topic, batch.queue_id, cq.max_offset)
                if self._sync:
                    return self._await_flush(res, timed)
        return succeed(res)

    def put_done(self, res: PutResult) -> PutResult:
        """The end of a put made with ``timed=False``, for its time (passes ``res`` on, for Deferreds)."""
        if res.store_timestamp:  # written; a refused put was counted when it was refused
            now = int(self.clock() * 1000)
            self.times.put(now - res.store_timestamp, now)
        return res

    def call_when_flushed(self, res: PutResult, fn: Callable[[PutResult, object], None], arg: object) -> None:
        """``fn(res, arg)`` once res's bytes are synced (status FLUSH_DISK_TIMEOUT if that took too
        long): a synced :meth:`put_message` without a Deferred per message."""
        self.flush.call_when_flushed(res.wrote_offset + res.wrote_bytes, self._flushed, (res, fn, arg))

    def _flushed(self, synced: bool, waiting: tuple) -> None:
        res, fn, arg = waiting
        if not synced:
            res.status = PutStatus.FLUSH_DISK_TIMEOUT
        self.put_done(res)  # a flush timeout is no failed put, as in Java
        fn(res, arg)

    def _await_flush(self, res: PutResult, timed: bool = True) -> Deferred:
        def done(ok: bool) -> PutResult:
            if not ok:
                res.status = PutStatus.FLUSH_DISK_TIMEOUT
            return self.put_done(res) if timed else res
        return self.flush.wait_flushed(res.wrote_offset + res.wrote_bytes).addCallback(done)

    # ---- dispatch -----------------------------------------------------------------------------

    @property
    def dispatched_ts(self) -> int:
        """Store time of the last record dispatched (the checkpoint's logics time)."""
        return self.pipeline.dispatched_ts

    def set_bitmap_calculator(self, fn: BitmapCalculator | None) -> None:
        """Who computes each dispatched message's filter bit map (kept only when enableConsumeQueueExt)."""
        self._cq_dispatcher.bitmap_calc = fn

    def _notify(self, topic: str, queue_id: int, new_max: int) -> None:
        for fn in self._listeners:
            try:
                fn(topic, queue_id, new_max)
            except Exception:
                log.exception("arrival listener failed")

    def notify_arrival(self, topic: str, queue_id: int, new_max: int) -> None:
        """Tell arrival listeners (long polling) about records a replica dispatched."""
        if self._listeners:
            self._notify(topic, queue_id, new_max)

    @property
    def has_arrival_listeners(self) -> bool:
        return bool(self._listeners)

    def set_confirm_gate(self, confirm: Callable[[], int]) -> ConfirmGate:
        """Controller mode (readUnCommitted=false): from now on a record is dispatched once ``confirm()``
        passes its end; call :meth:`release_confirmed` when that offset may have moved. After a crash what
        recovery dispatched past the persisted confirm offset is taken back (a clean stop keeps it, as Apache's
        normal recovery dispatches everything)."""
        self.gate = ConfirmGate(self, confirm)
        return self.gate

    def recover_confirm_offset(self) -> int | None:
        """After load, with a gate: after a crash, the confirm offset persisted in the checkpoint, and what
        recovery dispatched past it taken back; None after a clean stop (everything stays visible)."""
        ckpt = self.checkpoint
        if self.gate is None or self.stopped_cleanly or ckpt is None:
            return None
        confirm = ckpt.stored_confirm_offset
        if not 0 <= confirm < self.max_phy_offset:
            return None
        self.gate.undo_unconfirmed(confirm)
        return max(confirm, self.min_phy_offset)

    def release_confirmed(self) -> None:
        if self.gate is not None:
            self.gate.release()

    def add_arrival_listener(self, fn: Callable[[str, int, int], None]) -> None:
        self._listeners.append(fn)

    # ---- get ----------------------------------------------------------------------------------

    def _memory_for_messages(self) -> int:
        """Bytes of the commit log Java assumes are in the page cache (accessMessageInMemoryMaxRatio)."""
        return _TOTAL_MEMORY * self.config.access_message_in_memory_max_ratio // 100

    def get_message(self, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: MessageFilter | None = None, max_total_bytes: int = 256 * 1024) -> GetResult:
        """Up to max_msg_nums stored records from offset; statuses and next offsets as Java decides them.

        Units are filtered before the commit log is read (``message_filter.matches_unit``, with the
        ext unit when there is one; a tags code that cannot be known matches).
        """
        clock = self.clock
        begin = int(clock() * 1000)
        got = self._get_message(topic, queue_id, offset, max_msg_nums, message_filter, max_total_bytes)
        self.times.get(int(clock() * 1000) - begin)
        return got

    def _get_message(self, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                     message_filter: MessageFilter | None, max_total_bytes: int) -> GetResult:
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            # Java's store creates a missing queue on lookup, so the caller sees an empty one
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        min_o, max_o = cq.min_offset, cq.max_offset
        if max_o == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_o, max_o)
        if offset < min_o:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_o, min_o, max_o)
        if offset == max_o:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_o, max_o)
        if offset > max_o:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_o, min_o, max_o)  # 4.9.8: to the end, whatever the min
        units = cq.read_units(offset, max(16000, max_msg_nums * UNIT_SIZE))
        if units is None:
            return GetResult(GetStatus.OFFSET_FOUND_NULL, cq.roll_next_file(offset), min_o, max_o)
        cl = self.commitlog
        max_phy = cl.max_offset
        memory = self._memory_for_messages()
        status = GetStatus.NO_MATCHED_MESSAGE
        messages: list[bytes] = []
        qofs: list[int] = []
        total = 0
        next_file_start = -1
        max_pulling = 0
        i, n = 0, len(units)
        unpack = UNIT.unpack_from
        ext_q = cq.ext
        ext: ExtUnit | None
        # when the batch is full (Java's isTheBatchFull), and the commit log file the last read came from (read() inline)
        c = self.config
        key = (max_msg_nums, max_total_bytes, c.max_transfer_count_on_message_in_memory,
               c.max_transfer_bytes_on_message_in_disk, c.max_transfer_count_on_message_in_disk)
        try:
            (mem_n, mem_b), (disk_n, disk_b) = self._batch_limits[key]
        except KeyError:
            (mem_n, mem_b), (disk_n, disk_b) = self._limits_for(key)
        find = cl.queue.find
        mf = None
        mf_from = mf_end = 0
        count = 0
        # the plain runs go through scan_units (compiled where built); this loop takes the rest
        if message_filter is None:
            tags, plain = None, True
        else:
            tags, plain = message_filter.tags_codes, message_filter.by_tags_only
        while i < n:
            if plain and mf is not None and next_file_start < 0:
                had = count
                i, count, total, last = scan_units(units, i, n, mf.mm, mf_from, mf.wrote, max_phy, memory, count, total,
                                                   mem_n, mem_b, disk_n, disk_b, tags, EXT_MAX_ADDR, messages, qofs, offset)
                if last >= 0:
                    max_pulling = last
                if count > had:
                    status = GetStatus.FOUND
                if i >= n:
                    break
            phy, size, tag = unpack(units, i)
            max_pulling = phy
            if next_file_start >= 0 and phy < next_file_start:
                i += UNIT_SIZE
                continue
            if total and count and (count >= disk_n or total + size > disk_b if max_phy - phy > memory
                                    else count >= mem_n or total + size > mem_b):
                break  # batch_limits: the batch is full
            if tag > EXT_MAX_ADDR:
                ext = None
            elif ext_q is None:  # written with ext on, read with it off: the tags code is unknown
                ext = tag = None
            else:
                ext = ext_q.get(tag)
                if ext is None:
                    log.error("consume queue %s/%d: ext unit %d not found", topic, queue_id, tag)
                tag = ext.tags_code if ext is not None else None
            if message_filter is not None and not message_filter.matches_unit(tag, ext):
                i += UNIT_SIZE
                continue
            if mf is None or not mf_from <= phy < mf_end:
                mf = find(phy)
                if mf is not None:
                    mf_from = mf.from_offset
                    mf_end = mf_from + mf.file_size
            data = None
            if mf is not None:  # CommitLog.read, inline
                pos = phy - mf_from
                if size > 0 and pos + size <= mf.wrote:
                    data = mf.mm[pos:pos + size]
            if data is None:
                if total == 0:
                    status = GetStatus.MESSAGE_WAS_REMOVING
                next_file_start = cl.roll_next_file(phy)
                i += UNIT_SIZE
                continue
            messages.append(data)
            qofs.append(offset + i // UNIT_SIZE)
            count += 1
            total += size
            status = GetStatus.FOUND
            next_file_start = -1
            i += UNIT_SIZE
        return GetResult(status, offset + i // UNIT_SIZE, min_o, max_o, messages,
                         max_phy - max_pulling > memory, qofs)

    def _limits_for(self, key: tuple[int, int, int, int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
        """batch_limits for (max_msg_nums, max bytes, then the three maxTransfer settings), kept: reads
        ask for the same few again and again, and a call per pull shows in the call budget."""
        if len(self._batch_limits) > 64:
            self._batch_limits.clear()
        max_count, max_bytes, memory_count, disk_bytes, disk_count = key
        out = self._batch_limits[key] = batch_limits(max_count, max_bytes, memory_count - 1, disk_bytes, disk_count - 1)
        return out

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        unit = cq.unit_at(cq_offset) if cq else None
        return unit[0] if unit else 0

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, cq_offset: int) -> bool:
        """Whether the message at cq_offset lies farther behind the commit log's end than the share of
        memory Java assumes cached (accessMessageInMemoryMaxRatio); False when there is no such unit."""
        cq = self.consume_queues.get((topic, queue_id))
        unit = cq.unit_at(cq_offset) if cq else None
        if unit is None:
            return False
        return self.commitlog.max_offset - unit[0] > self._memory_for_messages()

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        unit = cq.unit_at(cq.min_offset) if cq else None
        return self.commitlog.store_timestamp_at(unit[0], unit[1]) if unit else -1

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        unit = cq.unit_at(cq_offset) if cq else None
        return self.commitlog.store_timestamp_at(unit[0], unit[1]) if unit else -1

    def _offset_by_time_search(self, cq: RocksConsumeQueue, timestamp_ms: int) -> int:
        """The first unit stored at or after timestamp_ms (the last one when none is), by binary search."""
        lo, hi = cq.min_offset, cq.max_offset - 1
        if hi < lo:
            return 0
        while lo < hi:
            mid = (lo + hi) // 2
            unit = cq.unit_at(mid)
            ts = self.commitlog.store_timestamp_at(unit[0], unit[1]) if unit else -1
            if ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """Consume queue offset of the message stored nearest to timestamp_ms (Java's choice rule)."""
        cq = self.consume_queues.get((topic, queue_id))
        if isinstance(cq, RocksConsumeQueue):
            return self._offset_by_time_search(cq, timestamp_ms)
        if cq is None or not cq.queue.files:
            return 0
        cl = self.commitlog
        min_phy = cl.min_offset
        files = [mf for mf in cq.queue.files if mf.wrote > 0]
        if not files:
            return 0
        cq.use()
        chosen = files[-1]
        for mf in files:  # first file whose last message is at or after the time
            off, size, _ = UNIT.unpack_from(mf.mm, mf.wrote - UNIT_SIZE)
            if cl.store_timestamp_at(off, size) >= timestamp_ms:
                chosen = mf
                break
        low = max(0, cq.min_logic_offset - chosen.from_offset)
        high = chosen.wrote - UNIT_SIZE
        target = left = right = -1
        left_v = right_v = -1
        while high >= low:
            mid = (low + high) // (2 * UNIT_SIZE) * UNIT_SIZE
            off, size, _ = UNIT.unpack_from(chosen.mm, mid)
            if off < min_phy:
                low = mid + UNIT_SIZE
                left = mid
                continue
            ts = cl.store_timestamp_at(off, size)
            if ts < 0:
                return 0
            if ts == timestamp_ms:
                target = mid
                break
            if ts > timestamp_ms:
                high = mid - UNIT_SIZE
                right, right_v = mid, ts
            else:
                low = mid + UNIT_SIZE
                left, left_v = mid, ts
        if target == -1:
            if left_v == -1:
                target = right
            elif right_v == -1:
                target = left
            else:
                target = right if abs(timestamp_ms - left_v) > abs(timestamp_ms - right_v) else left
        return (chosen.from_offset + target) // UNIT_SIZE

    def look_message_by_offset(self, phy_offset: int) -> bytes | None:
        return self.commitlog.read_record(phy_offset)

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int,
                      end_ts: int) -> tuple[list[bytes], int, int]:
        """Records of topic indexed under key (UNIQ_KEY or a KEYS entry) stored in [begin_ts, end_ts]."""
        if not self._index_enabled:
            return [], 0, 0
        out: list[bytes] = []
        seen: set[int] = set()
        last_ts = last_phy = 0
        upper = end_ts
        for _ in range(3):
            offsets, last_ts, last_phy = self.index.query(topic, key, max_num, begin_ts, upper)
            if not offsets:
                break
            offsets.sort()
            for m, off in enumerate(offsets):
                data = self.commitlog.read_record(off)
                if data is None:
                    continue
                try:
                    rec = R.decode_record(data)
                except R.RecordError:
                    continue
                if m == 0:
                    upper = rec.store_timestamp
                if off in seen or rec.topic != topic:
                    continue
                props = parse_properties(rec.properties)
                if key == props.get(PROPERTY_UNIQ_KEY) or key in props.get(PROPERTY_KEYS, "").split(" "):
                    seen.add(off)
                    out.append(data)
            if out or upper < begin_ts:
                break
        return out, last_ts, last_phy

    # ---- admin --------------------------------------------------------------------------------

    @property
    def max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    def topics_and_queues(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self.consume_queues):
            out.setdefault(topic, []).append(qid)
        return out

    def delete_topics(self, topics: set[str]) -> None:
        """Remove the consume queues of these topics (their records stay in the commit log)."""
        for key in [k for k in self.consume_queues if k[0] in topics]:
            cq = self.consume_queues.pop(key)
            self.dirty_cqs.discard(cq)
            self.waiting_cqs.discard(cq)
            cq.destroy()
            self.commitlog.topic_queue_table.pop(key, None)

    def wait_for_file_jobs(self) -> None:
        """Block until files queued for creation or deletion are done and what waited for them is written
        (for tests and benchmarks that drive the broker without running the reactor)."""
        self._allocator.submit(lambda: None).result()
        for cq in list(self.waiting_cqs):
            self._cq_file_made(cq)
        self._index_file_made()

    def run_retention_now(self) -> None:
        """Delete expired files now, as at deleteWhen (for tests and admin commands)."""
        self.retention.run(manual=True)
