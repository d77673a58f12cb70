"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401): the broker balances a 5.x group.

A 5.x consumer with client rebalance off asks the broker which queues it gets and in which mode
(PULL, or POP where every member pops all queues through queueId -1 unless popShareQueueNum says
otherwise). The queues are this broker's own (Apache asks the NameServer for the whole route).
"""

from __future__ import annotations

import orjson

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.pop.request_mode import MODES
from rmqtx.client.message import MessageQueue
from rmqtx.client.pull_api import allocate_averagely
from rmqtx.common.topics import RETRY_PREFIX, is_readable
from rmqtx.remoting.bodies import body_shape, json_object, text
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol

STRATEGIES = ("AVG", "AVG_BY_CIRCLE")


def allocate_by_circle(mqs: list[MessageQueue], cids: list[str], current: str) -> list[MessageQueue]:
    """AllocateMessageQueueAveragelyByCircle: every len(cids)-th queue from the client's index."""
    if current not in cids:
        return []
    index = cids.index(current)
    return [mq for i, mq in enumerate(mqs) if i % len(cids) == index]


def _mq_json(mq: MessageQueue) -> dict:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


class AssignmentProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.QUERY_ASSIGNMENT: self.query_assignment,
            RequestCode.SET_MESSAGE_REQUEST_MODE: self.set_mode,
        }

    def _mode(self, topic: str, group: str) -> tuple[str, int]:
        found = self.ctx.pop.modes.get(topic, group)
        if found is not None:
            return str(found.get("mode", "PULL")), int(found.get("popShareQueueNum", 0))
        settings = self.ctx.pop.settings
        if topic.startswith(RETRY_PREFIX):
            return "PULL", 0
        mode = settings.defaultMessageRequestMode
        return mode, settings.defaultPopShareQueueNum if mode == "POP" else 0

    def query_assignment(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        data = json_object(request.body, "QueryAssignmentRequestBody")
        with body_shape("QueryAssignmentRequestBody"):
            topic = text(data.get("topic"), "topic")
            group = text(data.get("consumerGroup"), "consumerGroup")
            client_id = text(data.get("clientId"), "clientId")
            model = text(data.get("messageModel"), "messageModel", "CLUSTERING")
            strategy = text(data.get("strategyName"), "strategyName", "AVG")
        mode, share = self._mode(topic, group)
        queues = self._balance(topic, group, client_id, model, strategy, mode, share)
        body: dict = {}
        if queues is not None:
            body["messageQueueAssignments"] = [{"messageQueue": _mq_json(mq), "mode": mode} for mq in queues]
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    def _balance(self, topic: str, group: str, client_id: str, model: str, strategy: str, mode: str,
                 share: int) -> list[MessageQueue] | None:
        """The client's queues; None when the answer is unknown (the client then keeps what it has)."""
        ctx = self.ctx
        tc = ctx.topics.get(topic)
        if tc is None or not is_readable(tc.perm):
            return None
        mq_all = sorted(MessageQueue(topic, ctx.config.brokerName, q) for q in range(tc.readQueueNums))
        if model == "BROADCASTING":
            return mq_all
        info = ctx.clients.consumer_group(group)
        if info is None or strategy not in STRATEGIES:
            return None
        cids = sorted(info.client_ids())
        alloc = allocate_averagely if strategy == "AVG" else allocate_by_circle
        if mode != "POP":
            return alloc(mq_all, cids, client_id)
        if share <= 0 or share >= len(cids) - 1:
            return [MessageQueue(topic, ctx.config.brokerName, -1) for _ in mq_all[:1]]
        if len(cids) <= len(mq_all):
            result = list(alloc(mq_all, cids, client_id))
            if client_id in cids:
                index = cids.index(client_id)
                for i in range(1, share + 1):
                    result.extend(alloc(mq_all, cids, cids[(index + i) % len(cids)]))
            return result
        if client_id not in cids:
            return []
        return [mq_all[cids.index(client_id) % len(mq_all)]]

    def set_mode(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ctx = self.ctx
        data = json_object(request.body, "SetMessageRequestModeRequestBody")
        with body_shape("SetMessageRequestModeRequestBody"):
            topic = text(data.get("topic"), "topic")
            group = text(data.get("consumerGroup"), "consumerGroup")
            mode = text(data.get("mode"), "mode", "PULL").upper()
            share = int(data.get("popShareQueueNum") or 0)
        if topic.startswith(RETRY_PREFIX):
            return request.make_response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if ctx.topics.get(topic) is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if ctx.groups.find(group) is None:
            return request.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        if mode not in MODES:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"unknown mode {mode}")
        ctx.pop.modes.set(topic, group, mode, share)
        return request.make_response(ResponseCode.SUCCESS)
