"""A small blocking RocketMQ remoting client for Spark's driver and executors.

Executors are plain Python processes: a socket per broker, requests matched to answers by
opaque, no reactor. Only standard 4.9 requests are used (routes, queue offsets, consumer
offsets, PULL_MESSAGE), so it reads rmqtx and Apache brokers alike.
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Iterator

from rmqtx.client.route import MASTER_ID, TopicRoute
from rmqtx.common.subscription import SubscriptionData
from rmqtx.client.util import java_fields
from rmqtx.common.sysflag import FLAG_SUBSCRIPTION
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.header import CommandHeader
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmqtx.remoting.serializer import decode_frame_payload, encode_frame

_LEN = struct.Struct(">i")
PULL_STATUS: dict[int, str] = {ResponseCode.SUCCESS: "found", ResponseCode.PULL_NOT_FOUND: "none",
               ResponseCode.PULL_RETRY_IMMEDIATELY: "unmatched", ResponseCode.PULL_OFFSET_MOVED: "moved"}


class WireError(RuntimeError):
    """A request the broker or NameServer refused (code and remark kept)."""

    def __init__(self, what: str, code: int, remark: str | None) -> None:
        super().__init__(f"{what}: code {code} {remark or ''}".strip())
        self.code = code


@dataclass(frozen=True, order=True)
class Queue:
    """One queue of a topic on one broker group, with the address to read it from."""

    topic: str
    broker: str
    queue_id: int
    addr: str

    @property
    def key(self) -> str:
        """How offsets JSON names the queue: "brokerName/queueId"."""
        return f"{self.broker}/{self.queue_id}"


@dataclass
class Pulled:
    """One PULL_MESSAGE answer: status, where to go next, and the stored records (as sent)."""

    status: str
    next_offset: int
    min_offset: int
    max_offset: int
    body: bytes


class Connection:
    """One blocking TCP connection; requests may be pipelined and answers arrive by opaque."""

    def __init__(self, addr: str, timeout: float = 30.0) -> None:
        host, port = addr.rsplit(":", 1)
        self.addr = addr
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.waiting: dict[int, RemotingCommand | None] = {}

    def close(self) -> None:
        self.sock.close()

    def send(self, request: RemotingCommand) -> int:
        """Write a request; returns its opaque, to collect the answer with `receive`."""
        self.sock.sendall(encode_frame(request))
        self.waiting[request.opaque] = None
        return request.opaque

    def receive(self, opaque: int) -> RemotingCommand:
        """The answer to `opaque`, keeping any other answers read on the way."""
        while self.waiting.get(opaque) is None:
            if opaque not in self.waiting:
                raise KeyError(f"no request {opaque} in flight")
            answer = self._read_frame()
            if answer.is_response and answer.opaque in self.waiting:
                self.waiting[answer.opaque] = answer
        return self.waiting.pop(opaque)  # type: ignore[return-value]

    def call(self, request: RemotingCommand) -> RemotingCommand:
        return self.receive(self.send(request))

    def _read_frame(self) -> RemotingCommand:
        total = _LEN.unpack(self._exactly(4))[0]
        return decode_frame_payload(self._exactly(total))

    def _exactly(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError(f"{self.addr} closed the connection")
            got += k
        return bytes(buf)


class Cluster:
    """NameServer routes and broker connections, opened lazily and reused."""

    def __init__(self, namesrv: str, timeout: float = 30.0) -> None:
        self.namesrvs = [a.strip() for a in namesrv.replace(",", ";").split(";") if a.strip()]
        if not self.namesrvs:
            raise ValueError("give the NameServer address: option('namesrv', 'host:port')")
        self.timeout = timeout
        self.conns: dict[str, Connection] = {}

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()

    def conn(self, addr: str) -> Connection:
        if addr not in self.conns:
            self.conns[addr] = Connection(addr, self.timeout)
        return self.conns[addr]

    def call(self, addr: str, request: RemotingCommand, what: str, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        try:
            answer = self.conn(addr).call(request)
        except OSError:
            self.conns.pop(addr, None)
            raise
        if answer.code not in ok:
            raise WireError(f"{what} at {addr}", answer.code, answer.remark)
        return answer

    # -- NameServer ---------------------------------------------------------------------------
    def route(self, topic: str) -> TopicRoute | None:
        """The topic's route from the first NameServer that answers; None when none knows it."""
        last: Exception | None = None
        for addr in self.namesrvs:
            try:
                answer = self.call(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
                                   f"route of {topic}", ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
            except OSError as e:
                last = e
                continue
            return TopicRoute.from_body(answer.body) if answer.code == ResponseCode.SUCCESS else None
        raise ConnectionError(f"no NameServer of {self.namesrvs} answered: {last}")

    def queues(self, topic: str) -> list[Queue]:
        """The topic's readable queues on every broker group that has an address (master first)."""
        route = self.route(topic)
        if route is None:
            return []
        out = []
        for mq in route.subscribe_queues(topic):
            addrs = route.broker_addrs.get(mq.broker_name, {})
            addr = addrs.get(MASTER_ID) or (addrs[min(addrs)] if addrs else None)
            if addr:
                out.append(Queue(topic, mq.broker_name, mq.queue_id, addr))
        return sorted(out)

    # -- broker -------------------------------------------------------------------------------
    def _offset(self, q: Queue, code: int, header: CommandHeader, what: str, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> int | None:
        answer = self.call(q.addr, RemotingCommand.request(code, java_fields(header)), f"{what} of {q.topic}/{q.key}", ok)
        return int(answer.field("offset") or 0) if answer.code == ResponseCode.SUCCESS else None

    def min_offset(self, q: Queue) -> int:
        return self._offset(q, RequestCode.GET_MIN_OFFSET, TopicQueueRequestHeader(q.topic, q.queue_id, q.broker), "min offset") or 0

    def max_offset(self, q: Queue) -> int:
        """The offset the queue's next message will get."""
        return self._offset(q, RequestCode.GET_MAX_OFFSET, TopicQueueRequestHeader(q.topic, q.queue_id, q.broker), "max offset") or 0

    def search_offset(self, q: Queue, timestamp_ms: int) -> int:
        """The first offset stored at or after the time (the max offset when none is)."""
        header = SearchOffsetRequestHeader(q.topic, q.queue_id, timestamp_ms, q.broker)
        return self._offset(q, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header, "offset by time") or 0

    def committed_offset(self, q: Queue, group: str) -> int | None:
        """The group's committed offset, None when the group never committed one for the queue."""
        header = QueryConsumerOffsetRequestHeader(group, q.topic, q.queue_id, q.broker)
        return self._offset(q, RequestCode.QUERY_CONSUMER_OFFSET, header, "committed offset",
                            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))

    def commit_offset(self, q: Queue, group: str, offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(group, q.topic, q.queue_id, offset, q.broker)
        self.call(q.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, java_fields(header)),
                  f"commit offset of {q.topic}/{q.key}")

    def pull_request(self, q: Queue, group: str, sub: SubscriptionData, offset: int, max_nums: int) -> RemotingCommand:
        """PULL_MESSAGE carrying its subscription (no heartbeat needed), never suspended."""
        header = PullMessageRequestHeader(
            consumerGroup=group, topic=q.topic, queueId=q.queue_id, queueOffset=offset, maxMsgNums=max_nums,
            sysFlag=FLAG_SUBSCRIPTION, commitOffset=0, suspendTimeoutMillis=0, subscription=sub.sub_string,
            subVersion=sub.sub_version, expressionType=sub.expression_type, bname=q.broker)
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())
        request.fast_keys = header.fast_keys()
        return request

    def pull_range(self, q: Queue, group: str, sub: SubscriptionData, start: int, end: int,
                   max_nums: int = 32, depth: int = 4) -> Iterator[bytes]:
        """Stored records of [start, end) in queue order, one pull answer's body at a time.

        Up to `depth` pulls are in flight on one connection: the next ones ask for the offsets
        the last answer suggests (its advance repeated); an answer is used only when it starts
        exactly where the previous one ended, so records are never skipped or repeated.
        """
        conn = self.conn(q.addr)
        inflight: dict[int, int] = {}  # requested offset -> opaque
        pos, stride = start, max_nums
        try:
            while pos < end:
                ahead = pos
                while len(inflight) < depth and ahead < end:
                    if ahead not in inflight:
                        inflight[ahead] = conn.send(self.pull_request(q, group, sub, ahead, max_nums))
                    ahead += max(stride, 1)
                answer = conn.receive(inflight.pop(pos))
                got = self._pulled(q, answer)
                for off in [o for o in inflight if o < got.next_offset]:
                    conn.receive(inflight.pop(off))  # answered a range already covered: drop it
                if got.status == "found":
                    yield got.body
                if got.next_offset <= pos:
                    if got.status == "none":
                        return  # the queue ends before `end` (truncated): nothing more to read
                    raise WireError(f"pull of {q.topic}/{q.key} at {pos} made no progress ({got.status})", 0, None)
                stride = got.next_offset - pos
                pos = got.next_offset
        finally:
            for opaque in inflight.values():
                try:
                    conn.receive(opaque)
                except (OSError, KeyError):
                    self.conns.pop(q.addr, None)
                    break

    @staticmethod
    def _pulled(q: Queue, answer: RemotingCommand) -> Pulled:
        if answer.code not in PULL_STATUS:
            raise WireError(f"pull of {q.topic}/{q.key}", answer.code, answer.remark)
        f = answer.field
        return Pulled(PULL_STATUS[answer.code], int(f("nextBeginOffset") or 0), int(f("minOffset") or 0),
                      int(f("maxOffset") or 0), answer.body or b"")


def wait_route(cluster: Cluster, topic: str, timeout: float = 10.0) -> list[Queue]:
    """The topic's queues once the NameServer has a route (tests and tools that just created it)."""
    deadline = time.monotonic() + timeout
    while True:
        queues = cluster.queues(topic)
        if queues or time.monotonic() > deadline:
            return queues
        time.sleep(0.05)
