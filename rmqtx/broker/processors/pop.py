"""POP_MESSAGE (200050): messages handed out for an invisible time, acked one by one (RocketMQ 5.x).

A pop reads one queue or all of them (queueId -1) from the group's offset, which moves on at
once; what goes out is recorded as a checkpoint in the revive topic, and what is not acked in time
comes back through the pop retry topic, which every pop also reads. An orderly pop locks the queue
for the group instead, and moves the offset only on acks. The response header carries what the 5.x
client builds each message's ``POP_CK`` from (startOffsetInfo, msgOffsetInfo, orderCountInfo).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from twisted.internet import defer

from rmqtx.broker.clients import tags_filter
from rmqtx.common.subscription import SubscriptionData
from rmqtx.broker.context import FAQ_SUFFIX, BrokerContext
from rmqtx.broker.pop.revive import CheckPoint
from rmqtx.broker.processors.pull import _keep_matching
from rmqtx.common import pop_keys as keys
from rmqtx.common.message import PROPERTY_POP_CK, parse_properties, properties_to_string
from rmqtx.common.topics import RETRY_PREFIX, is_readable
from rmqtx.filter import CompiledExpression, FilterSyntaxError, compile_cached
from rmqtx.remoting.codes import RequestCode, ResponseCode, SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import PopMessageRequestHeader, PopMessageResponseHeader
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.record import decode_record, encode_record
from rmqtx.store.results import GetStatus

if TYPE_CHECKING:
    from rmqtx.broker.pop.service import PopService

#: A pop's answer: at once, or once its checkpoints are written or a held pop is woken.
PopAnswer = Union[RemotingCommand, "defer.Deferred[RemotingCommand | None]"]

MAX_POP_NUMS = 32
_RESET = (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.OFFSET_FOUND_NULL)
_SKIP = (GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_WAS_REMOVING,
         GetStatus.NO_MATCHED_LOGIC_QUEUE)


@dataclass
class _Popped:
    """What one pop request collects over the queues it reads."""

    pop_time: int
    revive_qid: int
    messages: list[bytes] = field(default_factory=list)
    start_info: list[str] = field(default_factory=list)
    msg_info: list[str] = field(default_factory=list)
    order_info: list[str] = field(default_factory=list)
    writes: list = field(default_factory=list)
    rest: int = 0


def now_ms() -> int:
    return int(time.time() * 1000)


class PopProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {RequestCode.POP_MESSAGE: self.process}

    @property
    def pop(self) -> PopService:
        return self.ctx.pop

    def process(self, request: RemotingCommand, conn: RemotingProtocol) -> PopAnswer:
        return self._pop(request, conn, allow_suspend=True)

    def _check(self, request: RemotingCommand, header: PopMessageRequestHeader, conn: RemotingProtocol) -> RemotingCommand | None:
        """The error answer Java gives a pop it refuses, or None."""
        ctx = self.ctx
        ip = ctx.config.brokerIP1
        if not is_readable(ctx.config.brokerPermission):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the broker[{ip}] pop message is forbidden")
        if header.maxMsgNums > MAX_POP_NUMS:
            return request.make_response(ResponseCode.INVALID_PARAMETER, f"the broker[{ip}] pop message's num is greater than 32")
        tc = ctx.topics.get(header.topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please! {FAQ_SUFFIX}")
        if not is_readable(tc.perm):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] peeking message is forbidden")
        if header.queueId >= tc.readQueueNums:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{header.queueId}] is illegal, topic:[{header.topic}] topicConfig.readQueueNums:[{tc.readQueueNums}] consumer:[{conn.peer}]",
            )
        group = ctx.groups.find(header.consumerGroup)
        if group is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{header.consumerGroup}] does not exist, {FAQ_SUFFIX}")
        if not group.consumeEnable:
            return request.make_response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumerGroup}")
        return None

    def _pop(self, request: RemotingCommand, conn: RemotingProtocol, allow_suspend: bool) -> PopAnswer:
        ctx = self.ctx
        if request.ext_fields is not None and request.ext_fields.get("bornTime") in (None, "0"):
            request.ext_fields["bornTime"] = str(now_ms())
        header = PopMessageRequestHeader.from_command(request)
        if allow_suspend and now_ms() - header.bornTime - header.pollTime > 500:
            return request.make_response(ResponseCode.POLLING_TIMEOUT, f"the broker[{ctx.config.brokerIP1}] pop message is timeout too much")
        refusal = self._check(request, header, conn)
        if refusal is not None:
            return refusal
        sub = SubscriptionData.from_expression(header.topic, header.exp or "*", header.expType)
        expression: CompiledExpression | None = None
        if not sub.is_tag:
            try:
                expression = compile_cached(sub.sub_string)
            except FilterSyntaxError:
                return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        order = bool(header.order)
        popped = _Popped(now_ms(), keys.ORDER_REVIVE_QUEUE if order else self.pop.revive.next_revive_qid())
        self._collect(header, sub, expression, popped)
        d = defer.DeferredList(popped.writes, consumeErrors=True) if popped.writes else defer.succeed(None)
        return d.addCallback(lambda _: self._answer(request, conn, header, popped, allow_suspend))

    def _collect(self, header: PopMessageRequestHeader, sub: SubscriptionData, expression: CompiledExpression | None,
                 popped: _Popped) -> None:
        """Read the retry topic (sometimes first, else to fill up) and the queue(s) asked for."""
        settings = self.pop.settings
        order = bool(header.order)
        retry_topic = keys.pop_retry_topic(header.topic, header.consumerGroup, settings.enableRetryTopicV2)
        dice = random.randrange(100)
        retry_first = dice < settings.popFromRetryProbability
        if retry_first and not order:
            self._from_topic(retry_topic, True, header, None, None, popped, dice)
        if header.queueId < 0:
            self._from_topic(header.topic, False, header, sub, expression, popped, dice)
        else:
            self._from_queue(header.topic, header.queueId, False, header, sub, expression, popped)
        if not retry_first and not order and len(popped.messages) < header.maxMsgNums:
            self._from_topic(retry_topic, True, header, None, None, popped, dice)

    def _from_topic(self, topic: str, is_retry: bool, header: PopMessageRequestHeader, sub: SubscriptionData | None,
                    expression: CompiledExpression | None, popped: _Popped, start: int) -> None:
        tc = self.ctx.topics.get(topic)
        if tc is None:
            return
        n = tc.readQueueNums
        for i in range(n):
            self._from_queue(topic, (start + i) % n, is_retry, header, sub, expression, popped)

    def _pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int) -> int:
        ctx = self.ctx
        offset = ctx.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = ctx.store
        if init_mode == keys.INIT_MIN or topic.startswith(RETRY_PREFIX):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif store.get_min_offset_in_queue(topic, queue_id) <= 0 and not store.check_in_disk_by_consume_offset(topic, queue_id, 0):
            offset = 0  # Java's initPopOffsetByCheckMsgInMem: a young queue is read from its start
        else:
            offset = max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        ctx.offsets.commit(group, topic, queue_id, offset)
        return offset

    def _from_queue(self, topic: str, queue_id: int, is_retry: bool, header: PopMessageRequestHeader,
                    sub: SubscriptionData | None, expression: CompiledExpression | None, popped: _Popped) -> None:
        ctx = self.ctx
        group = header.consumerGroup
        order = bool(header.order)
        store = ctx.store
        offset = self._pop_offset(topic, group, queue_id, header.initMode)
        if order and self.pop.order.blocked(topic, group, queue_id, header.attemptId, popped.pop_time):
            return
        room = header.maxMsgNums - len(popped.messages)
        if room <= 0:
            popped.rest += max(store.get_max_offset_in_queue(topic, queue_id) - offset, 0)
            return
        message_filter = tags_filter(sub) if sub is not None else None
        got = store.get_message(topic, queue_id, offset, room, message_filter)
        if got.status in _RESET:
            offset = got.next_begin_offset
            ctx.offsets.commit(group, topic, queue_id, offset)
            got = store.get_message(topic, queue_id, offset, room, message_filter)
        if expression is not None and got.status is GetStatus.FOUND:
            kept = {id(raw): q for raw, q in zip(got.messages, got.queue_offsets)}
            _keep_matching(got, expression)
            got.queue_offsets = [kept[id(raw)] for raw in got.messages]
        if got.status is GetStatus.FOUND and got.messages:
            qofs = list(got.queue_offsets)
            if order:
                self.pop.order.update(topic, group, queue_id, header.attemptId, popped.pop_time, header.invisibleTime,
                                      qofs, popped.order_info)
                ctx.offsets.commit(group, topic, queue_id, offset)
            else:
                ck = CheckPoint(group, topic, queue_id, offset, popped.pop_time, header.invisibleTime, qofs,
                                popped.revive_qid, ctx.config.brokerName)
                popped.writes.append(self.pop.revive.add(ck))
                ctx.offsets.commit(group, topic, queue_id, got.next_begin_offset)
            popped.start_info.append(keys.offset_info(topic, queue_id, offset))
            popped.msg_info.append(keys.offset_info(topic, queue_id, ",".join(map(str, qofs))))
            if is_retry:
                for raw, q in zip(got.messages, qofs):
                    popped.messages.append(self._as_origin(raw, header.topic, offset, popped, header.invisibleTime, q))
            else:
                popped.messages.extend(got.messages)
            ctx.stats.on_get(topic, group, len(got.messages), got.buffer_total_size)
        elif got.status in _SKIP and got.next_begin_offset > offset:
            ctx.offsets.commit(group, topic, queue_id, got.next_begin_offset)
        popped.rest += max(got.max_offset - got.next_begin_offset, 0)

    def _as_origin(self, raw: bytes, topic: str, ck_offset: int, popped: _Popped, invisible: int, queue_offset: int) -> bytes:
        """A retry-topic record re-encoded under the original topic, its POP_CK naming the retry topic."""
        rec = decode_record(raw)
        props = parse_properties(rec.properties)
        props.setdefault(PROPERTY_POP_CK, keys.extra_info(
            ck_offset, popped.pop_time, invisible, popped.revive_qid, rec.topic, self.ctx.config.brokerName,
            rec.queue_id, queue_offset))
        return encode_record(
            rec.sys_flag, rec.queue_id, rec.flag, rec.queue_offset, rec.physical_offset, rec.born_timestamp,
            (rec.born_host, rec.born_port), rec.store_timestamp, (rec.store_host, rec.store_port), rec.reconsume_times,
            rec.prepared_transaction_offset, rec.body, topic, properties_to_string(props),
        )

    def _answer(self, request: RemotingCommand, conn: RemotingProtocol, header: PopMessageRequestHeader,
                popped: _Popped, allow_suspend: bool) -> PopAnswer:
        if popped.messages:
            code, remark = ResponseCode.SUCCESS, GetStatus.FOUND.name
        else:
            if allow_suspend and header.pollTime > 0 and not conn.closed:
                if not self.pop.holds.full():
                    return self._suspend(request, conn, header)
                code = ResponseCode.POLLING_FULL
            else:
                code = ResponseCode.POLLING_TIMEOUT
            remark = GetStatus.NO_MESSAGE_IN_QUEUE.name
        response = request.make_response(code, remark)
        PopMessageResponseHeader(
            popped.pop_time, header.invisibleTime, popped.revive_qid, popped.rest,
            ";".join(popped.start_info), ";".join(popped.msg_info),
            ";".join(popped.order_info) if header.order else None,
        ).apply_to(response)
        if popped.messages:
            response.body = b"".join(popped.messages)
        return response

    def _suspend(self, request: RemotingCommand, conn: RemotingProtocol,
                 header: PopMessageRequestHeader) -> defer.Deferred[RemotingCommand | None]:
        settings = self.pop.settings
        watches = {header.topic: header.queueId}
        if not header.order:
            watches[keys.pop_retry_topic(header.topic, header.consumerGroup, settings.enableRetryTopicV2)] = -1
        left_ms = header.bornTime + header.pollTime - now_ms()

        def retry(final: bool) -> defer.Deferred[RemotingCommand | None]:
            if conn.closed:
                return defer.succeed(None)
            # Not parked again (allow_suspend False), so what comes is a command, never None:
            d: defer.Deferred[RemotingCommand] = defer.maybeDeferred(self._pop, request, conn, False)  # type: ignore[call-overload]

            def shaped(response: RemotingCommand) -> RemotingCommand | None:
                if not final and response.code != ResponseCode.SUCCESS:
                    return None
                response.serialize_type = SerializeType.JSON
                return response

            return d.addCallback(shaped)

        return self.pop.holds.hold(watches, max(left_ms, 0) / 1000, retry, header.consumerGroup)
