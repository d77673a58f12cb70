"""Scenarios driven through the Apache C++ client (PyPI ``rocketmq``); one JSON line per event.

Usage: python cpp_client.py SCENARIO NAMESRV TOPIC GROUP [ARGS...]
Run as a subprocess by the tests so a hung or crashing client cannot take the test run down.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq.client import Message, MessageModel, Producer, PullConsumer, PushConsumer
from rocketmq.exceptions import ProducerSendSyncFailed


def text(value: bytes | str | None) -> str:
    """The client returns str or bytes depending on the field."""
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def emit(**event) -> None:
    print(json.dumps(event), flush=True)


def message(topic: str, body: str, tags: str | None = None, keys: str | None = None, **props: str) -> Message:
    msg = Message(topic)
    msg.set_body(body)
    if tags:
        msg.set_tags(tags)
    if keys:
        msg.set_keys(keys)
    for name, value in props.items():
        msg.set_property(name, value)
    return msg


def produce(namesrv: str, topic: str, group: str, count: str = "8", prefix: str = "") -> None:
    """Sync sends with tags TagA/TagB/TagC, oneway sends, a batch, and orderly sends by key."""
    producer = Producer(group, timeout=5000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    n = int(count)
    tags = ("TagA", "TagB", "TagC")
    for i in range(n):
        result = producer.send_sync(message(topic, f"{prefix}sync-{i}", tags[i % 3], f"{prefix}key-sync-{i}", seq=str(i)))
        emit(kind="sync", i=i, status=int(result.status), msg_id=result.msg_id, offset=result.offset)
    for i in range(n):
        producer.send_oneway(message(topic, f"{prefix}oneway-{i}", "TagA", f"{prefix}key-oneway-{i}"))
        emit(kind="oneway", i=i)
    batch = [message(topic, f"{prefix}batch-{i}", "TagB", f"{prefix}key-batch-{i}") for i in range(3)]
    result = producer.send_batch(batch)
    emit(kind="batch", status=int(result.status), msg_id=result.msg_id, offset=result.offset)
    for i in range(n):
        result = producer.send_orderly(message(topic, f"{prefix}orderly-{i}", "TagC", f"{prefix}key-orderly-{i}"), i % 2)
        emit(kind="orderly", i=i, status=int(result.status), msg_id=result.msg_id, offset=result.offset)
    producer.shutdown()


def stdin_closed(event: threading.Event | None = None) -> threading.Event:
    """Set when stdin reaches EOF: a test closes it once it has seen what it waited for."""
    closed = event or threading.Event()

    def read() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=read, daemon=True).start()
    return closed


def push(namesrv: str, topic: str, group: str, expression: str, model: str, expect: str, seconds: str, instance: str = "c1",
         until: str = "expect") -> None:
    """Push consumer; stops when ``expect`` messages arrived (or, with ``until`` "stdin", also when
    stdin closes: members of one group that split the messages) or after ``seconds``."""
    got = threading.Event()
    if until == "stdin":
        stdin_closed(got)
    lock = threading.Lock()
    seen: list[str] = []
    consumer = PushConsumer(group, message_model=MessageModel[model])
    consumer.set_namesrv_addr(namesrv)
    consumer.set_instance_name(instance)

    def on_message(msg) -> None:
        try:
            record(msg)
        except Exception as exc:  # surface it: the C++ client only logs "consume failed"
            emit(kind="error", error=repr(exc))
            raise

    def record(msg) -> None:
        with lock:
            body = text(msg.body)
            if not body.startswith("probe-"):  # the tests' readiness probes do not count
                seen.append(body)
            emit(kind="recv", body=body, tags=text(msg.tags), keys=text(msg.keys),
                 queue_id=msg.queue_id, queue_offset=msg.queue_offset, topic=text(msg.topic), reconsume=msg.reconsume_times)
            if len(seen) >= int(expect):
                got.set()

    consumer.subscribe(topic, on_message, expression)
    consumer.start()
    got.wait(float(seconds))
    time.sleep(1.0)  # let a second consumer of the group settle and duplicates show
    consumer.shutdown()
    emit(kind="done", count=len(seen))


def pull(namesrv: str, topic: str, group: str, expression: str = "*") -> None:
    consumer = PullConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.start()
    count = 0
    for msg in consumer.pull(topic, expression):
        count += 1
        emit(kind="recv", body=text(msg.body), tags=text(msg.tags), queue_id=msg.queue_id,
             queue_offset=msg.queue_offset)
    consumer.shutdown()
    emit(kind="done", count=count)


def delayed(namesrv: str, topic: str, group: str) -> None:
    """Send level-1 and level-2 messages to a running consumer; report send and receive times."""
    producer = Producer("P_" + group, timeout=5000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    producer.send_sync(message(topic, "warm-up"))  # creates the topic before the consumer looks for it
    arrived = threading.Event()
    got: dict[str, float] = {}

    ready = threading.Event()

    def on_message(msg) -> None:
        body = text(msg.body)
        if body == "warm-up":
            ready.set()
        if body.startswith("level-"):
            got[body] = time.time()
            emit(kind="recv", body=body, at=got[body], delay_level=msg.delay_time_level)
            if len(got) == 2:
                arrived.set()

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message)
    consumer.start()
    if not ready.wait(30):  # the consumer got the warm-up: it is subscribed and pulling
        emit(kind="error", error="the consumer never got the warm-up message")
    for level in (1, 2):
        msg = message(topic, f"level-{level}", "TagD")
        msg.set_delay_time_level(level)
        emit(kind="sent", body=f"level-{level}", at=time.time(), status=int(producer.send_sync(msg).status))
    arrived.wait(30)
    consumer.shutdown()
    producer.shutdown()


def failing_once(namesrv: str, topic: str, group: str, expect: str, seconds: str) -> None:
    """The listener fails every first delivery (reconsumeTimes 0); the broker must bring each back.

    The C++ client may also send back the rest of a failed batch without calling the listener,
    so a message can show up for the first time with reconsumeTimes 1.
    """
    retried: set[str] = set()
    done = threading.Event()
    lock = threading.Lock()

    def on_message(msg) -> None:
        body = text(msg.body)
        with lock:
            emit(kind="recv", body=body, reconsume=msg.reconsume_times, topic=text(msg.topic), at=time.time())
            if msg.reconsume_times == 0:
                raise RuntimeError("fail the first delivery")
            retried.add(body)
            if len(retried) >= int(expect):
                done.set()

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message)
    consumer.start()
    done.wait(float(seconds))
    time.sleep(0.5)
    consumer.shutdown()


def orderly_produce(namesrv: str, topic: str, keys: str, per_key: str) -> None:
    producer = Producer("P_order_" + topic, timeout=5000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    for seq in range(int(per_key)):
        for key in range(int(keys)):
            result = producer.send_orderly(message(topic, f"k{key}-{seq}", "TagO"), key)
            emit(kind="sent", key=key, seq=seq, status=int(result.status))
    producer.shutdown()


def orderly_consume(namesrv: str, topic: str, group: str, seconds: str, instance: str, until: str = "seconds") -> None:
    """Consumes for ``seconds``; with ``until`` "stdin", until stdin closes (then 1 s more, for late
    duplicates and reorderings to show) or ``seconds`` at most."""
    consumer = PushConsumer(group, orderly=True)
    consumer.set_namesrv_addr(namesrv)
    consumer.set_instance_name(instance)

    def on_message(msg) -> None:
        emit(kind="recv", body=text(msg.body), queue_id=msg.queue_id, at=time.time())

    consumer.subscribe(topic, on_message)
    consumer.start()
    if until == "stdin":
        stdin_closed().wait(float(seconds))
        time.sleep(1.0)
    else:
        time.sleep(float(seconds))
    consumer.shutdown()


def member(namesrv: str, topic: str, group: str, instance: str) -> None:
    """A CLUSTERING push consumer (consume from first offset) that runs until its stdin closes, then
    shuts down, which commits its offsets; prints ``ready`` once started."""
    lock = threading.Lock()
    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.set_instance_name(instance)

    def on_message(msg) -> None:
        with lock:
            emit(kind="recv", body=text(msg.body), queue_id=msg.queue_id, queue_offset=msg.queue_offset,
                 reconsume=msg.reconsume_times, member=instance)

    consumer.subscribe(topic, on_message)
    consumer.start()
    emit(kind="ready", member=instance)
    sys.stdin.read()
    consumer.shutdown()
    emit(kind="done", member=instance)


def send_n(namesrv: str, topic: str, group: str, count: str, prefix: str) -> None:
    """``count`` synchronous sends of bodies ``{prefix}{i}``.

    The client fails a send with "No route info" when its route lookup timed out (a loaded test
    machine); nothing was stored then, so that one error is retried a few times, and reported.
    """
    producer = Producer(group, timeout=5000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    for i in range(int(count)):
        for attempt in range(5):
            try:
                result = producer.send_sync(message(topic, f"{prefix}{i}", "TagA", f"{prefix}key-{i}"))
                break
            except ProducerSendSyncFailed as exc:
                if "No route info" not in str(exc) or attempt == 4:
                    raise
                emit(kind="route_retry", body=f"{prefix}{i}", error=str(exc))
                time.sleep(1.0)
        emit(kind="sent", body=f"{prefix}{i}", status=int(result.status), offset=result.offset)
    producer.shutdown()


if __name__ == "__main__":
    scenario, *args = sys.argv[1:]
    {
        "produce": produce,
        "push": push,
        "pull": pull,
        "delayed": delayed,
        "failing_once": failing_once,
        "orderly_produce": orderly_produce,
        "orderly_consume": orderly_consume,
        "member": member,
        "send_n": send_n,
    }[scenario](*args)
