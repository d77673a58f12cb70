"""rmqtx's Python client as the cluster tests drive it, printing the same lines as tests/cluster/java's
ClusterClient until stdin closes:

    python -m tests.cluster.py_client produce NAMESRV TOPIC THREADS PREFIX PAUSE_MS
        keyed sends, ``ACK key broker queue offset`` / ``FAIL key error``
    python -m tests.cluster.py_client consume NAMESRV TOPICS GROUP
        a push consumer, ``MSG topic key broker queue offset``, and ``QUEUES broker:queue ...`` (its share
        of the first topic) when that changes

A consumer's listener holds while the test has written ``pause`` to stdin, until ``resume``.
Route polls, heartbeats, rebalances and offset commits every second, so a broker group leaving and
coming back shows within seconds.
"""

from __future__ import annotations

import sys
import threading

from twisted.internet import defer, reactor, task

from rmqtx.client import ClientConfig, ConsumeStatus, Message, Producer, PushConsumer, SendStatus
from rmqtx.client.consumer import CONSUME_FROM_FIRST_OFFSET

stopping = threading.Event()
paused = threading.Event()
waiting: list[defer.Deferred] = []  # listeners held by "pause"


_out = threading.Lock()


def emit(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def config(namesrv: str) -> ClientConfig:
    return ClientConfig(namesrv, poll_namesrv_interval=1.0, heartbeat_interval=1.0, rebalance_interval=1.0,
                        persist_offset_interval=1.0)


def release() -> None:
    while waiting:
        waiting.pop().callback(None)


def watch_stdin() -> None:
    """The test writes "pause"/"resume" (a consumer holds its listener meanwhile) and closes stdin to stop us."""
    def read() -> None:
        for line in sys.stdin:
            if line.strip() == "pause":
                paused.set()
                emit("PAUSED")
            else:
                paused.clear()
                reactor.callFromThread(release)
                emit("RESUMED")
        paused.clear()
        reactor.callFromThread(release)
        stopping.set()
    threading.Thread(target=read, daemon=True).start()


async def stopped() -> None:
    while not stopping.is_set():
        await task.deferLater(reactor, 0.05, lambda: None)


async def produce(namesrv: str, topic: str, threads: int, prefix: str, pause_ms: int) -> None:
    producer = Producer(f"P_cluster_{prefix}", config=config(namesrv))
    await producer.start()
    emit("STARTED")

    async def sender(thread: int) -> None:
        i = 0
        while not stopping.is_set():
            key = f"{prefix}-{thread}-{i}"
            try:
                r = await producer.send(Message(topic, key.encode(), "TagA", key))
                mq = r.message_queue
                if r.send_status is SendStatus.SEND_OK:
                    emit(f"ACK {key} {mq.broker_name} {mq.queue_id} {r.queue_offset}")
                else:
                    emit(f"FAIL {key} status:{r.send_status.name}")
            except Exception as exc:  # noqa: BLE001 - every failure is a line for the test to count
                emit(f"FAIL {key} {type(exc).__name__}:{str(exc)[:200]!r}")
            i += 1
            await task.deferLater(reactor, pause_ms / 1000, lambda: None)

    senders = [defer.ensureDeferred(sender(t)) for t in range(threads)]
    await stopped()
    await defer.gatherResults(senders)
    await producer.shutdown()


async def consume(namesrv: str, topic: str, group: str) -> None:
    def consumed(_: object, msgs, ctx) -> ConsumeStatus:
        mq = ctx.message_queue
        for m in msgs:
            emit(f"MSG {m.topic} {' '.join(m.keys) or '-'} {mq.broker_name} {mq.queue_id} {m.queue_offset}")
        return ConsumeStatus.CONSUME_SUCCESS

    def listener(msgs, ctx):
        if not paused.is_set():
            return consumed(None, msgs, ctx)
        held: defer.Deferred = defer.Deferred()
        waiting.append(held)
        return held.addCallback(consumed, msgs, ctx)

    consumer = PushConsumer(group, config=config(namesrv), listener=listener, consume_from=CONSUME_FROM_FIRST_OFFSET)
    topics = topic.split(",")
    for t in topics:
        consumer.subscribe(t)
    await consumer.start()
    emit("STARTED")
    last = None
    while not stopping.is_set():
        held = "QUEUES " + " ".join(sorted(f"{mq.broker_name}:{mq.queue_id}" for mq in consumer.pqs if mq.topic == topics[0]))
        if held != last:
            emit(held)
            last = held
        await task.deferLater(reactor, 0.1, lambda: None)
    await consumer.shutdown()


def main(argv: list[str]) -> None:
    watch_stdin()
    mode, namesrv, topic, *rest = argv
    if mode == "produce":
        work = produce(namesrv, topic, int(rest[0]), rest[1], int(rest[2]))
    else:
        work = consume(namesrv, topic, rest[0])
    failed: list[object] = []

    def done(result: object) -> None:
        if result is not None:
            failed.append(result)
            print(result, file=sys.stderr)
        emit("DONE")
        reactor.stop()

    reactor.callWhenRunning(lambda: defer.ensureDeferred(work).addBoth(done))
    reactor.run()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
