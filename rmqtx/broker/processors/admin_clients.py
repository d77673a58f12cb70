"""Connected clients: connection lists (203, 204, 328) and calls the broker makes to consumers for an admin
(307 and 309 forwarded, 222 -> RESET_CONSUMER_CLIENT_OFFSET, 223 -> GET_CONSUMER_STATUS_FROM_CLIENT).

A forwarded call never hangs: a consumer that does not answer within ``call_timeout`` seconds gets
the admin CONSUME_MSG_TIMEOUT, as Java answers.
"""

from __future__ import annotations

import struct
from typing import Any

from rmqtx.broker.clients import ClientChannel
from rmqtx.broker.context import BrokerContext
from rmqtx.broker.processors.admin_bodies import connection_json, mq_json, mq_map, ok
from rmqtx.broker.processors.admin_headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetProducerConnectionListRequestHeader,
    ResetOffsetRequestHeader,
)
from rmqtx.common import fastjson
from rmqtx.common.fastjson import JavaMap
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol, RemotingTimeoutError
from rmqtx.store.record import decode_offset_msg_id

#: Java's Broker2Client.callClient waits 10 s; GET_CONSUMER_STATUS_FROM_CLIENT 5 s.
CALL_CLIENT_TIMEOUT = 10.0
STATUS_TIMEOUT = 5.0


class ClientAdminProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.call_timeout = CALL_CLIENT_TIMEOUT
        self.status_timeout = STATUS_TIMEOUT

    def table(self) -> dict:
        return {
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.GET_ALL_PRODUCER_INFO: self.all_producers,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_directly,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.consumer_status,
        }

    # -- connection lists ---------------------------------------------------------------------
    def consumer_connections(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetConsumerConnectionListRequestHeader.from_command(request)
        info = self.ctx.clients.consumer_group(header.consumerGroup)
        if info is None:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{header.consumerGroup}] not online"
            )
        body = {
            "connectionSet": [connection_json(c) for c in info.channels.values()],
            "consumeFromWhere": info.consume_from_where,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": JavaMap({t: s.broker_json() for t, s in info.subscriptions.items()}),
        }
        return ok(request, fastjson.dumps(body))

    def producer_connections(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetProducerConnectionListRequestHeader.from_command(request)
        members = self.ctx.clients.producers.get(header.producerGroup)
        if members is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"the producer group[{header.producerGroup}] not exist")
        return ok(request, fastjson.dumps({"connectionSet": [connection_json(c) for c in members.values()]}))

    def all_producers(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        data = JavaMap(
            {
                group: [
                    {
                        "clientId": c.client_id,
                        "language": c.language,
                        "lastUpdateTimestamp": int(c.last_update * 1000),
                        "remoteIP": c.conn.peer,
                        "version": c.version,
                    }
                    for c in members.values()
                ]
                for group, members in self.ctx.clients.producers.items()
            }
        )
        return ok(request, fastjson.dumps({"data": data}))

    # -- calls to a consumer ------------------------------------------------------------------
    def _find_consumer(self, group: str, client_id: str | None) -> ClientChannel | None:
        info = self.ctx.clients.consumer_group(group)
        if info is None:
            return None
        for channel in info.channels.values():
            if channel.client_id == client_id and not channel.conn.closed:
                return channel
        return None

    async def _call_consumer(self, code: int, request: RemotingCommand, group: str, client_id: str | None) -> RemotingCommand:
        """Forward ``request`` under ``code`` to the consumer and relay its answer (Java's callConsumer)."""
        channel = self._find_consumer(group, client_id)
        if channel is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        forwarded = RemotingCommand(code, ext_fields=dict(request.ext_fields or {}), body=request.body)
        try:
            answer = await channel.conn.invoke(forwarded, self.call_timeout)
        except RemotingTimeoutError as exc:
            return request.make_response(ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except Exception as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {type(exc).__name__}: {exc}"
            )
        return request.make_response(answer.code, answer.remark, ext_fields=answer.ext_fields, body=answer.body)

    async def running_info(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_command(request)
        return await self._call_consumer(RequestCode.GET_CONSUMER_RUNNING_INFO, request, header.consumerGroup, header.clientId)

    async def consume_directly(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """The message named by its offset id goes to the consumer as the body, with this broker's name."""
        header = ConsumeMessageDirectlyResultRequestHeader.from_command(request)
        request.ext_fields = {**(request.ext_fields or {}), "brokerName": self.ctx.config.brokerName}
        try:
            _, _, offset = decode_offset_msg_id(header.msgId or "")
            request.body = self.ctx.store.look_message_by_offset(offset) or b""
        except (ValueError, struct.error):
            request.body = b""
        return await self._call_consumer(RequestCode.CONSUME_MESSAGE_DIRECTLY, request, header.consumerGroup, header.clientId)

    def reset_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Offsets at ``timestamp`` (-1: the end) per queue, pushed oneway to every consumer of the group."""
        header = ResetOffsetRequestHeader.from_command(request)
        ctx, topic, group = self.ctx, header.topic, header.group
        tc = ctx.topics.get(topic)
        if tc is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
            )
        entries = []
        for qid in range(tc.writeQueueNums):
            current = ctx.offsets.query(group, topic, qid)
            if current == -1:
                return request.make_response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if header.timestamp == -1:
                target = ctx.store.get_max_offset_in_queue(topic, qid)
            else:
                target = ctx.store.get_offset_in_queue_by_time(topic, qid, header.timestamp)
            target = max(0, target)
            entries.append(((topic, ctx.config.brokerName, qid), target if header.isForce or target < current else current))
        info = ctx.clients.consumer_group(group)
        if info is None or not info.channels:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {header.timestamp}",
            )
        client_body: dict[str, Any]
        if request.language == "CPP":
            client_body = {"offsetTable": [{**mq_json(mq), "offset": offset} for mq, offset in entries]}
        else:
            client_body = {"offsetTable": mq_map(entries)}
        push = ResetOffsetRequestHeader(topic, group, header.timestamp, False)
        for channel in info.channels.values():
            channel.conn.invoke_oneway(
                RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, push.to_fields(), fastjson.dumps(client_body))
            )
        return ok(request, fastjson.dumps({"offsetTable": mq_map(entries)}))

    async def consumer_status(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Ask each consumer of the group (or the one at ``clientAddr``) for its offsets."""
        header = GetConsumerStatusRequestHeader.from_command(request)
        info = self.ctx.clients.consumer_group(header.group)
        if info is None or not info.channels:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{header.group}]"
            )
        fields = GetConsumerStatusRequestHeader(header.topic, header.group).to_fields()
        table = JavaMap()
        for channel in list(info.channels.values()):
            if header.clientAddr and header.clientAddr != channel.client_id:
                continue
            asked = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, fields)
            try:
                answer = await channel.conn.invoke(asked, self.status_timeout)
            except Exception:  # a consumer that cannot answer is left out, as Java does
                continue
            if answer.code == ResponseCode.SUCCESS and answer.body:
                status = fastjson.loads(answer.body).get("messageQueueTable") or {}
                table[channel.client_id] = mq_map(
                    ((dict(k)["topic"], dict(k)["brokerName"], int(dict(k)["queueId"])), v) for k, v in status.items()
                )
        return ok(request, fastjson.dumps({"consumerTable": table, "messageQueueTable": {}}))
