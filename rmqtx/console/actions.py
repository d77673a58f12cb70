"""Console admin actions, each through the broker's own request handler where one exists."""

from __future__ import annotations

import random
import time
from typing import Any

from twisted.internet import defer

from rmqtx.broker.reput import copy_of
from rmqtx.client.msgid import create_uniq_id
from rmqtx.common import fastjson
from rmqtx.common.message import (
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    parse_properties,
    properties_to_string,
)
from rmqtx.common.topics import DLQ_PREFIX, PERM_READ, PERM_WRITE, RETRY_PREFIX
from rmqtx.console.local import local_call
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import SendMessageRequestHeader, send_header_to_v2
from rmqtx.store.record import RecordError, decode_offset_msg_id, decode_record

CONSOLE_PRODUCER_GROUP = "rmqtx_console"


class ActionError(Exception):
    """An action the broker refused; ``status`` is the HTTP status the console answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _int(params: dict, key: str, default: int | None = None) -> int:
    value = params.get(key, default)
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ActionError(f"{key} must be a number") from None


def _text(params: dict, key: str) -> str:
    value = str(params.get(key) or "").strip()
    if not value:
        raise ActionError(f"{key} is required")
    return value


def _checked(response: RemotingCommand, what: str) -> RemotingCommand:
    if response.code != ResponseCode.SUCCESS:
        raise ActionError(f"{what}: CODE {response.code} {response.remark or ''}".strip())
    return response


class ConsoleActions:
    def __init__(self, broker: Any) -> None:
        self.broker = broker

    @property
    def ctx(self) -> Any:
        return self.broker.ctx

    def _call(self, code: int, fields: dict | None = None, body: bytes = b"") -> defer.Deferred[RemotingCommand]:
        return local_call(self.broker.dispatcher, code, fields, body)

    async def update_topic(self, params: dict) -> dict:
        """UPDATE_AND_CREATE_TOPIC as mqadmin updateTopic sends it (the broker then registers with the NameServer)."""
        topic = _text(params, "topic")
        current = self.ctx.topics.get(topic)
        read = _int(params, "readQueueNums", current.readQueueNums if current else 8)
        write = _int(params, "writeQueueNums", current.writeQueueNums if current else 8)
        perm = _int(params, "perm", current.perm if current else PERM_READ | PERM_WRITE)
        if not (0 < read <= 1024 and 0 < write <= 1024):
            raise ActionError("queue counts must be between 1 and 1024")
        order = str(params.get("order", current.order if current else False)).lower() in ("true", "1", "on")
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": read, "writeQueueNums": write, "perm": perm,
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": order}
        _checked(await self._call(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), f"update topic {topic}")
        return {"topic": topic, "created": current is None}

    async def delete_topic(self, params: dict) -> dict:
        """DELETE_TOPIC_IN_BROKER here, then DELETE_TOPIC_IN_NAMESRV at each NameServer, as mqadmin deleteTopic."""
        topic = _text(params, "topic")
        if self.ctx.topics.get(topic) is None:
            raise ActionError(f"topic {topic} does not exist", 404)
        _checked(await self._call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}), f"delete topic {topic}")
        errors = []
        for addr in self.broker.config.namesrv_addrs:
            request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                              {"topic": topic, "clusterName": self.broker.config.brokerClusterName})
            try:
                response = await self.broker.namesrv_client.invoke(addr, request, 3.0)
                if response.code != ResponseCode.SUCCESS:
                    errors.append(f"{addr}: {response.remark}")
            except Exception as exc:
                errors.append(f"{addr}: {exc}")
        return {"topic": topic, "deleted": True, "namesrvErrors": errors}

    async def reset_offset(self, params: dict) -> dict:
        """Move a group's offsets on a topic to a time (ms; -1 the end, 0 the start).

        With the group online the broker pushes the new offsets to its consumers (INVOKE_BROKER_TO_RESET_OFFSET,
        forced); offline, the committed offsets are rewritten and read on the group's next start.
        """
        group, topic = _text(params, "group"), _text(params, "topic")
        timestamp = _int(params, "timestamp", -1)
        ctx = self.ctx
        tc = ctx.topics.get(topic)
        if tc is None:
            raise ActionError(f"topic {topic} does not exist", 404)
        info = ctx.clients.consumer_group(group)
        if info is not None and info.channels:
            fields = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": True}
            response = _checked(await self._call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields), "reset offset")
            table = fastjson.loads(response.body).get("offsetTable") or {}
            offsets = {int(dict(k)["queueId"]): int(v) for k, v in table.items()}
            return {"group": group, "topic": topic, "online": True, "offsets": offsets}
        offsets = {}
        for qid in range(tc.readQueueNums):
            if timestamp == -1:
                target = ctx.store.get_max_offset_in_queue(topic, qid)
            elif timestamp == 0:
                target = ctx.store.get_min_offset_in_queue(topic, qid)
            else:
                target = ctx.store.get_offset_in_queue_by_time(topic, qid, timestamp)
            offsets[qid] = max(0, target)
            ctx.offsets.commit(group, topic, qid, offsets[qid])
        return {"group": group, "topic": topic, "online": False, "offsets": offsets}

    async def send_test_message(self, params: dict) -> dict:
        """SEND_MESSAGE_V2 as a Java producer builds it, into the broker's own send handler."""
        topic = _text(params, "topic")
        body = str(params.get("body") or "").encode("utf-8")
        if not body:
            raise ActionError("body is required")
        props = {}
        for key, name in (("tags", PROPERTY_TAGS), ("keys", PROPERTY_KEYS)):
            value = str(params.get(key) or "").strip()
            if value:
                props[name] = value
        props["WAIT"] = "true"
        props[PROPERTY_UNIQ_KEY] = create_uniq_id(self.broker.config.brokerIP1)
        tc = self.ctx.topics.get(topic)
        queue_id = _int(params, "queueId", -1)
        if queue_id < 0 and tc is not None:
            queue_id = random.randrange(max(1, tc.writeQueueNums))
        header = SendMessageRequestHeader(
            producerGroup=CONSOLE_PRODUCER_GROUP, topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
            queueId=max(0, queue_id), sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
            properties=properties_to_string(props), reconsumeTimes=0, unitMode=False, batch=False,
        )
        fields, _ = send_header_to_v2(header)
        response = _checked(await self._call(RequestCode.SEND_MESSAGE_V2, fields, body), f"send to {topic}")
        ext = response.ext_fields or {}
        return {"topic": topic, "msgId": props[PROPERTY_UNIQ_KEY], "offsetMsgId": ext.get("msgId", ""),
                "queueId": int(ext.get("queueId", queue_id)), "queueOffset": int(ext.get("queueOffset", -1))}

    async def resend_dlq(self, params: dict) -> dict:
        """Put a dead letter back on its group's retry topic, so the group's consumers get it once more."""
        group, msg_id = _text(params, "group"), _text(params, "offsetMsgId")
        ctx = self.ctx
        try:
            _, _, offset = decode_offset_msg_id(msg_id)
            raw = ctx.store.look_message_by_offset(offset)
            record = decode_record(raw) if raw else None
        except (ValueError, RecordError, Exception):
            record = None
        if record is None or record.topic != DLQ_PREFIX + group:
            raise ActionError(f"{msg_id} is not a dead letter of group {group}", 404)
        group_cfg = ctx.groups.find(group)
        retry = RETRY_PREFIX + group
        _, created = ctx.topics.create_system_topic(retry, group_cfg.retryQueueNums if group_cfg else 1, PERM_READ | PERM_WRITE)
        if created:
            ctx.registrar.register_all(oneway=True)
        props = parse_properties(record.properties)
        props.pop(PROPERTY_DELAY, None)
        props.setdefault("RETRY_TOPIC", record.topic)
        result = await ctx.store.put_message(copy_of(record, retry, 0, props, reconsume_times=0))
        if not result.ok:
            raise ActionError(f"resend failed: {result.remark or result.status.name}", 500)
        return {"group": group, "topic": retry, "offsetMsgId": result.msg_id, "queueOffset": result.queue_offset,
                "originalTopic": props.get("RETRY_TOPIC", "")}
