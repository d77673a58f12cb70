"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): a reply is pushed to the requesting client (326).

As Java 4.9.8's reply processor: the send checks, then PUSH_REPLY_MESSAGE_TO_CLIENT to the producer
connection named by the reply's REPLY_TO_CLIENT property, then (storeReplyMessageEnable) the reply is
stored on its topic, normally ``<cluster>_REPLY_TOPIC``. The answer is SUCCESS only when the push
succeeded; a stored reply's id and offset are in it either way.
"""

from __future__ import annotations

import random
import time

from twisted.logger import Logger

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.ha.role import wait_for_replica
from rmqtx.broker.processors.send import SendProcessor
from rmqtx.common.message import (
    PROPERTY_PUSH_REPLY_TIME,
    PROPERTY_REPLY_TO_CLIENT,
    parse_properties,
    properties_to_string,
)
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    send_header_from_v2,
)
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.results import MessageToStore, PutStatus

log = Logger(namespace="rmqtx.broker.reply")

#: Java's Broker2Client.callClient waits this long for the client's answer.
PUSH_TIMEOUT_S = 10.0
#: Java's putOk for a reply: a SYNC_MASTER's slave timing out or missing still counts as stored
_STORED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE)


class ReplyProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._sends = SendProcessor(ctx)  # the same checks (permissions, topic, auto-create, queue id)

    def table(self) -> dict:
        return {
            RequestCode.SEND_REPLY_MESSAGE: self.process,
            RequestCode.SEND_REPLY_MESSAGE_V2: self.process,
        }

    def _header(self, request: RemotingCommand) -> SendMessageRequestHeader:
        if request.code == RequestCode.SEND_REPLY_MESSAGE_V2:
            return send_header_from_v2(request.ext_fields)
        return SendMessageRequestHeader.from_fields(request.ext_fields)

    async def process(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        cfg = self.ctx.config
        header = self._header(request)
        extra = {"MSG_REGION": cfg.regionId, "TRACE_ON": "true" if cfg.traceOn else "false"}
        tc, error = self._sends._check(request, header, conn)
        if error is not None:
            error.ext_fields = dict(extra)  # Java adds these two before it checks anything
            return error
        assert tc is not None  # _check gives a config or an error
        queue_id = header.queueId if header.queueId >= 0 else random.randrange(tc.writeQueueNums)
        peer = conn.transport.getPeer()
        born_host = (getattr(peer, "host", "127.0.0.1"), getattr(peer, "port", 0))
        pushed, remark = await self._push(header, born_host, request.body or b"")
        response = request.make_response(ResponseCode.SUCCESS if pushed else ResponseCode.SYSTEM_ERROR, None if pushed else remark)
        fields = SendMessageResponseHeader("0", queue_id, 0) if pushed else None
        if cfg.storeReplyMessageEnable:
            put = self.ctx.store.put_message(
                MessageToStore(
                    topic=header.topic,
                    queue_id=queue_id,
                    flag=header.flag,
                    body=request.body or b"",
                    properties=header.properties or "",  # stored as the replier sent it
                    sys_flag=header.sysFlag,
                    born_timestamp=header.bornTimestamp,
                    born_host=born_host,
                    store_host=self.ctx.store_host,
                    reconsume_times=header.reconsumeTimes or 0,
                ),
                timed=False,
            )
            # Java's reply processor stores through the blocking putMessage: a SYNC_MASTER answers after the slave
            result = self.ctx.store.put_done(await wait_for_replica(self.ctx.ha, put, header.properties or ""))
            if result.status in _STORED:
                fields = SendMessageResponseHeader(result.msg_id, queue_id, result.queue_offset)
            else:
                log.warn("reply to {topic} not stored: {status}", topic=header.topic, status=result.status.name)
        if fields is None:
            response.ext_fields = extra
            return response
        return fields.apply_to(response, extra)

    async def _push(self, header: SendMessageRequestHeader, born_host: tuple[str, int], body: bytes) -> tuple[bool, str]:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester; (pushed, Java's remark when not)."""
        props = parse_properties(header.properties)
        sender = props.get(PROPERTY_REPLY_TO_CLIENT)
        if sender is None:
            return False, f"reply message properties[{PROPERTY_REPLY_TO_CLIENT}] is null"
        channel = self.ctx.clients.producer_by_client_id(sender)
        if channel is None:
            return False, f"push reply message fail, channel of <{sender}> not found."
        props[PROPERTY_PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        store_ip, store_port = self.ctx.store_host
        push = ReplyMessageRequestHeader(
            producerGroup=header.producerGroup,
            topic=header.topic,
            defaultTopic=header.defaultTopic,
            defaultTopicQueueNums=header.defaultTopicQueueNums,
            queueId=header.queueId,
            sysFlag=header.sysFlag,
            bornTimestamp=header.bornTimestamp,
            flag=header.flag,
            properties=properties_to_string(props),
            reconsumeTimes=header.reconsumeTimes,
            unitMode=bool(header.unitMode),
            bornHost=f"{born_host[0]}:{born_host[1]}",
            storeHost=f"{store_ip}:{store_port}",
            storeTimestamp=int(time.time() * 1000),
        )
        command = push.apply_to(RemotingCommand(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, body=body))
        try:
            answer = await channel.conn.invoke(command, PUSH_TIMEOUT_S)
        except Exception as exc:  # closed or silent client: Java answers the replier the same way
            log.warn("push reply message to <{sender}> failed: {exc}", sender=sender, exc=exc)
            return False, f"push reply message to {sender}fail."
        if answer.code != ResponseCode.SUCCESS:
            log.warn("push reply message to <{sender}> answered {code}: {remark}", sender=sender, code=answer.code, remark=answer.remark)
            return False, f"push reply message to {sender}fail."
        return True, ""
