"""The broker's per-message hot path in-process, fed the frames a Java 4.9.8 client sends.

    python benchmarks/hotpath.py [--messages 20000] [--calls]

A broker service runs in this process; one connection (Twisted's in-memory transport, so the
figures are the broker's alone) receives ROCKETMQ-binary SEND_MESSAGE_V2 frames 32 to a read, as
Apache's benchmark Producer multiplexes them, then PULL_MESSAGE frames of 32 messages. Prints CPU
microseconds per sent and per pulled message and, with ``--calls``, Python calls per message (what
``tests/broker/test_call_budget.py`` bounds). Set ``RMQTX_PURE_PYTHON=1`` to measure without the
compiled accelerator.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twisted.internet.address import IPv4Address  # noqa: E402
from twisted.internet.testing import StringTransport  # noqa: E402

from rmqtx.broker.config import BrokerConfig  # noqa: E402
from rmqtx.broker.service import BrokerService  # noqa: E402
from rmqtx.common import fastjson  # noqa: E402
from rmqtx.remoting.codes import RequestCode, ResponseCode, SerializeType  # noqa: E402
from rmqtx.remoting.command import RemotingCommand  # noqa: E402
from rmqtx.remoting.serializer import decode_frame_payload, encode_frame  # noqa: E402

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

    def close(self) -> None:
        self.conn.connectionLost(None)
        self.broker.stopService()
        self.tmp.cleanup()


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


def measure(messages: int, calls: bool) -> dict[str, float]:
    hot = HotPath()
    try:
        feed_all(hot, hot.send_reads(QUEUES * 32))  # warm-up: files, caches, first units of each queue
        ok = sends_ok(hot)
        assert ok == QUEUES * 32, ok
        hot.next_offsets = [32] * QUEUES
        out: dict[str, float] = {}
        reads = hot.send_reads(messages)
        t0 = time.process_time()
        feed_all(hot, reads)
        out["send_us"] = (time.process_time() - t0) / messages * 1e6
        ok = sends_ok(hot)
        assert ok == messages, ok
        rounds = messages // (QUEUES * 32)
        pulls = hot.pull_reads(rounds)
        t0 = time.process_time()
        feed_all(hot, pulls)
        cpu = time.process_time() - t0
        got = pulled(hot)
        out["pull_us"] = cpu / max(got, 1) * 1e6
        assert got == rounds * QUEUES * 32, got
        if calls:
            n = 1024
            reads = hot.send_reads(n)
            out["send_calls"] = count_calls(lambda: feed_all(hot, reads)) / n
            assert sends_ok(hot) == n
            hot.next_offsets = [32 + 32 * rounds] * QUEUES
            pulls = hot.pull_reads(n // (QUEUES * 32))
            out["pull_calls"] = count_calls(lambda: feed_all(hot, pulls)) / n
            assert pulled(hot) == n
        return out
    finally:
        hot.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20480)
    parser.add_argument("--calls", action="store_true", help="also count Python calls per message")
    args = parser.parse_args()
    accel = "pure Python" if os.environ.get("RMQTX_PURE_PYTHON") else "accelerated where built"
    res = measure(args.messages, args.calls)
    print(f"hot path ({accel}): send {res['send_us']:.1f} us/msg, pull {res['pull_us']:.1f} us/msg", end="")
    if args.calls:
        print(f"; calls/msg: send {res['send_calls']:.1f}, pull {res['pull_calls']:.1f}")
    else:
        print()


if __name__ == "__main__":
    main()
