"""CONSUMER_SEND_MSG_BACK (36) to retry/DLQ, LOCK/UNLOCK_BATCH_MQ (41/42), GET_ALL_DELAY_OFFSET (45)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import orjson

from rmqtx.broker.context import FAQ_SUFFIX, BrokerContext
from rmqtx.broker.jsonfiles import pretty
from rmqtx.broker.processors.admin_bodies import mq_set_order
from rmqtx.broker.reput import copy_of, sendback_properties
from rmqtx.common.topics import DLQ_PREFIX, FLAG_UNIT_SUB, PERM_READ, PERM_WRITE, RETRY_PREFIX, is_writeable
from rmqtx.remoting.bodies import body_shape, json_object, object_list, text
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import ConsumerSendMsgBackRequestHeader
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.record import RecordError, decode_record, record_msg_id
from rmqtx.store.results import PutResult

if TYPE_CHECKING:
    from twisted.internet import defer

#: TopicSysFlag.buildSysFlag(false, true): the unit-sub bit Java sets on a retry topic made for a unit-mode consumer.
#: Java 3.4.9: from this client version on, the request's maxReconsumeTimes wins over the group's.
V3_4_9 = 121
DLQ_QUEUE_NUMS = 1


class DeliveryProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch,
            RequestCode.GET_ALL_DELAY_OFFSET: self.all_delay_offset,
        }

    # -- retry and DLQ ----------------------------------------------------------------------
    def send_back(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand | defer.Deferred[RemotingCommand]:
        ctx = self.ctx
        header = ConsumerSendMsgBackRequestHeader.from_command(request)
        group_cfg = ctx.groups.find(header.group)
        if group_cfg is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {header.group}{FAQ_SUFFIX}"
            )
        if not is_writeable(ctx.config.brokerPermission):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the broker[{ctx.config.brokerIP1}] sending message is forbidden")
        if group_cfg.retryQueueNums <= 0:
            return request.make_response(ResponseCode.SUCCESS)
        topic = RETRY_PREFIX + header.group
        queue_id = random.randrange(group_cfg.retryQueueNums)
        sys_flag = FLAG_UNIT_SUB if header.unitMode else 0
        tc, created = ctx.topics.create_system_topic(topic, group_cfg.retryQueueNums, PERM_READ | PERM_WRITE, sys_flag)
        if not is_writeable(tc.perm):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        raw = ctx.store.look_message_by_offset(header.offset)
        try:
            record = decode_record(raw) if raw else None
        except RecordError:
            record = None
        if record is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")
        max_times = group_cfg.retryMaxTimes
        if request.version >= V3_4_9 and header.maxReconsumeTimes is not None:
            max_times = header.maxReconsumeTimes
        delay = header.delayLevel
        if record.reconsume_times >= max_times or delay < 0:
            topic = DLQ_PREFIX + header.group
            ctx.stats.on_dlq(header.group, header.originTopic or "")
            queue_id = random.randrange(DLQ_QUEUE_NUMS)
            _, dlq_created = ctx.topics.create_system_topic(topic, DLQ_QUEUE_NUMS, PERM_READ | PERM_WRITE)
            created |= dlq_created
            delay = 0  # Java writes DELAY=0: a stale level from the last retry must not delay the DLQ copy
        elif delay == 0:
            delay = 3 + record.reconsume_times
        props = sendback_properties(record, record_msg_id(record), delay)
        if created:
            ctx.registrar.register_all(oneway=True)
        store_topic, store_queue = ctx.schedule.redirect(topic, queue_id, props, record.sys_flag)
        d = ctx.store.put_message(
            copy_of(record, store_topic, store_queue, props, reconsume_times=record.reconsume_times + 1)
        )
        return d.addCallback(self._sent_back, request)

    @staticmethod
    def _sent_back(result: PutResult, request: RemotingCommand) -> RemotingCommand:
        if result.ok:
            return request.make_response(ResponseCode.SUCCESS)
        return request.make_response(ResponseCode.SYSTEM_ERROR, result.remark or result.status.name)

    # -- orderly locks ----------------------------------------------------------------------
    @staticmethod
    def _lock_body(request: RemotingCommand) -> tuple[str, str, list[tuple[str, str, int]]]:
        data = json_object(request.body, "LockBatchRequestBody")
        with body_shape("LockBatchRequestBody"):
            mqs = [
                (text(m.get("topic"), "topic"), text(m.get("brokerName"), "brokerName"), int(m.get("queueId")))  # type: ignore[arg-type]  # None: TypeError, a BodyError
                for m in object_list(data.get("mqSet"), "mqSet")
            ]
            return text(data.get("consumerGroup"), "consumerGroup"), text(data.get("clientId"), "clientId"), mqs

    def lock_batch(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        group, client_id, mqs = self._lock_body(request)
        mqs = mq_set_order(mqs)  # the request's mqSet as the HashSet fastjson reads it into
        before = self.ctx.locks.held_by(group, client_id)
        held = self.ctx.locks.try_lock_batch(group, mqs, client_id)
        # Java's lockedMqs: a HashSet sized for the request, the queues already held added first
        ordered = mq_set_order([mq for mq in held if mq in before] + [mq for mq in held if mq not in before],
                               max(len(mqs), 1))
        body = orjson.dumps({"lockOKMQSet": [{"brokerName": b, "queueId": q, "topic": t} for t, b, q in ordered]})
        return request.make_response(ResponseCode.SUCCESS, body=body)

    def unlock_batch(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        group, client_id, mqs = self._lock_body(request)
        self.ctx.locks.unlock_batch(group, mqs, client_id)
        return request.make_response(ResponseCode.SUCCESS)

    def all_delay_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=pretty(self.ctx.schedule.to_json()).encode())
