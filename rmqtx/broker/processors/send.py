"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from rmqtx.broker.context import FAQ_SUFFIX, BrokerContext
from rmqtx.broker.ha.role import disk_util, wait_for_replica
from rmqtx.broker.processors.send_lane import SendLane
from rmqtx.broker.recall_handle import recall_handle_for
from rmqtx.broker.timer import REQUEST_KEYS
from rmqtx.common.message import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT,
    parse_properties,
    properties_to_string,
)
from rmqtx.common.sysflag import TRANSACTION_MASK
from rmqtx.common.topic_config import TopicConfig
from rmqtx.common.topics import (
    DLQ_PREFIX,
    PERM_READ,
    PERM_WRITE,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    is_writeable,
    validate_name,
)
from rmqtx.remoting.codes import ONEWAY_FLAG, RESPONSE_FLAG, RequestCode, ResponseCode, SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import SendMessageRequestHeader, SendMessageResponseHeader, send_header_from_v2
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.remoting.serializer import send_answer_frame
from rmqtx.store.results import BatchToStore, MessageToStore, PutResult, PutStatus
from rmqtx.store.times import TIME_AT_SYNC

if TYPE_CHECKING:
    from twisted.internet import defer

#: Topics clients may not send to directly.
NOT_ALLOWED_SEND_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, TIMER_TOPIC})

_PUT_ERRORS: dict[PutStatus, tuple[int, str]] = {
    PutStatus.CREATE_MAPPED_FILE_FAILED: (ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    PutStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. msg body length limit 128k, msg properties length limit 32k.",
    ),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. msg body length limit 128k, msg properties length limit 32k.",
    ),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the broker's disk is full, "
        "messages are put to the slave, message store has been shut down, etc.",
    ),
    PutStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"),
}

#: Stored messages: the answer carries msgId/queue/offset with these codes (Java's sendOK cases).
_STORED_CODES = {
    PutStatus.PUT_OK: int(ResponseCode.SUCCESS),
    PutStatus.FLUSH_DISK_TIMEOUT: int(ResponseCode.FLUSH_DISK_TIMEOUT),
    PutStatus.FLUSH_SLAVE_TIMEOUT: int(ResponseCode.FLUSH_SLAVE_TIMEOUT),
    PutStatus.SLAVE_NOT_AVAILABLE: int(ResponseCode.SLAVE_NOT_AVAILABLE),
}
_NOT_AVAILABLE = (
    "service not available now. It may be caused by one of the following reasons: the broker's disk is full [{}], "
    "messages are put to the slave, message store has been shut down, etc."
)


class SendProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._checked: dict[str, TopicConfig] = {}  # topic -> its TopicConfig when it last passed _check
        #: the compiled lane for plain sends (send_lane.py), when the accelerator and the settings allow it
        self.lane = SendLane(ctx, self.lane_synced) if SendLane.fits(ctx) else None

    def table(self) -> dict:
        return {
            RequestCode.SEND_MESSAGE: self.process,
            RequestCode.SEND_MESSAGE_V2: self.process,
            RequestCode.SEND_BATCH_MESSAGE: self.process,
        }

    # -- checks -----------------------------------------------------------------------------
    def _header(self, request: RemotingCommand) -> SendMessageRequestHeader:
        ext = request.ext_fields or {}
        if request.code == RequestCode.SEND_MESSAGE_V2 or (request.code == RequestCode.SEND_BATCH_MESSAGE and "b" in ext):
            return send_header_from_v2(ext)
        return SendMessageRequestHeader.from_fields(ext)

    def _check(self, request: RemotingCommand, header: SendMessageRequestHeader,
               conn: RemotingProtocol) -> tuple[TopicConfig | None, RemotingCommand | None]:
        """Java's msgCheck: permissions, topic name, topic existence (auto-create), queue id."""
        cfg = self.ctx.config
        if not is_writeable(cfg.brokerPermission):
            return None, request.make_response(ResponseCode.NO_PERMISSION, f"the broker[{cfg.brokerIP1}] sending message is forbidden")
        why = validate_name(header.topic)
        if why:
            return None, request.make_response(ResponseCode.SYSTEM_ERROR, why)
        if header.topic in NOT_ALLOWED_SEND_TOPICS:
            return None, request.make_response(ResponseCode.NO_PERMISSION, f"Sending message to topic[{header.topic}] is forbidden.")
        topics = self.ctx.topics
        tc = topics.get(header.topic)
        if tc is None:
            if header.topic.startswith(RETRY_PREFIX):
                group_cfg = self.ctx.groups.find(header.topic[len(RETRY_PREFIX):])
                if group_cfg is not None:
                    tc, created = topics.create_system_topic(header.topic, group_cfg.retryQueueNums, PERM_READ | PERM_WRITE)
                    if created:
                        self.ctx.registrar.register_all(oneway=True)
            else:
                tc = topics.create_in_send(header.topic, header.defaultTopic, header.defaultTopicQueueNums, header.sysFlag)
                if tc is not None:
                    self.ctx.registrar.register_all(oneway=True)
        if tc is None:
            return None, request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!{FAQ_SUFFIX}"
            )
        if not is_writeable(tc.perm) and not header.topic.startswith(DLQ_PREFIX):
            return None, request.make_response(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] sending message is forbidden")
        if header.queueId >= tc.writeQueueNums:
            return None, request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queueId}] is illegal, {tc} Producer: {conn.peer}",
            )
        return tc, None

    # -- processing -------------------------------------------------------------------------
    def process(self, request: RemotingCommand,
                conn: RemotingProtocol) -> RemotingCommand | defer.Deferred[RemotingCommand] | None:
        header = send_header_from_v2(request.ext_fields) if request.code == _SEND_V2 else self._header(request)
        topic = header.topic
        tc = self._checked.get(topic)
        # a topic that passed every check before, still the same config object and writable
        if tc is None or header.queueId >= tc.writeQueueNums or not (
            tc.perm & PERM_WRITE and self.ctx.config.brokerPermission & PERM_WRITE
        ) or tc is not self.ctx.topics.table.get(topic):
            tc, error = self._check(request, header, conn)
            if error is not None:
                return error
            assert tc is not None  # _check gives a config or an error
            if len(self._checked) < 10000:
                self._checked[topic] = tc
        queue_id = header.queueId if header.queueId >= 0 else random.randrange(tc.writeQueueNums)
        if topic.startswith(RETRY_PREFIX):
            topic, queue_id = self._retry_or_dlq(header, topic, queue_id)
        props = parse_properties(header.properties)
        is_batch = request.code == _SEND_BATCH or bool(header.batch)
        is_half = not is_batch and props.get(PROPERTY_TRANSACTION_PREPARED) == "true"
        if is_half and self.ctx.config.rejectTransactionMessage:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{self.ctx.config.brokerIP1}] sending transaction message is forbidden"
            )
        props[PROPERTY_CLUSTER] = self.ctx.config.brokerClusterName
        if not is_batch and PROPERTY_WAIT in props:
            props[PROPERTY_WAIT] = props.pop(PROPERTY_WAIT)  # Java takes WAIT out and puts it back after CLUSTER
        reply_queue = queue_id
        sys_flag = header.sysFlag
        recall = None
        if is_half:
            topic, queue_id = self.ctx.transactions.prepare(topic, queue_id, props)
            sys_flag &= ~TRANSACTION_MASK  # the half copy is a plain message of the half topic
        elif not is_batch:
            if (_T_DELIVER in props or _T_DELAY_SEC in props or _T_DELAY_MS in props) and self.ctx.timer is not None:
                topic, queue_id, refusal = self.ctx.timer.redirect(topic, queue_id, props, sys_flag)
                if refusal is not None:
                    return request.make_response(refusal.code, refusal.remark)
                if topic == TIMER_TOPIC:
                    recall = recall_handle_for(props, self.ctx.config.brokerName)
            if PROPERTY_DELAY in props:
                topic, queue_id = self.ctx.schedule.redirect(topic, queue_id, props, sys_flag)
            if topic != SCHEDULE_TOPIC and topic != TIMER_TOPIC:
                props.pop(PROPERTY_WAIT, None)  # stored without WAIT; halves and delayed copies keep it, as in Java
        born_host = conn.attributes.get(_BORN_HOST) or _born_host(conn)
        store = self.ctx.store
        refused = self.ctx.ha.before_put(header.properties or "")
        if refused is not None:  # controller mode: fewer in-sync replicas than minInSyncReplicas
            return self._answer(refused, request, reply_queue)
        role = self.ctx.ha
        sync_master = role is not None and role.sync_master
        if is_batch:
            d = store.put_messages(
                BatchToStore(
                    topic=topic,
                    queue_id=queue_id,
                    sys_flag=sys_flag,
                    born_timestamp=header.bornTimestamp,
                    born_host=born_host,
                    store_host=self.ctx.store_host,
                    body=request.body,
                    properties=properties_to_string(props),
                ),
                timed=not sync_master,
            )
            d.addCallback(self._counted, topic, props, False)
            d = wait_for_replica(self.ctx.ha, d, header.properties or "")
            if sync_master:  # the put's time includes the slave's ack, as Java's does
                d.addCallback(store.put_done)
            return d.addCallback(self._answer, request, reply_queue)
        cfg = self.ctx.config
        msg = MessageToStore(
            topic,
            queue_id,
            header.flag,
            request.body,
            properties_to_string(props),
            sys_flag,
            header.bornTimestamp,
            born_host,
            (cfg.brokerIP1, cfg.listenPort),  # BrokerContext.store_host
            header.reconsumeTimes or 0,
        )
        if sync_master:  # SYNC_MASTER: the answer also waits for a slave, through Deferreds
            d = store.put_message(msg, timed=False).addCallback(self._counted, topic, props, is_half)
            d = wait_for_replica(self.ctx.ha, d, header.properties or "").addCallback(store.put_done)
            return d.addCallback(self._answer, request, reply_queue, recall)
        result = store.append_message(msg, props, TIME_AT_SYNC)  # under SYNC_FLUSH it waits below
        if result.status is _PUT_OK:
            self.ctx.stats.on_put(topic, props, is_half, 1, result.wrote_bytes)
            if self.lane is not None and topic is header.topic and not is_half and not is_batch and recall is None:
                self.lane.admit(topic, tc)  # its checks passed: the next plain sends to it can take the lane
        if store.sync_flush and result.status is PutStatus.PUT_OK:
            # acknowledged only once durable: the answer is written when the group commit covers it
            store.call_when_flushed(result, self._answer_synced, (request, conn, reply_queue, recall))
            return None
        if recall is not None:
            return self._answer(result, request, reply_queue, recall)
        status = result.status
        code = _SUCCESS if status is _PUT_OK else _STORED_CODES.get(status)  # (an Enum hashes in Python)
        if code is not None and request.serialize_type is _ROCKETMQ and not request.flag & ONEWAY_FLAG:
            conn.send_frame(self._answer_frame(code, result, request.opaque, reply_queue))
            return None
        return self._answer(result, request, reply_queue)

    def _counted(self, result: PutResult, topic: str, props: dict[str, str], is_half: bool) -> PutResult:
        """Counts a stored send for the 5.x metrics (rmqtx.console.otel) and passes the result on."""
        if result.status in _SENT:
            self.ctx.stats.on_put(topic, props, is_half, result.msg_num, result.wrote_bytes)
        return result

    def _answer_synced(self, result: PutResult, waiting: Any) -> None:  # waiting: what process() passed
        request, conn, queue_id, recall = waiting
        status = result.status
        code = _SUCCESS if status is _PUT_OK else _STORED_CODES.get(status)
        if recall is None and code is not None and request.serialize_type is _ROCKETMQ and not request.flag & ONEWAY_FLAG:
            conn.send_frame(self._answer_frame(code, result, request.opaque, queue_id))
        else:
            conn.answer(request, self._answer(result, request, queue_id, recall))

    def lane_synced(self, conn: RemotingProtocol, opaque: int, queue_id: int, phys: int, size: int, msg_id: str,
                    queue_offset: int, store_ts: int) -> None:
        """A send the lane stored under SYNC_FLUSH: answered, as process() answers one, once the group
        commit has synced it (and timed then)."""
        result = PutResult(_PUT_OK, phys, size, msg_id, queue_offset, 1, store_ts)
        self.ctx.store.call_when_flushed(result, self._lane_answer, (conn, opaque, queue_id))

    def _lane_answer(self, result: PutResult, waiting: Any) -> None:
        conn, opaque, queue_id = waiting
        code = _SUCCESS if result.status is _PUT_OK else _STORED_CODES[result.status]
        conn.send_frame(self._answer_frame(code, result, opaque, queue_id))

    def _stored_fields(self, result: PutResult, queue_id: int) -> dict[str, str]:
        """SendMessageResponseHeader's fields plus the two Java adds with addExtField."""
        cfg = self.ctx.config
        return {
            "MSG_REGION": cfg.regionId,
            "TRACE_ON": "true" if cfg.traceOn else "false",
            "msgId": result.msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
        }

    def _answer_frame(self, code: int, result: PutResult, opaque: int, queue_id: int) -> bytes:
        """The answer to a stored message of a ROCKETMQ-header request, straight into frame bytes:
        exactly what encoding :meth:`_answer`'s command gives, without building it."""
        cfg = self.ctx.config
        return send_answer_frame(code, opaque, cfg.regionId, "true" if cfg.traceOn else "false",
                                 result.msg_id, queue_id, result.queue_offset)

    def _retry_or_dlq(self, header: SendMessageRequestHeader, topic: str, queue_id: int) -> tuple[str, int]:
        """A client re-sending to a retry topic: past its reconsume limit the message goes to the DLQ."""
        group = topic[len(RETRY_PREFIX):]
        group_cfg = self.ctx.groups.find(group)
        limit = header.maxReconsumeTimes if header.maxReconsumeTimes is not None else (group_cfg.retryMaxTimes if group_cfg else 16)
        if (header.reconsumeTimes or 0) < limit:
            return topic, queue_id
        dlq = DLQ_PREFIX + group
        self.ctx.stats.on_dlq(header.producerGroup, header.topic)
        _, created = self.ctx.topics.create_system_topic(dlq, 1, PERM_READ | PERM_WRITE)
        if created:
            self.ctx.registrar.register_all(oneway=True)
        return dlq, 0

    def _answer(self, result: PutResult, request: RemotingCommand, queue_id: int, recall: str | None = None) -> RemotingCommand:
        """``recall``: the recall handle a 5.3 broker adds for a message stored to the timer."""
        status = result.status
        code = _STORED_CODES.get(status)
        if code is not None:
            fields = self._stored_fields(result, queue_id)
            if recall is not None:
                fields["recallHandle"] = recall
            return RemotingCommand(
                code,
                ext_fields=fields,
                opaque=request.opaque,
                flag=RESPONSE_FLAG,
                serialize_type=request.serialize_type,
                fast_keys=_RESPONSE_FAST_KEYS if recall is None else _RECALL_FAST_KEYS,
            )
        code, remark = _PUT_ERRORS.get(status, (ResponseCode.SYSTEM_ERROR, status.name))
        if status is PutStatus.SERVICE_NOT_AVAILABLE and not result.remark:  # e.g. a send to a slave
            store = self.ctx.store
            remark = _NOT_AVAILABLE.format(disk_util(store.root, store.config.commit_log_dir))
        return request.make_response(code, result.remark or remark)


def _born_host(conn: RemotingProtocol) -> tuple[str, int]:
    """The sender's address, looked up once per connection."""
    born = conn.attributes.get(_BORN_HOST)
    if born is None:
        peer = conn.transport.getPeer()
        born = conn.attributes[_BORN_HOST] = (getattr(peer, "host", "127.0.0.1"), getattr(peer, "port", 0))
    return born


_BORN_HOST = "send.born_host"
_T_DELIVER, _T_DELAY_SEC, _T_DELAY_MS = REQUEST_KEYS
_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
_PUT_OK = PutStatus.PUT_OK
#: What Java's handlePutMessageResult takes as sent (and counts in rocketmq_messages_in_total).
_SENT = frozenset({_PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE})
_SUCCESS = int(ResponseCode.SUCCESS)
_RESPONSE_FAST_KEYS = SendMessageResponseHeader.fast_keys()
_RECALL_FAST_KEYS = _RESPONSE_FAST_KEYS + ("recallHandle",)
_ROCKETMQ = SerializeType.ROCKETMQ

__all__ = ["SendProcessor"]
