"""PEEK_MESSAGE (200052), NOTIFICATION (200054), POLLING_INFO (200055): looking at what a pop would get.

A peek reads from the group's pop offset without a checkpoint or moving anything; a notification
says whether a pop would find something, waiting up to its poll time for an arrival; polling info
counts the pops held on a queue.
"""

from __future__ import annotations

import random

from twisted.internet import defer

from rmqtx.broker.context import FAQ_SUFFIX, BrokerContext
from rmqtx.broker.processors.pop import now_ms
from rmqtx.common import pop_keys as keys
from rmqtx.common.topics import is_readable
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageResponseHeader,
)
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.results import GetStatus


class PeekProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.PEEK_MESSAGE: self.peek,
            RequestCode.NOTIFICATION: self.notification,
            RequestCode.POLLING_INFO: self.polling_info,
        }

    def _refusal(self, request: RemotingCommand, topic: str, queue_id: int, group: str,
                 conn: RemotingProtocol) -> RemotingCommand | None:
        ctx = self.ctx
        ip = ctx.config.brokerIP1
        if not is_readable(ctx.config.brokerPermission):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the broker[{ip}] peeking message is forbidden")
        tc = ctx.topics.get(topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}")
        if not is_readable(tc.perm):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.readQueueNums:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.readQueueNums}] consumer:[{conn.peer}]",
            )
        found = ctx.groups.find(group)
        if found is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist, {FAQ_SUFFIX}")
        if not found.consumeEnable:
            return request.make_response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        return None

    def _offset(self, topic: str, group: str, queue_id: int) -> int:
        offset = self.ctx.offsets.query(group, topic, queue_id)
        return offset if offset >= 0 else self.ctx.store.get_min_offset_in_queue(topic, queue_id)

    def _queues(self, topic: str, queue_id: int) -> list[tuple[str, int]]:
        """The queues a request covers: one, or all from a random start (queueId -1)."""
        tc = self.ctx.topics.get(topic)
        if tc is None:
            return []
        if queue_id >= 0:
            return [(topic, queue_id)]
        start = random.randrange(max(tc.readQueueNums, 1))
        return [(topic, (start + i) % tc.readQueueNums) for i in range(tc.readQueueNums)]

    # -- peek -----------------------------------------------------------------------------------
    def peek(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ctx = self.ctx
        h = PeekMessageRequestHeader.from_command(request)
        refusal = self._refusal(request, h.topic, h.queueId, h.consumerGroup, conn)
        if refusal is not None:
            return refusal
        retry = keys.pop_retry_topic(h.topic, h.consumerGroup, ctx.pop.settings.enableRetryTopicV2)
        messages: list[bytes] = []
        rest = 0
        for topic, qid in self._queues(h.topic, h.queueId) + self._queues(retry, -1):
            offset = self._offset(topic, h.consumerGroup, qid)
            room = h.maxMsgNums - len(messages)
            if room > 0:
                got = ctx.store.get_message(topic, qid, offset, room)
                if got.status is GetStatus.FOUND:
                    messages.extend(got.messages)
                    offset = got.next_begin_offset
            rest += max(ctx.store.get_max_offset_in_queue(topic, qid) - offset, 0)
        code = ResponseCode.SUCCESS if messages else ResponseCode.PULL_NOT_FOUND
        response = request.make_response(code, GetStatus.FOUND.name if messages else GetStatus.NO_MESSAGE_IN_QUEUE.name)
        PopMessageResponseHeader(now_ms(), 0, 0, rest).apply_to(response)
        response.body = b"".join(messages)
        return response

    # -- notification ---------------------------------------------------------------------------
    def _has_message(self, h: NotificationRequestHeader) -> bool:
        ctx = self.ctx
        retry = keys.pop_retry_topic(h.topic, h.consumerGroup, ctx.pop.settings.enableRetryTopicV2)
        now = now_ms()
        for topic, qid in self._queues(h.topic, h.queueId) + ([] if h.order else self._queues(retry, -1)):
            if h.order and ctx.pop.order.blocked(topic, h.consumerGroup, qid, h.attemptId, now):
                continue
            if ctx.store.get_max_offset_in_queue(topic, qid) > self._offset(topic, h.consumerGroup, qid):
                return True
        return False

    def notification(self, request: RemotingCommand,
                     conn: RemotingProtocol) -> RemotingCommand | defer.Deferred[RemotingCommand | None]:
        ctx = self.ctx
        h = NotificationRequestHeader.from_command(request)
        refusal = self._refusal(request, h.topic, h.queueId, h.consumerGroup, conn)
        if refusal is not None:
            return refusal

        def answer(has: bool, full: bool = False) -> RemotingCommand:
            response = request.make_response(ResponseCode.SUCCESS)
            NotificationResponseHeader(has, full).apply_to(response)
            return response

        if self._has_message(h):
            return answer(True)
        if h.pollTime <= 0 or conn.closed:
            return answer(False)
        if ctx.pop.holds.full():
            return answer(False, True)
        watches = {h.topic: h.queueId}
        if not h.order:
            watches[keys.pop_retry_topic(h.topic, h.consumerGroup, ctx.pop.settings.enableRetryTopicV2)] = -1

        def retry(final: bool) -> defer.Deferred[RemotingCommand | None]:
            if conn.closed:
                return defer.succeed(None)
            has = self._has_message(h)
            return defer.succeed(answer(has) if has or final else None)

        left_ms = h.bornTime + h.pollTime - now_ms()
        return ctx.pop.holds.hold(watches, max(left_ms, 0) / 1000, retry, h.consumerGroup)

    # -- polling info ---------------------------------------------------------------------------
    def polling_info(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ctx = self.ctx
        h = PollingInfoRequestHeader.from_command(request)
        refusal = self._refusal(request, h.topic, h.queueId, h.consumerGroup, conn)
        if refusal is not None:
            return refusal
        response = request.make_response(ResponseCode.SUCCESS)
        PollingInfoResponseHeader(ctx.pop.holds.held_on(h.topic, h.queueId)).apply_to(response)
        return response
