"""Small helpers that speak the wire protocol directly to a broker (what a Java client would send)."""

from __future__ import annotations

import time

from rmqtx.common.message import parse_properties, properties_to_string
from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode
from rmqtx.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader, send_header_to_v2
from rmqtx.store.record import decode_record


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, queue_id: int = 0, **props: str) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producerGroup="P_test", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=queue_id,
        sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0, properties=properties_to_string(dict(props)),
        reconsumeTimes=0, unitMode=False, batch=False,
    )
    fields, order = send_header_to_v2(header)
    return await client.invoke(addr, RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=body, fast_keys=order))


async def pull(client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int, group: str = "C_test",
               expression: str = "*", suspend_ms: int = 0) -> tuple[RemotingCommand, list]:
    """A pull carrying its own subscription (sysFlag 0x4), as a pull consumer sends it."""
    header = PullMessageRequestHeader(
        consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset, maxMsgNums=32,
        sysFlag=0x4 | (0x2 if suspend_ms else 0), commitOffset=0, suspendTimeoutMillis=suspend_ms,
        subscription=expression, subVersion=0, expressionType="TAG",
    )
    cmd = header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE))
    resp = await client.invoke(addr, cmd, timeout=suspend_ms / 1000 + 5)
    return resp, decode_records(resp.body)


def decode_records(body: bytes) -> list:
    out, pos = [], 0
    while pos < len(body):
        rec = decode_record(body, pos)
        out.append(rec)
        pos += rec.total_size
    return out


def props_of(record) -> dict[str, str]:
    return parse_properties(record.properties)
