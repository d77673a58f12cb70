"""Transactional messages: half messages, commit/rollback with op records, and check-back.

Half messages wait in RMQ_SYS_TRANS_HALF_TOPIC; END_TRANSACTION puts the committed copy on its
real topic and/or writes an op record (body = the half queue offset) to RMQ_SYS_TRANS_OP_HALF_TOPIC.
Unresolved halves older than the timeout are re-put with TRANSACTION_CHECK_TIMES + 1 and their
producer group is asked (CHECK_TRANSACTION_STATE); after transactionCheckMax checks they are dropped.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import defer, task
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqtx.broker.reput import committed_copy
from rmqtx.broker.timer import is_timer_request
from rmqtx.common.message import (
    PROPERTY_CHECK_IMMUNITY,
    PROPERTY_CHECK_TIMES,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    parse_properties,
    properties_to_string,
)
from rmqtx.common.sysflag import TRANSACTION_COMMIT
from rmqtx.common.topics import PERM_READ, PERM_WRITE, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import CheckTransactionStateRequestHeader
from rmqtx.store.record import Record, RecordError, decode_record, encode_record, record_msg_id
from rmqtx.store.results import MessageToStore, PutResult, PutStatus

if TYPE_CHECKING:
    from rmqtx.broker.clients import ClientManager
    from rmqtx.broker.config import BrokerConfig
    from rmqtx.broker.offsets import ConsumerOffsetManager
    from rmqtx.broker.schedule import ScheduleMessageService
    from rmqtx.broker.timer import TimerMessageService
    from rmqtx.broker.topics import TopicConfigManager
    from rmqtx.store.message_store import MessageStore

log = Logger(namespace="rmqtx.broker.transactions")

CHECK_GROUP = "CID_RMQ_SYS_TRANS"
OP_TAG = "d"


class TransactionError(Exception):
    """An END_TRANSACTION that does not name a pending half message, or whose commit was not stored; the
    remark says why, ``code`` is the answer's (SYSTEM_ERROR unless Java answers otherwise)."""

    def __init__(self, remark: str, code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(remark)
        self.code = code


#: A commit put with one of these statuses counts as stored (Java's sendFinalMessage answers SUCCESS).
_COMMITTED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE)


def _commit_failure(status: PutStatus, max_message_size: int) -> TransactionError:
    """Java's sendFinalMessage answer for a commit the store refused."""
    if status is PutStatus.CREATE_MAPPED_FILE_FAILED:
        return TransactionError("Create mapped file failed.")
    if status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        return TransactionError(
            f"The message is illegal, maybe msg body or properties length not matched. msg body length limit "
            f"{max_message_size}B, msg properties length limit 32KB.", ResponseCode.MESSAGE_ILLEGAL)
    if status is PutStatus.SERVICE_NOT_AVAILABLE:
        return TransactionError("Service not available now.", ResponseCode.SERVICE_NOT_AVAILABLE)
    if status is PutStatus.OS_PAGECACHE_BUSY:
        return TransactionError("OS page cache busy, please try another machine")
    return TransactionError("UNKNOWN_ERROR")


