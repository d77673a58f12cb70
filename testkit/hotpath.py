"""An in-process broker fed the frames a Java 4.9.8 client sends, for the hot-path benchmark and call budget.

One connection (Twisted's in-memory transport, so only the broker's work is counted) receives
ROCKETMQ-binary SEND_MESSAGE_V2 frames 32 to a read, as Apache's benchmark Producer multiplexes
them over one connection, and PULL_MESSAGE frames of 32 messages as a push consumer sends them.
"""

from __future__ import annotations

import cProfile
import pstats
import tempfile
import time

from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.service import BrokerService
from rmqtx.common import fastjson
from rmqtx.remoting.codes import RequestCode, ResponseCode, SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import decode_frame_payload, encode_frame

TOPIC = "T_hot"
GROUP = "C_hot"
QUEUES = 8
BODY = b"x" * 1024
PER_READ = 32


def send_frame(n: int, born_ms: int) -> bytes:
    """SEND_MESSAGE_V2 as DefaultMQProducer writes it in ROCKETMQ binary (fields a..n in its order)."""
    props = f"KEYS\x01KEY_{n}\x02UNIQ_KEY\x017F0000010001{n:020X}\x02WAIT\x01true\x02TAGS\x01TagA"
    ext = {"a": "P_hot", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(n % QUEUES), "f": "0", "g": str(born_ms),
           "h": "0", "i": props, "j": "0", "k": "false", "m": "false", "n": "broker-a"}
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=BODY, opaque=n,
                          serialize_type=SerializeType.ROCKETMQ, fast_keys=tuple(ext), version=409)
    return encode_frame(cmd)


def pull_frame(n: int, queue_id: int, offset: int) -> bytes:
    """PULL_MESSAGE as a push consumer writes it (suspend + commit flags, 32 messages)."""
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": "3", "commitOffset": str(offset), "suspendTimeoutMillis": "15000",
           "subVersion": "1", "expressionType": "TAG", "bname": "broker-a"}
    cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext, opaque=n,
                          serialize_type=SerializeType.ROCKETMQ, fast_keys=tuple(ext), version=409)
    return encode_frame(cmd)


def setup_frames() -> bytes:
    """Create the topic and register a consumer of it, as mqadmin and a heartbeat do."""
    create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}, opaque=1_000_000)
    sub = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*", "subVersion": 1,
           "tagsSet": [], "topic": TOPIC}
    heartbeat = {"clientID": "127.0.0.1@hot", "consumerDataSet": [{
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY", "groupName": GROUP,
        "messageModel": "CLUSTERING", "subscriptionDataSet": [sub], "unitMode": False}], "producerDataSet": []}
    hb = RemotingCommand.request(RequestCode.HEART_BEAT, None, fastjson.dumps(heartbeat), opaque=1_000_001)
    return encode_frame(create) + encode_frame(hb)


class HotPath:
    """A broker and one client connection to it, fed whole reads of frames."""

    def __init__(self, **conf: str) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-hot-")
        config = BrokerConfig.from_properties({
            "listenAddress": "127.0.0.1", "brokerIP1": "127.0.0.1", "listenPort": "0",
            "storePathRootDir": f"{self.tmp.name}/store", "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
            "flushDiskType": "ASYNC_FLUSH", **conf})
        self.broker = BrokerService(config)
        self.broker.startService()
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
        self.conn = self.broker.factory.buildProtocol(self.transport.getPeer())
        self.conn.makeConnection(self.transport)
        self.feed(setup_frames())
        for resp in self.answers():
            assert not resp.is_response or resp.code == ResponseCode.SUCCESS, resp
        self.sent = 0
        self.next_offsets = [0] * QUEUES

    def feed(self, data: bytes) -> None:
        self.conn.dataReceived(data)

    def answers(self) -> list[RemotingCommand]:
        """The frames the broker wrote since the last call."""
        data = self.transport.value()
        self.transport.clear()
        out, pos = [], 0
        while pos < len(data):
            size = int.from_bytes(data[pos:pos + 4], "big")
            out.append(decode_frame_payload(data[pos + 4:pos + 4 + size]))
            pos += 4 + size
        return out

    def send_reads(self, count: int) -> list[bytes]:
        """``count`` messages as reads of PER_READ frames, numbered on from the last call."""
        born = int(time.time() * 1000)
        frames = [send_frame(self.sent + i, born) for i in range(count)]
        self.sent += count
        return [b"".join(frames[i:i + PER_READ]) for i in range(0, count, PER_READ)]

    def pull_reads(self, rounds: int) -> list[bytes]:
        """One pull per queue per round from where the last answers left off (32 messages each)."""
        reads, n = [], 2_000_000
        for r in range(rounds):
            frames = []
            for q in range(QUEUES):
                frames.append(pull_frame(n, q, self.next_offsets[q] + 32 * r))
                n += 1
            reads.append(b"".join(frames))
        return reads

    def close(self) -> "defer.Deferred[None]":
        """Stop the broker (the Deferred fires once its store is shut down) and remove the store."""
        self.conn.transport.loseConnection()
        self.conn.connectionLost(None)
        d = defer.maybeDeferred(self.broker.stopService)
        d.addBoth(lambda result: (self.tmp.cleanup(), result)[1])
        return d


def count_calls(fn) -> int:
    """Python function calls (C builtins included) that ``fn()`` makes, as cProfile counts them."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    return pstats.Stats(prof).total_calls  # type: ignore[attr-defined]


def feed_all(hot: HotPath, reads: list[bytes]) -> None:
    for data in reads:
        hot.feed(data)


def sends_ok(hot: HotPath) -> int:
    """How many SUCCESS answers the broker wrote since the last look."""
    return sum(1 for r in hot.answers() if r.code == ResponseCode.SUCCESS)


def pulled(hot: HotPath) -> int:
    """How many messages the FOUND answers written since the last look carried."""
    got = 0
    for resp in hot.answers():
        if resp.code == ResponseCode.SUCCESS:
            got += count_records(resp.body)
    return got


def count_records(body: bytes) -> int:
    n = pos = 0
    while pos < len(body):
        pos += int.from_bytes(body[pos:pos + 4], "big")
        n += 1
    return n




def warm_up(hot: HotPath) -> None:
    """32 messages into every queue: files made, caches filled, the consumer's first pulls answered."""
    feed_all(hot, hot.send_reads(QUEUES * 32))
    ok = sends_ok(hot)
    assert ok == QUEUES * 32, ok
    hot.broker.ctx.store.wait_for_file_jobs()  # new queues' and the index's first files are made in a thread
    feed_all(hot, hot.pull_reads(1))
    got = pulled(hot)
    assert got == QUEUES * 32, got
    hot.next_offsets = [32] * QUEUES


def calls_per_message(hot: HotPath, messages: int = 1024) -> tuple[float, float]:
    """Python calls per sent message and per pulled message (pulls of 32) on a warmed-up broker."""
    reads = hot.send_reads(messages)
    send_calls = count_calls(lambda: feed_all(hot, reads)) / messages
    ok = sends_ok(hot)
    assert ok == messages, ok
    pulls = hot.pull_reads(messages // (QUEUES * 32))
    pull_calls = count_calls(lambda: feed_all(hot, pulls)) / messages
    got = pulled(hot)
    assert got == messages, got
    hot.next_offsets = [o + messages // QUEUES for o in hot.next_offsets]
    return send_calls, pull_calls
