"""POP requests as the 5.x Java client builds them, over a socket, for tests/pop."""

from __future__ import annotations

import base64
import time

import orjson

from rmqtx.common.pop_keys import extra_info
from rmqtx.client.message import MessageExt, decode_messages
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import Standalone, call

BROKER_NAME = "broker-a"


def pop(server: Standalone, group: str, topic: str, queue_id: int = -1, invisible_ms: int = 60000, max_nums: int = 32,
        poll_ms: int = 0, order: bool = False, init_mode: int = 0) -> tuple[RemotingCommand, list[MessageExt]]:
    """One POP_MESSAGE; the messages get their POP_CK as the 5.x client's processPopResponse sets it."""
    fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "maxMsgNums": max_nums,
              "invisibleTime": invisible_ms, "pollTime": poll_ms, "bornTime": int(time.time() * 1000),
              "initMode": init_mode, "expType": "TAG", "exp": "*", "order": order}
    response = call(server.broker, RemotingCommand.request(RequestCode.POP_MESSAGE, fields), timeout=poll_ms / 1000 + 10)
    if response.code != 0:
        return response, []
    ext = response.ext_fields or {}
    starts = {}
    for entry in ext["startOffsetInfo"].split(";"):
        mark, qid, offset = entry.split(" ")
        starts[f"{mark}@{qid}"] = int(offset)
    msgs = decode_messages(response.body, BROKER_NAME)
    for m in msgs:
        if "POP_CK" not in m.properties:
            m.properties["POP_CK"] = extra_info(starts[f"0@{m.queue_id}"], int(ext["popTime"]), int(ext["invisibleTime"]),
                                                int(ext["reviveQid"]), topic, BROKER_NAME, m.queue_id, m.queue_offset)
    return response, msgs


def _target(m: MessageExt, group: str) -> tuple[str, list[str]]:
    info = m.properties["POP_CK"].split(" ")
    return (m.topic if info[4] == "0" else f"%RETRY%{group}_{m.topic}"), info


def ack(server: Standalone, group: str, m: MessageExt) -> RemotingCommand:
    topic, info = _target(m, group)
    fields = {"consumerGroup": group, "topic": topic, "queueId": int(info[6]), "extraInfo": m.properties["POP_CK"],
              "offset": int(info[7]), "brokerName": BROKER_NAME}
    return call(server.broker, RemotingCommand.request(RequestCode.ACK_MESSAGE, fields))


def batch_ack(server: Standalone, group: str, msgs: list[MessageExt]) -> RemotingCommand:
    """BATCH_ACK_MESSAGE with one BatchAck per checkpoint, offsets as a base64 BitSet (as the 5.x client sends)."""
    acks: dict[tuple, dict] = {}
    for m in msgs:
        _, info = _target(m, group)
        key = (info[4], info[6], info[0], info[1])
        a = acks.setdefault(key, {"c": group, "t": m.topic, "r": info[4], "so": int(info[0]), "q": int(info[6]),
                                  "rq": int(info[3]), "pt": int(info[1]), "it": int(info[2]), "bits": set()})
        a["bits"].add(int(info[7]) - int(info[0]))
    body_acks = []
    for a in acks.values():
        bits = a.pop("bits")
        raw = bytearray(max(bits) // 8 + 1)
        for b in bits:
            raw[b // 8] |= 1 << (b % 8)
        a["b"] = base64.b64encode(bytes(raw)).decode()
        body_acks.append(a)
    body = orjson.dumps({"acks": body_acks, "brokerName": BROKER_NAME})
    return call(server.broker, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, None, body=body))


def change_invisible(server: Standalone, group: str, m: MessageExt, invisible_ms: int) -> RemotingCommand:
    topic, info = _target(m, group)
    fields = {"consumerGroup": group, "topic": topic, "queueId": int(info[6]), "extraInfo": m.properties["POP_CK"],
              "offset": int(info[7]), "invisibleTime": invisible_ms, "brokerName": BROKER_NAME}
    return call(server.broker, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields))


def pop_until(server: Standalone, group: str, topic: str, want: int, timeout: float, **kw) -> list[MessageExt]:
    """Pop (long polling) until ``want`` messages came, or fail after ``timeout`` seconds."""
    got: list[MessageExt] = []
    deadline = time.time() + timeout
    while len(got) < want:
        left = deadline - time.time()
        if left <= 0:
            raise AssertionError(f"only {len(got)} of {want} popped within {timeout} s: {[m.body for m in got]}")
        _, msgs = pop(server, group, topic, poll_ms=int(min(left, 5) * 1000), **kw)
        got.extend(msgs)
    return got
