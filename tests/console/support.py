"""A standalone with the console on, blocking HTTP calls to it, and a consumer kept online over a raw socket."""

from __future__ import annotations

import base64
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from rmqtx.common import fastjson
from rmqtx.remoting.codes import RESPONSE_FLAG, RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import decode_frame, encode_frame
from testkit.ports import free_port
from testkit.standalone import Standalone, call


def console_server(admin: bool = True, extra: dict[str, str] | None = None, server: Standalone | None = None) -> Standalone:
    """A standalone (not started) whose broker serves the console on a free loopback port."""
    conf = {"consolePort": str(free_port()), "consoleAdminEnable": "true" if admin else "false"}
    conf.update(extra or {})
    if server is None:
        server = Standalone(conf)
    else:
        server.conf_path.write_text(server.conf_path.read_text() + "".join(f"{k}={v}\n" for k, v in conf.items()))
    server.console = f"http://127.0.0.1:{conf['consolePort']}"  # type: ignore[attr-defined]
    return server


def http(base: str, method: str, path: str, params: dict | None = None, body: Any = None,
         headers: dict[str, str] | None = None, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request; (status, headers, body) for any status."""
    url = f"{base}/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = None
    all_headers = dict(headers or {})
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        all_headers.setdefault("content-type", "application/json")
    request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def get_json(base: str, path: str, **params: Any) -> tuple[int, Any]:
    status, _, raw = http(base, "GET", f"api/{path}", params or None)
    return status, json.loads(raw)


def post_json(base: str, path: str, body: dict, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    status, _, raw = http(base, "POST", f"api/{path}", body=body, headers=headers)
    return status, json.loads(raw)


def basic(user: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def wait_for(predicate, timeout: float, what: str) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def commit_offset(server: Standalone, group: str, topic: str, queue_id: int, offset: int) -> None:
    fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
    response = call(server.broker, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields))
    assert response.code == ResponseCode.SUCCESS, response.remark


def query_offset(server: Standalone, group: str, topic: str, queue_id: int) -> int:
    fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id}
    response = call(server.broker, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, fields))
    return int(response.field("offset", "-1")) if response.code == ResponseCode.SUCCESS else -1


class OnlineConsumer:
    """A push consumer's HEART_BEAT (as Java 4.9.8 sends it) on a connection kept open: the group is online."""

    def __init__(self, server: Standalone, group: str, topic: str, client_id: str = "127.0.0.1@console-test") -> None:
        host, port = server.broker.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        subscription = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
                        "subVersion": int(time.time() * 1000), "tagsSet": [], "topic": topic}
        consumer = {"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY", "groupName": group,
                    "messageModel": "CLUSTERING", "subscriptionDataSet": [subscription], "unitMode": False}
        body = fastjson.dumps({"clientID": client_id, "consumerDataSet": [consumer], "producerDataSet": []})
        self.sock.sendall(encode_frame(RemotingCommand.request(RequestCode.HEART_BEAT, None, body)))
        while True:  # the broker may send NOTIFY_CONSUMER_IDS_CHANGED before it answers
            head = self._read(4)
            frame = decode_frame(head + self._read(int.from_bytes(head, "big")))
            if frame.flag & RESPONSE_FLAG:
                break
        assert frame.code == ResponseCode.SUCCESS, frame.remark

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the consumer's connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def send_back_to_dlq(server: Standalone, group: str, offset_msg_id: str, origin_topic: str | None = None) -> None:
    """CONSUMER_SEND_MSG_BACK with delayLevel -1: the broker writes the message to %DLQ%group at once."""
    from rmqtx.store.record import decode_offset_msg_id

    _, _, offset = decode_offset_msg_id(offset_msg_id)
    fields = {"offset": offset, "group": group, "delayLevel": -1, "originMsgId": offset_msg_id, "maxReconsumeTimes": 16}
    if origin_topic is not None:  # Java's consumers name the topic the message was consumed from
        fields["originTopic"] = origin_topic
    response = call(server.broker, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields))
    assert response.code == ResponseCode.SUCCESS, response.remark
