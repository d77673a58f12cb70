"""Raw requests the runner makes itself: topic creation before a cell, the DLQ check, the broker's delay levels.

These stand in for ``mqadmin`` so every client column starts from the same broker state. With ACL
on they are signed with an admin account's keys; with TLS on they go over TLS (no certificate check,
as Java's client in its default test mode).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from dataclasses import dataclass

from rmqtx.common import fastjson
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import decode_frame, encode_frame

DEFAULT_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Access:
    """How the runner reaches the servers: ACL keys to sign with (or none) and whether to speak TLS."""

    access_key: str | None = None
    secret_key: str | None = None
    tls: bool = False


def call(addr: str, request: RemotingCommand, timeout: float = 5.0, access: Access = Access()) -> RemotingCommand:
    """One blocking request/response over a fresh socket."""
    if access.access_key and access.secret_key:
        from rmqtx.acl.signing import sign_request

        sign_request(request, access.access_key, access.secret_key)
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as raw:
        sock = _tls_context().wrap_socket(raw) if access.tls else raw
        sock.sendall(encode_frame(request))
        data = _read(sock, 4)
        total = int.from_bytes(data, "big", signed=True)
        return decode_frame(data + _read(sock, total))


def _tls_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed before the answer was complete")
        data += chunk
    return data


def level_seconds(levels: str) -> list[float]:
    """``messageDelayLevel`` ("1s 5s ... 2h") as seconds, level 1 first."""
    return [float(item[:-1]) * _UNITS[item[-1]] for item in levels.split()]


class Probe:
    """The broker and name server as ``mqadmin`` sees them."""

    def __init__(self, namesrv: str, broker: str | None = None, access: Access = Access()) -> None:
        self.namesrv = namesrv.split(";")[0]
        self.access = access
        self.broker = broker or self.master_addr()

    def call(self, addr: str, request: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        return call(addr, request, timeout, self.access)

    def master_addr(self) -> str:
        """The first master the name server knows (GET_BROKER_CLUSTER_INFO)."""
        resp = self.call(self.namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"cluster info: {resp.code} {resp.remark}")
        table = fastjson.loads(resp.body).get("brokerAddrTable") or {}
        for name in sorted(table):
            addrs = {int(k): v for k, v in (table[name].get("brokerAddrs") or {}).items()}
            if 0 in addrs:
                return addrs[0]
        raise RuntimeError("the name server knows no master broker")

    def broker_config(self) -> dict[str, str]:
        """The broker's properties from GET_BROKER_CONFIG; empty when it does not answer."""
        try:
            resp = self.call(self.broker, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 3)
        except OSError:
            return {}
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            return {}
        lines = resp.body.decode("utf-8", "replace").splitlines()
        return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in lines) if v.strip()}

    def create_topic(self, topic: str, queues: int = 4, message_type: str = "") -> None:
        """UPDATE_AND_CREATE_TOPIC, as ``mqadmin updateTopic`` sends it (with 5.x's ``-a +message.type=X`` when a
        message type is named), then wait for the route."""
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        if message_type:
            fields["attributes"] = f"+message.type={message_type}"
        resp = self.call(self.broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"create topic {topic}: {resp.code} {resp.remark}")
        for _ in range(100):
            route = self.call(self.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
            if route.code == ResponseCode.SUCCESS:
                return
            time.sleep(0.05)
        raise RuntimeError(f"topic {topic} never reached the name server")

    def make_acl2_users(self) -> None:
        """The ``acl2`` mode's Normal users and their ACLs, made as the Super user the standalone started with."""
        from interop.modes import acl2_bodies

        for what, fields, body in acl2_bodies():
            code = RequestCode.AUTH_CREATE_USER if what == "user" else RequestCode.AUTH_CREATE_ACL
            resp = self.call(self.broker, RemotingCommand.request(code, fields, body=json.dumps(body).encode()))
            if resp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"create {what} {fields}: {resp.code} {resp.remark}")

    def set_request_mode(self, topic: str, group: str, mode: str) -> None:
        """SET_MESSAGE_REQUEST_MODE (5.x), as ``mqadmin setConsumeMode -m POP`` sends it."""
        body = json.dumps({"topic": topic, "consumerGroup": group, "mode": mode, "popShareQueueNum": 0}).encode()
        resp = call(self.broker, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, None, body=body))
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"set {group} on {topic} to {mode}: {resp.code} {resp.remark}")

    def make_orderly(self, group: str) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with 5.x's consumeMessageOrderly, as ``mqadmin updateSubGroup -o true``."""
        body = json.dumps({"consumeBroadcastEnable": False, "consumeEnable": True, "consumeFromMinEnable": False,
                           "consumeMessageOrderly": True, "groupName": group}).encode()
        resp = self.call(self.broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body=body))
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"make {group} orderly: {resp.code} {resp.remark}")

    def query_keys(self, topic: str, key: str) -> list[str]:
        """Bodies of messages of ``topic`` whose KEYS contain ``key`` (QUERY_MESSAGE)."""
        return [m.body.decode("utf-8", "replace") for m in self._query(topic, key)]

    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset the broker stores for ``group`` on one queue (QUERY_CONSUMER_OFFSET); None when it has none."""
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id}
        resp = self.call(self.broker, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, fields))
        if resp.code != ResponseCode.SUCCESS:
            return None
        return int((resp.ext_fields or {}).get("offset", -1))

    def stored_count(self, topic: str, queues: int = 4) -> int:
        """Messages the broker holds in ``topic`` (the sum of its queues' max offsets)."""
        total = 0
        for queue_id in range(queues):
            resp = self.call(self.broker, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}))
            if resp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"max offset of {topic}/{queue_id}: {resp.code} {resp.remark}")
            total += int((resp.ext_fields or {}).get("offset", 0))
        return total

    def stored_sys_flags(self, topic: str, key: str) -> list[int]:
        """The sysFlag each message of ``topic`` with ``key`` was stored with (bit 0: COMPRESSED)."""
        return [m.sys_flag for m in self._query(topic, key)]

    def _query(self, topic: str, key: str) -> list:
        from rmqtx.client.message import decode_messages

        fields = {"topic": topic, "key": key, "maxNum": 64, "beginTimestamp": 0, "endTimestamp": 2**63 - 1, "_UNIQUE_KEY_QUERY": "false"}
        resp = self.call(self.broker, RemotingCommand.request(RequestCode.QUERY_MESSAGE, fields), 10)
        if resp.code != ResponseCode.SUCCESS:
            return []
        return [m for m in decode_messages(resp.body) if key in m.keys]