class TransactionService:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 offsets: ConsumerOffsetManager, clients: ClientManager, store_host: Callable[[], tuple[str, int]],
                 clock: Callable[[], float] = time.time, schedule: ScheduleMessageService | None = None,
                 timer: TimerMessageService | None = None) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.clients = clients
        self.store_host = store_host
        self.clock = clock
        self.resolved_offsets: set[int] = set()  # half queue offsets with an op record
        self.resolved_ids: set[str] = set()  # transactions (UNIQ_KEY) already committed or rolled back
        self._loop: task.LoopingCall | None = None
        self.schedule = schedule  # the ScheduleMessageService, for committed copies that carry a delay level
        self.timer = timer  # the TimerMessageService, for committed copies that carry a delivery time
        #: SYNC_MASTER: (put Deferred, stored properties) -> a Deferred that also waits for the slave
        self.after_put: Callable[[defer.Deferred, str], defer.Deferred] | None = None

    # -- life -------------------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild what is resolved from the op queue (small: one record per transaction)."""
        op_max = self.store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
        offset = self.store.get_min_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
        while offset < op_max:
            result = self.store.get_message(TRANS_OP_HALF_TOPIC, 0, offset, 32)
            for raw in result.messages:
                try:
                    half_offset = int(decode_record(raw).body)
                except (RecordError, ValueError):
                    continue
                self._mark_resolved(half_offset)
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset

    def _mark_resolved(self, half_offset: int) -> None:
        self.resolved_offsets.add(half_offset)
        half = self._half_at(half_offset)
        if half is not None:
            uniq = parse_properties(half.properties).get(PROPERTY_UNIQ_KEY)
            if uniq:
                self.resolved_ids.add(uniq)

    def start(self) -> None:
        self._loop = task.LoopingCall(self.check)
        self._loop.start(self.config.transactionCheckInterval / 1000, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    # -- half messages ----------------------------------------------------------------------
    def prepare(self, topic: str, queue_id: int, props: dict[str, str]) -> tuple[str, int]:
        """Redirect a prepared message into the half topic (its real place kept in properties)."""
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        _, created = self.topics.create_system_topic(TRANS_HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        return TRANS_HALF_TOPIC, 0

    def _half_at(self, queue_offset: int) -> Record | None:
        result = self.store.get_message(TRANS_HALF_TOPIC, 0, queue_offset, 1)
        if not result.messages:
            return None
        try:
            return decode_record(result.messages[0])
        except RecordError:
            return None

    # -- END_TRANSACTION --------------------------------------------------------------------
    def end(self, producer_group: str, commit_log_offset: int, table_offset: int, state: int) -> "defer.Deferred[Any]":
        """Commit or roll back one half message; repeated or late ends change nothing. Fires with the
        half record when this call resolved it (the 5.x metrics count those), else None."""
        raw = self.store.look_message_by_offset(commit_log_offset)
        try:
            half = decode_record(raw) if raw else None
        except RecordError:
            half = None
        if half is None or half.topic != TRANS_HALF_TOPIC:
            return defer.fail(TransactionError(f"Find prepared transaction message failed, offset {commit_log_offset}"))
        props = parse_properties(half.properties)
        if props.get(PROPERTY_PRODUCER_GROUP) != producer_group:
            return defer.fail(TransactionError("The producer group wrong"))
        if half.queue_offset != table_offset:
            return defer.fail(TransactionError("The transaction state table offset wrong"))
        uniq = props.get(PROPERTY_UNIQ_KEY, "")
        if half.queue_offset in self.resolved_offsets or (uniq and uniq in self.resolved_ids):
            return defer.succeed(None)
        if uniq:
            self.resolved_ids.add(uniq)
        self.resolved_offsets.add(half.queue_offset)
        if state != TRANSACTION_COMMIT:
            return self._write_op(half).addCallback(lambda _: half)
        return self._put_final(half, props).addCallbacks(self._committed, self._not_committed,
                                                         callbackArgs=(half, uniq), errbackArgs=(half, uniq))

    def _committed(self, result: PutResult, half: Record, uniq: str) -> "defer.Deferred[Any]":
        """Java writes the op record (and answers SUCCESS) only for a commit the store took; else the half stays."""
        if result.status not in _COMMITTED:
            self._unresolve(half, uniq)
            raise _commit_failure(result.status, self.config.maxMessageSize)
        return self._write_op(half).addCallback(lambda _: half)

    def _not_committed(self, failure: Failure, half: Record, uniq: str) -> Failure:
        """A commit refused before the store (the timer's checks): the half stays, to be checked back."""
        self._unresolve(half, uniq)
        return failure

    def _unresolve(self, half: Record, uniq: str) -> None:
        self.resolved_offsets.discard(half.queue_offset)
        self.resolved_ids.discard(uniq)

    def _put_final(self, half: Record, props: dict[str, str]) -> "defer.Deferred[PutResult]":
        """The committed copy on its real topic; a DELAY level still in it sends it through the schedule topic, as in Java."""
        copy, routing = committed_copy(half)
        timer = self.timer
        redirected = False
        if timer is not None and is_timer_request(routing):
            topic, queue_id, refusal = timer.redirect(copy.topic, copy.queue_id, routing, copy.sys_flag)
            if refusal is not None:  # Java's store hook answers the commit with it
                return defer.fail(TransactionError(refusal.remark, refusal.code))
            if topic != copy.topic:
                copy.topic, copy.queue_id, copy.properties = topic, queue_id, properties_to_string(routing)
                redirected = True
        if self.schedule is not None and not redirected:
            topic, queue_id = self.schedule.redirect(copy.topic, copy.queue_id, routing, copy.sys_flag)
            if topic != copy.topic:
                copy.topic, copy.queue_id, copy.properties = topic, queue_id, properties_to_string(routing)
        if self.after_put is None:
            return self.store.put_message(copy)
        # the copy keeps the half's WAIT: Java's commit waits for a SYNC_MASTER's slave unless it says
        # false, and the put's time (brokerStatus) covers that wait
        d = self.store.put_message(copy, timed=False)
        return self.after_put(d, copy.properties).addCallback(self.store.put_done)

    def _write_op(self, half: Record) -> "defer.Deferred[PutResult]":
        # no topic config for the op topic: Java writes it through the store only, so no route lists it
        return self.store.put_message(
            MessageToStore(
                topic=TRANS_OP_HALF_TOPIC,
                queue_id=0,
                flag=0,
                body=str(half.queue_offset).encode(),
                properties=properties_to_string({PROPERTY_WAIT: "true", "TAGS": OP_TAG}),
                sys_flag=0,
                born_timestamp=int(self.clock() * 1000),
                born_host=self.store_host(),
                store_host=self.store_host(),
            )
        )

    # -- check-back -------------------------------------------------------------------------
    def check(self) -> None:
        """One pass over unresolved half messages, from the saved progress on."""
        offset = max(self.offsets.query(CHECK_GROUP, TRANS_HALF_TOPIC, 0), self.store.get_min_offset_in_queue(TRANS_HALF_TOPIC, 0))
        end = self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        now_ms = int(self.clock() * 1000)
        while offset < end:
            if offset in self.resolved_offsets:
                offset += 1
                continue
            half = self._half_at(offset)
            if half is None:
                offset += 1
                continue
            props = parse_properties(half.properties)
            if props.get(PROPERTY_UNIQ_KEY) in self.resolved_ids:
                offset += 1
                continue
            times = int(props.get(PROPERTY_CHECK_TIMES, "0") or 0)
            immunity_s = props.get(PROPERTY_CHECK_IMMUNITY)
            wait_ms = int(immunity_s) * 1000 if immunity_s and immunity_s.isdigit() else self.config.transactionTimeOut
            if now_ms - half.store_timestamp < wait_ms:
                break  # later halves are younger still
            if times >= self.config.transactionCheckMax:
                self._discard(half)
            else:
                props[PROPERTY_CHECK_TIMES] = str(times + 1)  # Java's WAIT=false goes in the map only, not the stored string
                self._renew_and_ask(half, props)
            offset += 1
        self.offsets.commit(CHECK_GROUP, TRANS_HALF_TOPIC, 0, offset)

    def _discard(self, half: Record) -> None:
        """Checked too often: give up (rolled back), keeping a copy where operators can find it."""
        log.info("transaction {offset} checked {max} times: discarded", offset=half.physical_offset, max=self.config.transactionCheckMax)
        self.topics.create_system_topic(TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE)
        self.store.put_message(self._copy(half, TRANS_CHECK_MAX_TIME_TOPIC, half.properties))

    def _copy(self, half: Record, topic: str, properties: str) -> MessageToStore:
        return MessageToStore(
            topic=topic, queue_id=0, flag=half.flag, body=half.body, properties=properties, sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp, born_host=(half.born_host, half.born_port), store_host=self.store_host(),
            reconsume_times=half.reconsume_times, prepared_transaction_offset=half.prepared_transaction_offset,
        )

    def _renew_and_ask(self, half: Record, props: dict[str, str]) -> None:
        """Re-put the half with its check count raised, then ask a live producer of its group."""
        d = self.store.put_message(self._copy(half, TRANS_HALF_TOPIC, properties_to_string(props)))
        d.addCallback(self._ask, props)

    def _ask(self, result: PutResult, props: dict[str, str]) -> None:
        if not result.ok:
            return
        channel = self.clients.producer_channel(props.get(PROPERTY_PRODUCER_GROUP, ""))
        if channel is None:
            log.info("no live producer of group {group} to check a transaction", group=props.get(PROPERTY_PRODUCER_GROUP))
            return
        raw = self.store.look_message_by_offset(result.wrote_offset)
        assert raw is not None  # the record was put just now
        renewed = decode_record(raw)
        uniq = props.get(PROPERTY_UNIQ_KEY)
        header = CheckTransactionStateRequestHeader(
            tranStateTableOffset=renewed.queue_offset,
            commitLogOffset=renewed.physical_offset,
            msgId=uniq,
            transactionId=uniq,
            offsetMsgId=record_msg_id(renewed),
        )
        body = encode_record(
            renewed.sys_flag, int(props.get(PROPERTY_REAL_QUEUE_ID, "0")), renewed.flag, renewed.queue_offset,
            renewed.physical_offset, renewed.born_timestamp, (renewed.born_host, renewed.born_port),
            renewed.store_timestamp, (renewed.store_host, renewed.store_port), renewed.reconsume_times,
            renewed.prepared_transaction_offset, renewed.body, props.get(PROPERTY_REAL_TOPIC, renewed.topic),
            _asked_properties(renewed.properties),
        )
        channel.conn.invoke_oneway(header.apply_to(RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, body=body)))


def _asked_properties(stored: str) -> str:
    """The check request's properties: the stored string with WAIT=false, which Java sets in the map
    it shares with the asked message after the re-put copy's string was written."""
    props = parse_properties(stored)
    props[PROPERTY_WAIT] = "false"
    return properties_to_string(props)
