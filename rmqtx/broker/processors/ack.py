"""ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151), CHANGE_MESSAGE_INVISIBLETIME (200053).

An ack names its checkpoint through the extra info the pop gave out (start offset, pop time,
revive queue); it is recorded in the revive topic, and an orderly one (revive queue 999) moves the
committed offset. Changing the invisible time writes a checkpoint for the one message from now on
and acks it out of the old one, as Apache 5.x does.
"""

from __future__ import annotations

import base64
from typing import Any

from twisted.internet import defer

from rmqtx.broker.context import FAQ_SUFFIX, BrokerContext
from rmqtx.common import pop_keys as keys
from rmqtx.broker.pop.revive import CheckPoint
from rmqtx.broker.processors.pop import now_ms
from rmqtx.remoting.bodies import body_shape, json_object, object_list, text
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader
from rmqtx.remoting.protocol import RemotingProtocol

#: An ack's answer: at once, or once the revive topic has the ack (or checkpoint) written.
AckAnswer = RemotingCommand | defer.Deferred[RemotingCommand]


#: A checkpoint covers at most a pop's 32 messages (fewer bits ever matter); a longer bit set is cut.
MAX_BITSET_BYTES = 1024


def bitset_offsets(value: Any, start: int) -> list[int]:  # value: a JSON body's field
    """The offsets a BatchAck's bit set marks: Java's BitSet.toByteArray, base64 in the JSON body."""
    if isinstance(value, str):
        raw = base64.b64decode(value[: MAX_BITSET_BYTES * 2], validate=False)[:MAX_BITSET_BYTES]
    elif isinstance(value, list):
        raw = bytes(int(b) & 0xFF for b in value[:MAX_BITSET_BYTES])
    else:
        return []
    return [start + i * 8 + bit for i, byte in enumerate(raw) for bit in range(8) if byte >> bit & 1]


class AckProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.ACK_MESSAGE: self.ack,
            RequestCode.BATCH_ACK_MESSAGE: self.batch_ack,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible,
        }

    def _queue_error(self, request: RemotingCommand, topic: str, queue_id: int, offset: int,
                     conn: RemotingProtocol) -> RemotingCommand | None:
        ctx = self.ctx
        tc = ctx.topics.get(topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}")
        if queue_id < 0 or queue_id >= tc.readQueueNums:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.readQueueNums}] consumer:[{conn.peer}]",
            )
        low, high = ctx.store.get_min_offset_in_queue(topic, queue_id), ctx.store.get_max_offset_in_queue(topic, queue_id)
        if offset < low or offset > high:
            return request.make_response(
                ResponseCode.NO_MESSAGE, f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{low}~{high}")
        return None

    # -- ack ------------------------------------------------------------------------------------
    def ack(self, request: RemotingCommand, conn: RemotingProtocol) -> AckAnswer:
        header = AckMessageRequestHeader.from_command(request)
        error = self._queue_error(request, header.topic, header.queueId, header.offset, conn)
        if error is not None:
            return error
        try:
            info = keys.ExtraInfo.parse(header.extraInfo)
        except ValueError as exc:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, f"extraInfo is illegal: {exc}")
        response = request.make_response(ResponseCode.SUCCESS)
        if info.revive_qid == keys.ORDER_REVIVE_QUEUE:
            return self._ack_orderly(response, header.consumerGroup, header.topic, header.queueId, header.offset, info.pop_time)
        d = self.ctx.pop.revive.ack(header.consumerGroup, header.topic, header.queueId, info.ck_offset, info.pop_time,
                                    [header.offset], info.revive_qid, info.broker_name)
        return d.addCallback(lambda _: response)

    def _ack_orderly(self, response: RemotingCommand, group: str, topic: str, queue_id: int, offset: int,
                     pop_time: int) -> RemotingCommand:
        ctx = self.ctx
        if offset < ctx.offsets.query(group, topic, queue_id):
            return response
        nxt = ctx.pop.order.commit_and_next(topic, group, queue_id, offset, pop_time)
        if nxt >= 0:
            ctx.offsets.commit(group, topic, queue_id, nxt)
            ctx.pop.holds.notify(topic, queue_id)
        elif nxt == -1:
            response.code = ResponseCode.MESSAGE_ILLEGAL
            response.remark = f"offset is illegal, key:{topic}@{group}@{queue_id}, commit:{offset}, next:{nxt}"
        return response

    def batch_ack(self, request: RemotingCommand, conn: RemotingProtocol) -> AckAnswer:
        data = json_object(request.body, "BatchAckMessageRequestBody")
        acks = object_list(data.get("acks"), "acks")
        response = request.make_response(ResponseCode.SUCCESS)
        if not acks:
            response.code = ResponseCode.NO_MESSAGE
            response.remark = "no acks in the body"  # Java leaves the remark out
            return response
        ctx = self.ctx
        broker_name = text(data.get("brokerName"), "brokerName")
        writes = []
        with body_shape("BatchAck"):
            for a in acks:
                group = text(a.get("c", a.get("consumerGroup")), "consumerGroup")
                mark = text(a.get("r", a.get("retry")), "retry", keys.NORMAL)
                topic = keys.real_topic(text(a.get("t", a.get("topic")), "topic"), group, mark)
                queue_id = int(a.get("q", a.get("queueId", 0)))
                revive_qid = int(a.get("rq", a.get("reviveQueueId", 0)))
                start = int(a.get("so", a.get("startOffset", 0)))
                pop_time = int(a.get("pt", a.get("popTime", 0)))
                low, high = ctx.store.get_min_offset_in_queue(topic, queue_id), ctx.store.get_max_offset_in_queue(topic, queue_id)
                offsets = [o for o in bitset_offsets(a.get("b", a.get("bitSet")), start) if low <= o <= high]
                if not offsets:
                    continue
                if revive_qid == keys.ORDER_REVIVE_QUEUE:
                    for o in offsets:
                        self._ack_orderly(response, group, topic, queue_id, o, pop_time)
                    continue
                writes.append(ctx.pop.revive.ack(group, topic, queue_id, start, pop_time, offsets, revive_qid, broker_name))
        if not writes:
            return response
        return defer.DeferredList(writes, consumeErrors=True).addCallback(lambda _: response)

    # -- change invisible time -------------------------------------------------------------------
    def change_invisible(self, request: RemotingCommand, conn: RemotingProtocol) -> AckAnswer:
        ctx = self.ctx
        header = ChangeInvisibleTimeRequestHeader.from_command(request)
        error = self._queue_error(request, header.topic, header.queueId, header.offset, conn)
        if error is not None:
            return error
        try:
            info = keys.ExtraInfo.parse(header.extraInfo)
        except ValueError as exc:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, f"extraInfo is illegal: {exc}")
        response = request.make_response(ResponseCode.SUCCESS)
        now = now_ms()
        if info.revive_qid == keys.ORDER_REVIVE_QUEUE:
            invisible = ctx.pop.order.change_invisible(header.topic, header.consumerGroup, header.queueId, header.offset,
                                                       info.pop_time, now, header.invisibleTime)
            if invisible is None:
                response.code = ResponseCode.MESSAGE_ILLEGAL
                response.remark = "the orderly pop this message came from is over"
                return response
            ChangeInvisibleTimeResponseHeader(info.pop_time, invisible, keys.ORDER_REVIVE_QUEUE).apply_to(response)
            return response
        revive = ctx.pop.revive
        ck = CheckPoint(header.consumerGroup, header.topic, header.queueId, header.offset, now, header.invisibleTime,
                        [header.offset], revive.next_revive_qid(), ctx.config.brokerName)
        d_ck = revive.add(ck)
        d_ack = revive.ack(header.consumerGroup, header.topic, header.queueId, info.ck_offset, info.pop_time,
                           [header.offset], info.revive_qid, info.broker_name)

        def answered(results: list[tuple[bool, Any]]) -> RemotingCommand:
            put = results[0][1] if results[0][0] else None
            if put is None or not put.ok:
                response.code = ResponseCode.SYSTEM_ERROR
                response.remark = "write checkpoint failed"
                return response
            ChangeInvisibleTimeResponseHeader(now, header.invisibleTime, ck.revive_qid).apply_to(response)
            return response

        return defer.DeferredList([d_ck, d_ack], consumeErrors=True).addCallback(answered)
