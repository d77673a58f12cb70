"""The send lane (``send_lane`` in _accel.c) against its twin, the ordinary send path.

Two brokers in this process get the same reads of frames: one with the lane, one without. Their
answers, commit logs, consume queues, index files, queue offsets and counters must be the same
bytes and numbers. The reads mix what the lane takes (plain SEND_MESSAGE_V2 as Java's clients write
it) with everything it must leave to the ordinary path, and the files are small so that the commit
log, the consume queues and the index roll over while it runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import time
import unittest as pyunit
from typing import Any

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from rmqtx.broker.processors.send_lane import SendLane
from rmqtx.remoting.codes import ONEWAY_FLAG, RequestCode, SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import encode_frame
from testkit.hotpath import QUEUES, TOPIC, HotPath

try:
    from rmqtx import _accel  # the lane, whether or not RMQTX_PURE_PYTHON turned the accelerator off
except ImportError:
    _accel = None

PORT = 10911  # the listen port both brokers write into their records (each really listens on its own)
SMALL_FILES = {"mappedFileSizeCommitLog": str(64 * 1024), "mappedFileSizeConsumeQueue": str(20 * 16),
               "maxIndexNum": "120", "maxHashSlotNum": "16"}


def props(**items: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in items.items())


def send(n: int, topic: str = TOPIC, queue: int = 0, properties: str | None = None, body: bytes = b"x" * 700,
         flag: int = 0, serialize: SerializeType = SerializeType.ROCKETMQ, remark: str | None = None,
         **fields: str) -> bytes:
    """A SEND_MESSAGE_V2 frame as DefaultMQProducer writes it (fields a..n), with overrides."""
    if properties is None:
        properties = props(KEYS=f"KEY_{n}", UNIQ_KEY=f"7F00000100{n:022X}", WAIT="true", TAGS="TagA")
    ext = {"a": "P_lane", "b": topic, "c": "TBW102", "d": "4", "e": str(queue), "f": "0", "g": str(1_764_000_000_000 + n),
           "h": "0", "i": properties, "j": "0", "k": "false", "m": "false", "n": "broker-a"}
    ext.update(fields)
    ext = {k: v for k, v in ext.items() if v is not None}
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=body, opaque=n, remark=remark,
                          serialize_type=serialize, fast_keys=tuple(ext), version=409)
    cmd.flag |= flag
    return encode_frame(cmd)


def reads() -> list[bytes]:
    """Plain sends around every case the lane must leave alone, in reads of several frames. (Not a
    timer message: its recall handle and its delivery follow the wall clock, so the two brokers' would
    differ; test_the_lane_takes_the_plain_sends checks that the lane leaves it alone.)"""
    frames: list[bytes] = []
    n = 0

    def add(**kw: Any) -> None:
        nonlocal n
        n += 1
        frames.append(send(n, **kw))

    for q in range(QUEUES):
        add(queue=q)  # the ordinary path admits the topic, then the lane takes its sends
    odd = [
        dict(properties=props(KEYS="a b  c", TAGS="T", UNIQ_KEY="U1")),
        dict(properties=props(KEYS="clé", TAGS="TagA", WAIT="false", UNIQ_KEY="U2")),  # a non-ASCII value
        dict(properties=props(__SHARDINGKEY="g1", UNIQ_KEY="U3")),  # counted as a FIFO message
        dict(properties=""),
        dict(properties=None, i=None),  # no properties field at all
        dict(properties="KEYS\x01k\x02\x02TAGS\x01t"),  # an empty item, no trailing separator
        dict(properties=props(DELAY="2", UNIQ_KEY="U4")),  # a delay level: the schedule topic
        dict(properties=props(TRAN_MSG="true", PGROUP="P_lane", UNIQ_KEY="U5")),  # a half message
        dict(properties=props(__STARTDELIVERTIME="1764000009000", UNIQ_KEY="U6")),
        dict(properties=props(CLUSTER="other", UNIQ_KEY="U7")),
        dict(properties="KEYS\x01a\x02KEYS\x01b"),  # a name twice
        dict(properties="KEYS\x01\x02TAGS\x01t"),  # an empty value
        dict(properties="TAGS\x01t\x01x"),  # a second separator in an item
        dict(properties=props(TAGS="tâg")),  # a non-ASCII tag
        dict(properties=props(**{f"P{i}": str(i) for i in range(40)})),  # more names than the lane holds
        dict(flag=ONEWAY_FLAG),
        dict(queue=QUEUES + 3),  # out of range: SYSTEM_ERROR
        dict(queue=-1),  # a queue the broker picks
        dict(topic="%RETRY%C_nowhere"),
        dict(topic="T_lane_new"),  # created from TBW102 on first send, then lane
        dict(topic="T_lane_new", queue=1),
        dict(serialize=SerializeType.JSON),
        dict(remark="r"),
        dict(m="true"),  # a batch flag on V2
        dict(f="4"),  # transaction bits in the sys flag
        dict(f="1"),  # the compressed flag: kept
        dict(j="3", h="7"),
        dict(g="x1"),  # a born time that does not parse
        dict(body=b"y" * (5 * 1024 * 1024)),  # over maxMessageSize
        dict(body=b""),
    ]
    cases = iter(odd)
    for i in range(200):
        add(queue=i % QUEUES)
        if i % 6 == 0:
            add(**next(cases, {}))
    assert next(cases, None) is None, "every case was sent"
    return [b"".join(frames[i:i + 5]) for i in range(0, len(frames), 5)]


def frames_of(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        out.append(data[pos:pos + 4 + size])
        pos += 4 + size
    return out


def stop_clocks(hots: list[HotPath]) -> None:
    """The store clock of every broker stopped at now: the same store times in all, and the delayed
    message comes due only seconds later (not while a test waits for syncs)."""
    now = time.time()
    for hot in hots:
        hot.broker.ctx.store.clock = lambda: now


def with_lane(hot: HotPath) -> HotPath:
    """The broker's send lane on; under RMQTX_PURE_PYTHON=1 (the pure env) made here, so that the lane
    is compared with the pure-Python path."""
    processor = hot.broker.dispatcher.processors[RequestCode.SEND_MESSAGE_V2].__self__  # type: ignore[attr-defined]
    if processor.lane is None:
        processor.lane = SendLane(hot.broker.ctx, processor.lane_synced)
        hot.broker.dispatcher.lane = processor.lane.handler(_accel)
    return hot


@pyunit.skipIf(_accel is None, "rmqtx._accel not built (tests/remoting/test_accel.py says whether it should be)")
class SendLaneTest(unittest.TestCase):
    timeout = 120

    def setUp(self) -> None:
        self.hots = [with_lane(HotPath(**SMALL_FILES)), HotPath(**SMALL_FILES)]
        stop_clocks(self.hots)
        for hot in self.hots:
            hot.broker.config.update(listenPort=PORT)
        self.hots[1].broker.dispatcher.lane = None

    def tearDown(self):
        return defer.gatherResults([hot.close() for hot in self.hots])

    def feed(self, hot: HotPath, data: list[bytes]) -> bytes:
        random.seed(7)  # a send without a queue id gets a random one: the same in both
        out = b""
        for chunk in data:
            hot.feed(chunk)
            hot.broker.ctx.store.wait_for_file_jobs()
            out += hot.transport.value()
            hot.transport.clear()
        return out

    def state(self, hot: HotPath) -> dict[str, Any]:
        store = hot.broker.ctx.store
        out: dict[str, Any] = {
            "commitlog": [bytes(mf.mm[:mf.wrote]) for mf in store.commitlog.queue.files],
            "queue_offsets": dict(store.commitlog.topic_queue_table),
            "last_store_ts": store.commitlog.last_store_timestamp,
            "dispatched_ts": store.pipeline.dispatched_ts,
            "times": (list(store.times.counts), list(store.times.latency)),
            "messages_in": dict(hot.broker.ctx.stats.messages_in),
        }
        for key, cq in sorted(store.consume_queues.items()):
            out[f"cq {key}"] = ([bytes(mf.mm[:mf.wrote]) for mf in cq.queue.files], cq.max_physic_offset)
        for i, f in enumerate(store.index.files):
            used = 40 + f.slot_num * 4 + f.index_count * 20
            out[f"index {i}"] = hashlib.sha256(f.mm[:used]).hexdigest()
        return out

    def test_the_lane_leaves_what_the_ordinary_path_leaves(self) -> None:
        data = reads()
        answers = [self.feed(hot, data) for hot in self.hots]
        self.assertEqual(answers[0], answers[1])
        with_lane, without = (self.state(hot) for hot in self.hots)
        self.assertEqual(with_lane.keys(), without.keys())
        for key in with_lane:
            self.assertEqual(with_lane[key], without[key], key)
        self.assertGreater(len(with_lane["commitlog"]), 3)  # the commit log rolled over
        self.assertGreater(len([k for k in with_lane if k.startswith("index")]), 1)  # and the index
        self.assertGreater(max(len(v[0]) for k, v in with_lane.items() if k.startswith("cq")), 1)  # and queues

    async def _under_sync_flush(self) -> None:
        hots = [with_lane(HotPath(flushDiskType="SYNC_FLUSH", **SMALL_FILES)), HotPath(flushDiskType="SYNC_FLUSH", **SMALL_FILES)]
        self.hots += hots
        hots[1].broker.dispatcher.lane = None
        data = reads()
        answers = []
        stop_clocks(hots)
        for hot in hots:
            hot.broker.config.update(listenPort=PORT)
            out = self.feed(hot, data)
            store = hot.broker.ctx.store
            deadline = time.time() + 30
            while time.time() < deadline and store.commitlog.queue.flushed_where < store.commitlog.max_offset:
                await task.deferLater(reactor, 0.01, lambda: None)
            await task.deferLater(reactor, 0.05, lambda: None)  # the last sync's answers
            out += hot.transport.value()
            hot.transport.clear()
            answers.append(sorted(frames_of(out)))
        self.assertEqual(answers[0], answers[1])
        self.assertEqual(len(answers[0]), sum(len(frames_of(chunk)) for chunk in data) - 1)  # all but the oneway one
        states = [self.state(hot) for hot in hots]
        self.assertEqual(states[0].keys(), states[1].keys())
        for key in states[0]:
            self.assertEqual(states[0][key], states[1][key], key)

    def test_under_sync_flush(self):
        """The same under SYNC_FLUSH, where the lane's answers wait for the group commit as the
        ordinary path's do (in another order than they were sent: sorted here)."""
        return defer.ensureDeferred(self._under_sync_flush())

    def test_the_lane_takes_the_plain_sends(self) -> None:
        hot = with_lane(HotPath())  # files of the default sizes: no roll in the way
        self.hots.append(hot)
        self.feed(hot, [b"".join(send(q + 1, queue=q) for q in range(QUEUES))])  # the topic admitted, the queues made
        lane = hot.broker.dispatcher.lane
        calls = {"taken": 0}

        def counting(payload: bytes, conn: Any) -> bytes | None:
            answer = lane(payload, conn)
            calls["taken"] += answer is not None
            return answer

        hot.broker.dispatcher.lane = counting
        self.feed(hot, [b"".join(send(n, queue=n % QUEUES) for n in range(10, 42))])
        self.assertEqual(calls["taken"], 32)
        for key in ("TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS"):  # timer messages: the ordinary way
            self.feed(hot, [send(50, properties=props(**{key: "3000"}, UNIQ_KEY="T"))])
        self.assertEqual(calls["taken"], 32)
        # the topic updated (a new TopicConfig): the ordinary path's first send admits it again
        table = hot.broker.ctx.topics.table
        table[TOPIC] = dataclasses.replace(table[TOPIC])
        self.feed(hot, [b"".join(send(n, queue=0) for n in range(60, 63))])
        self.assertEqual(calls["taken"], 34)
