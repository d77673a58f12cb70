"""The live clients mqadmin looks at: a producer that stays up and a push consumer, one JSON line per event.

Usage: python mqadmin_clients.py NAMESRV TOPIC PRODUCER_GROUP CONSUMER_GROUP COUNT HOME
Sends COUNT messages (body ``body-<i>``, tag TagA/TagB, key ``K-<i>``, property ``seq``), prints a
``sent`` line each, starts the consumer, prints ``recv`` lines, then ``ready`` once everything came
back, and keeps both clients connected until its stdin closes (so producerConnection,
consumerConnection and consumerStatus see them). Run as a subprocess: the test process may be
trial's reactor thread, where rmqtx's blocking client cannot run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from twisted.internet import defer, task, threads


def emit(kind: str, **fields: Any) -> None:
    print(json.dumps({"kind": kind, **fields}), flush=True)


async def main(reactor: Any, namesrv: str, topic: str, pgroup: str, cgroup: str, count: str, home: str) -> None:
    from rmqtx.client import ConsumeStatus, Message, Producer, PushConsumer

    producer = Producer(pgroup, namesrv)
    await producer.start()
    for i in range(int(count)):
        msg = Message(topic, f"body-{i}", "TagA" if i % 2 == 0 else "TagB", f"K-{i}", properties={"seq": str(i)})
        result = await producer.send(msg)
        emit("sent", i=i, msg_id=result.msg_id, offset_msg_id=result.offset_msg_id, queue_id=result.message_queue.queue_id,
             queue_offset=result.queue_offset, at=int(time.time() * 1000))
    received: set[str] = set()

    def listener(msgs, ctx):
        for m in msgs:
            received.add(m.body.decode())
            emit("recv", body=m.body.decode(), queue_id=m.queue_id, queue_offset=m.queue_offset)
        return ConsumeStatus.CONSUME_SUCCESS

    # pulls held 2 s, not 15: mqadmin's checkMsgSendRT sends untagged messages to every queue, which
    # "TagA || TagB" skips; a held pull wakes only for a matching message, so a queue's offset passes
    # them only when its hold ends (Java's broker does the same), and the test waits for that
    consumer = PushConsumer(cgroup, namesrv, listener=listener, consume_from="CONSUME_FROM_FIRST_OFFSET",
                            suspend_timeout=2.0, offset_store_dir=os.path.join(home, "offsets"))
    consumer.subscribe(topic, "TagA || TagB")
    await consumer.start()
    deadline = time.monotonic() + 30
    while len(received) < int(count) and time.monotonic() < deadline:
        await task.deferLater(reactor, 0.1, lambda: None)
    await consumer.persist_offsets()  # consumerProgress then reads the offsets at once
    emit("ready", received=len(received))
    await threads.deferToThread(sys.stdin.read)  # until the test closes our stdin
    await consumer.shutdown()
    await producer.shutdown()
    emit("stopped")


if __name__ == "__main__":
    task.react(lambda reactor, *args: defer.ensureDeferred(main(reactor, *args)), sys.argv[1:7])
