"""Test helpers: fixture records, a raw-bytes remoting client, NameServer start-up on port 0."""

from __future__ import annotations

import json
import os
import struct
import tempfile
from typing import Iterator

from twisted.internet import defer, endpoints, protocol, reactor

from rmqtx.namesrv.config import NamesrvConfig
from rmqtx.namesrv.service import NamesrvService
from rmqtx.remoting import RemotingCommand, decode_frame, encode_frame
from tests.fixtures import FIXTURES



def records(name: str) -> Iterator[dict]:
    with open(FIXTURES / name, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def namesrv_frames(name: str) -> list[dict]:
    """The NameServer's frames of one capture (requests and answers), in capture order."""
    out = []
    for rec in records(name):
        if "hex" not in rec:
            continue
        if rec.get("peer") == "namesrv" or rec.get("target") == "namesrv":
            out.append(rec)
    return out


class RawClient(protocol.Protocol):
    """Sends frames as raw bytes and hands back answers as raw bytes, matched by opaque."""

    def __init__(self) -> None:
        self.buffer = b""
        self.waiting: dict[int, defer.Deferred] = {}
        self.early: dict[int, bytes] = {}
        self.lost: defer.Deferred = defer.Deferred()
        self.closed = False

    def dataReceived(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4:
            (length,) = struct.unpack(">i", self.buffer[:4])
            if len(self.buffer) < 4 + length:
                return
            frame, self.buffer = self.buffer[: 4 + length], self.buffer[4 + length :]
            opaque = decode_frame(frame).opaque
            d = self.waiting.pop(opaque, None)
            if d is None:
                self.early[opaque] = frame
            else:
                d.callback(frame)

    def connectionLost(self, reason: object = None) -> None:
        self.closed = True
        for d in self.waiting.values():
            d.errback(ConnectionError("closed"))
        self.waiting.clear()
        self.lost.callback(None)

    def send_raw(self, frame: bytes) -> None:
        self.transport.write(frame)

    def answer(self, opaque: int, timeout: float = 5.0) -> defer.Deferred:
        """The raw answer frame with this opaque."""
        if opaque in self.early:
            return defer.succeed(self.early.pop(opaque))
        d: defer.Deferred = defer.Deferred()
        self.waiting[opaque] = d
        d.addTimeout(timeout, reactor)
        return d

    async def call_raw(self, frame: bytes, timeout: float = 5.0) -> bytes:
        opaque = decode_frame(frame).opaque
        self.send_raw(frame)
        return await self.answer(opaque, timeout)

    async def call(self, cmd: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        return decode_frame(await self.call_raw(encode_frame(cmd), timeout))

    def close(self) -> defer.Deferred:
        if not self.closed:
            self.transport.loseConnection()
        return self.lost


async def connect(port: int) -> RawClient:
    endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    return await endpoint.connect(protocol.Factory.forProtocol(RawClient))


def start_namesrv(testcase, clock=None, **overrides) -> NamesrvService:
    """A NameServer on 127.0.0.1, port 0, with its own KV file; stopped at test end."""
    kv_dir = overrides.pop("kv_dir", None) or tempfile.mkdtemp(prefix="rmqtx-ns-")
    config = NamesrvConfig(listenAddress="127.0.0.1", listenPort=0, kvConfigPath=os.path.join(kv_dir, "kvConfig.json"))
    for key, value in overrides.items():
        setattr(config, key, value)
    svc = NamesrvService(config, reactor, clock=clock)
    svc.startService()
    testcase.addCleanup(svc.stopService)
    return svc


def port_of(svc: NamesrvService) -> int:
    return svc.port.getHost().port


def request(code: int, ext: dict | None = None, body: bytes = b"", **kw) -> RemotingCommand:
    return RemotingCommand.request(code, ext, body, **kw)
