"""HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38), CHECK_CLIENT_CONFIG (46)."""

from __future__ import annotations

import orjson

from rmqtx.broker.clients import ClientChannel
from rmqtx.common.subscription import SubscriptionData
from rmqtx.broker.context import BrokerContext
from rmqtx.common.topics import PERM_READ, PERM_WRITE, RETRY_PREFIX, validate_name
from rmqtx.filter import FilterSyntaxError, compile_cached
from rmqtx.remoting.bodies import BodyError, body_shape, json_object, object_list, text
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import ConsumerGroupRequestHeader, UnregisterClientRequestHeader
from rmqtx.remoting.protocol import RemotingProtocol


def _scalar(value: object, what: str) -> object:
    """An enum sent as name or ordinal; objects and arrays are refused."""
    if isinstance(value, (dict, list)):
        raise BodyError(f"{what} is not a name or an ordinal")
    return value


def _heartbeat_body(request: RemotingCommand) -> tuple[str, list[dict], list[str]]:
    """HeartbeatData checked and normalized before anything is registered."""
    data = json_object(request.body, "HeartbeatData")
    with body_shape("HeartbeatData"):
        client_id = text(data.get("clientID"), "clientID")
        consumers = []
        for consumer in object_list(data.get("consumerDataSet"), "consumerDataSet"):
            consumers.append(
                {
                    "group": text(consumer.get("groupName"), "groupName"),
                    "consumeType": _scalar(consumer.get("consumeType"), "consumeType"),
                    "messageModel": _scalar(consumer.get("messageModel"), "messageModel"),
                    "consumeFromWhere": _scalar(consumer.get("consumeFromWhere"), "consumeFromWhere"),
                    "subs": [SubscriptionData.from_json(s) for s in object_list(consumer.get("subscriptionDataSet"), "subscriptionDataSet")],
                }
            )
        producers = [text(p.get("groupName"), "groupName") for p in object_list(data.get("producerDataSet"), "producerDataSet")]
    return client_id, consumers, producers


class ClientManageProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    def heart_beat(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        client_id, consumers, producers = _heartbeat_body(request)
        channel = ClientChannel(client_id, request.language, request.version, conn)
        ctx = self.ctx
        registered_new_topic = False
        for consumer in consumers:
            group = consumer["group"]
            why = validate_name(group, "group")
            if why:
                return request.make_response(ResponseCode.SYSTEM_ERROR, why)
            group_cfg = ctx.groups.find(group)
            notify = True
            if group_cfg is not None:
                notify = group_cfg.notifyConsumerIdsChangedEnable
                if group_cfg.retryQueueNums > 0:
                    _, created = ctx.topics.create_system_topic(RETRY_PREFIX + group, group_cfg.retryQueueNums, PERM_READ | PERM_WRITE)
                    registered_new_topic |= created
            subs = consumer["subs"]
            ctx.clients.register_consumer(
                group,
                ClientChannel(client_id, request.language, request.version, conn),
                consumer["consumeType"],
                consumer["messageModel"],
                consumer["consumeFromWhere"],
                subs,
                notify,
            )
            ctx.filters.register(group, subs)
        for producer_group in producers:
            ctx.clients.register_producer(producer_group, channel)
        if registered_new_topic:
            ctx.registrar.register_all(oneway=True)
        return request.make_response(ResponseCode.SUCCESS)

    def unregister_client(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_command(request)
        if header.producerGroup:
            self.ctx.clients.unregister_producer(header.producerGroup, conn)
        if header.consumerGroup:
            group_cfg = self.ctx.groups.table.get(header.consumerGroup)
            notify = group_cfg.notifyConsumerIdsChangedEnable if group_cfg else True
            self.ctx.clients.unregister_consumer(header.consumerGroup, conn, notify)
        return request.make_response(ResponseCode.SUCCESS, ext_fields={})

    def consumer_list(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = ConsumerGroupRequestHeader.from_command(request)
        info = self.ctx.clients.consumer_group(header.consumerGroup)
        if info is None or not info.channels:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumerGroup}")
        body = orjson.dumps({"consumerIdList": info.client_ids()})
        return request.make_response(ResponseCode.SUCCESS, ext_fields={}, body=body)

    def check_client_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        data = json_object(request.body, "CheckClientRequestBody")
        sub = data.get("subscriptionData") or {}
        if not isinstance(sub, dict):
            raise BodyError("subscriptionData is not an object")
        kind = text(sub.get("expressionType"), "expressionType") or "TAG"
        if kind in ("", "TAG"):
            return request.make_response(ResponseCode.SUCCESS)
        if not self.ctx.config.enablePropertyFilter:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {kind}")
        try:
            compile_cached(text(sub.get("subString"), "subString"))
        except FilterSyntaxError as exc:
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return request.make_response(ResponseCode.SUCCESS)
