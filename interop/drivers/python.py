"""rmqtx's own client (``rmqtx.client``) as a column; ``python -m interop.drivers.python OP PARAMS`` runs one cell.

Admin calls the client's MQAdmin lacks (topic list, runtime info, consume stats) go through its
client instance as raw requests, the way Java's DefaultMQAdminExt sends them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from typing import Any, Callable

from twisted.internet import defer, task

from interop.drivers.base import Driver
from interop.scenarios import body_bytes, timer_due_s


class PythonDriver(Driver):
    name = "python"

    def command(self, op: str, params: dict) -> list[str]:
        return [sys.executable, "-m", "interop.drivers.python", op, json.dumps(params)]


# -- the cell program (imports the client only here, so the runner stays light) -----------------
def config(p: dict, **extra: Any):
    """A fresh client config: the cell's name server, and the ACL keys (``acl``) and TLS (``tls``) it asks for."""
    from rmqtx.client.config import ClientConfig

    keys = p.get("acl") or {}
    return ClientConfig(p["namesrv"], access_key=keys.get("access_key"), secret_key=keys.get("secret_key"),
                        tls=bool(p.get("tls")), **extra)


def emit(kind: str, **fields: Any) -> None:
    print(json.dumps({"kind": kind, **fields}), flush=True)


def sleep(seconds: float) -> defer.Deferred:
    from twisted.internet import reactor

    return task.deferLater(reactor, seconds, lambda: None)


async def until(done: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        await sleep(0.1)
    return done()


def message(p: dict, spec: dict):
    from rmqtx.client import Message

    msg = Message(p["topic"], body_bytes(spec), spec.get("tags"), spec.get("keys") or None,
                  properties=spec.get("props"), delay_level=spec.get("delay", 0))
    timer = spec.get("timer") or {}
    if "delay_ms" in timer:
        msg.delay_time_ms = timer["delay_ms"]
    if "delay_sec" in timer:
        msg.delay_time_sec = timer["delay_sec"]
    if "deliver_in_ms" in timer:
        msg.deliver_time_ms = int(time.time() * 1000) + timer["deliver_in_ms"]
    return msg


def sent(spec: dict, at: float, result: Any = None) -> None:
    status = result.send_status.name if result is not None else None
    emit("sent", body=spec["body"], at=at, status=status, msg_id=getattr(result, "msg_id", None),
         offset_msg_id=getattr(result, "offset_msg_id", None),
         queue_id=result.message_queue.queue_id if result is not None else None,
         queue_offset=result.queue_offset if result is not None else None)


def recv_event(p: dict, m: Any, member: int, **extra: Any) -> dict:
    """A ``recv`` event as interop/scenarios.py describes it."""
    label = m.body.split(b"#", 1)[0].decode("utf-8", "replace")
    event = {"kind": "recv", "body": label, "tags": m.tags, "keys": m.keys, "topic": m.topic, "queue_id": m.queue_id,
             "queue_offset": m.queue_offset, "reconsume": m.reconsume_times, "member": member, "at": time.time(), **extra}
    if len(m.body) > 1024:
        event.update(size=len(m.body), sha256=hashlib.sha256(m.body).hexdigest())
    names = {name for spec in p.get("messages", []) for name in spec.get("props") or {}}
    if names:
        event["props"] = {name: m.properties.get(name) for name in names}
    print(json.dumps(event), flush=True)
    return event


class Members:
    """Push consumers of one group in this process; what each receives becomes ``recv`` events."""

    def __init__(self, p: dict, count: int = 1, *, model: str = "CLUSTERING", orderly: bool = False,
                 fail: Callable[[Any], bool] = lambda m: False, max_reconsume: int = 16, base: int = 0,
                 group: str | None = None, topic: str | None = None, then: Callable[[Any], Any] | None = None) -> None:
        from rmqtx.client import PushConsumer

        self.bodies: dict[int, list[str]] = {i: [] for i in range(base, base + count)}
        self.events: list[dict] = []
        self.consumers = []
        self.then = then
        self.home = tempfile.mkdtemp(prefix="offsets-")
        group, topic = group or p["group"], topic or p["topic"]
        for i in range(base, base + count):
            consumer = PushConsumer(group, config=config(p, instance_name=f"{group}-{i}"),
                                    listener=self._listener(i, p, orderly, fail), orderly=orderly,
                                    message_model=model, consume_from="CONSUME_FROM_FIRST_OFFSET",
                                    max_reconsume_times=max_reconsume, offset_store_dir=self.home)
            consumer.subscribe(topic, p.get("expression", "*"), p.get("expression_type", "TAG"))
            self.consumers.append(consumer)

    def _listener(self, member: int, p: dict, orderly: bool, fail: Callable[[Any], bool]):
        from rmqtx.client import ConsumeStatus, OrderlyStatus

        def listener(msgs, ctx):
            failed = False
            for m in msgs:
                event = recv_event(p, m, member)
                self.events.append(event)
                self.bodies[member].append(event["body"])
                failed = failed or fail(m)
                if self.then is not None:
                    self.then(m)
            if orderly:
                return OrderlyStatus.SUCCESS
            return ConsumeStatus.RECONSUME_LATER if failed else ConsumeStatus.CONSUME_SUCCESS

        return listener

    def has(self, bodies: list[str], member: int | None = None) -> bool:
        got = {b for i, seen in self.bodies.items() if member in (None, i) for b in seen}
        return set(bodies) <= got

    async def start(self) -> None:
        for consumer in self.consumers:
            await consumer.start()

    async def stop(self) -> None:
        for consumer in self.consumers:
            await consumer.shutdown()


async def producer(p: dict, retries: int = 2):
    from rmqtx.client import Producer

    prod = Producer(p["producer_group"], config=config(p), retry_times=retries)
    await prod.start()
    return prod


async def send_all(prod: Any, p: dict, mode: str = "sync", key: str = "messages") -> None:
    specs = p[key]
    if mode == "sync":
        for spec in specs:
            at = time.time()
            sent(spec, at, await prod.send(message(p, spec)))
    elif mode == "async":
        at = time.time()
        results = await defer.gatherResults([prod.send(message(p, spec)) for spec in specs], consumeErrors=True)
        for spec, result in zip(specs, results):
            sent(spec, at, result)
    elif mode == "oneway":
        for spec in specs:
            at = time.time()
            await prod.send_oneway(message(p, spec))
            sent(spec, at)
    elif mode == "batch":
        at = time.time()
        result = await prod.send_batch([message(p, spec) for spec in specs])
        for spec in specs:
            sent(spec, at, result)


def bodies(p: dict, key: str = "messages") -> list[str]:
    return [m["body"] for m in p[key]]


# -- operations ---------------------------------------------------------------------------------
async def op_send(p: dict) -> None:
    prod = await producer(p)
    await send_all(prod, p, p["mode"])
    members = Members(p)
    await members.start()
    await until(lambda: members.has(bodies(p)), p["wait"])
    await members.stop()
    await prod.shutdown()


async def op_consume(p: dict) -> None:
    members = Members(p, p["members"], model=p["model"])
    await members.start()
    await sleep(p["settle"])
    prod = await producer(p)
    await send_all(prod, p)
    want = bodies(p, "expect" if "expect" in p else "messages")
    if p["model"] == "BROADCASTING":
        await until(lambda: all(members.has(want, i) for i in range(p["members"])), p["wait"])
    else:
        await until(lambda: members.has(want), p["wait"])
    await sleep(p["linger"])
    await members.stop()
    await prod.shutdown()


async def op_orderly(p: dict) -> None:
    members = Members(p, orderly=True)
    await members.start()
    await sleep(p["settle"])
    prod = await producer(p)
    await send_sharded(prod, p)
    await until(lambda: members.has(bodies(p)), p["wait"])
    await members.stop()
    await prod.shutdown()


async def send_sharded(prod: Any, p: dict) -> None:
    """Each spec to queue ``shard`` of the topic."""
    for spec in p["messages"]:
        at = time.time()
        result = await prod.send(message(p, spec), selector=lambda mqs, msg, arg: mqs[arg % len(mqs)], arg=spec["shard"])
        sent(spec, at, result)


async def op_delay(p: dict) -> None:
    members = Members(p)
    await members.start()
    await sleep(p["settle"])
    prod = await producer(p)
    await send_all(prod, p)
    await until(lambda: members.has(bodies(p)), p["wait"] + max(p["levels"][m["delay"] - 1] for m in p["messages"]))
    await members.stop()
    await prod.shutdown()


async def op_timer(p: dict) -> None:
    members = Members(p)
    await members.start()
    await sleep(p["settle"])
    prod = await producer(p)
    await send_all(prod, p)
    await until(lambda: members.has(bodies(p)), p["wait"] + max(timer_due_s(m) for m in p["messages"]))
    await members.stop()
    await prod.shutdown()


async def op_retry(p: dict) -> None:
    prod = await producer(p)
    await send_all(prod, p)
    members = Members(p, fail=lambda m: m.reconsume_times == 0)
    await members.start()
    await until(lambda: all(any(e["body"] == b and e["reconsume"] >= 1 for e in members.events) for b in bodies(p)), p["wait"])
    await members.stop()
    await prod.shutdown()


async def op_pop(p: dict) -> None:
    """rmqtx's PopConsumer: refuse each ``fail_once`` spec once (its invisible time cut to 1 s), ack the rest."""
    from rmqtx.client import PopConsumer
    from rmqtx.client.config import ClientConfig

    prod = await producer(p)
    await send_all(prod, p)
    consumer = PopConsumer(p["group"], config=ClientConfig(p["namesrv"], instance_name=f"{p['group']}-0"))
    await consumer.start()
    refuse = set(bodies(p, "fail_once"))
    events: list[dict] = []

    def done() -> bool:
        seen = {(e["body"], e["reconsume"]) for e in events}
        return {b for b, _ in seen} >= set(bodies(p)) and all((b, 1) in seen for b in refuse)

    deadline = time.monotonic() + p["wait"]
    while not done() and time.monotonic() < deadline:
        for m in await consumer.receive(p["topic"], invisible_time=30, poll_time=2, from_first=True):
            event = recv_event(p, m, 0)
            events.append(event)
            if event["body"] in refuse and m.reconsume_times == 0:
                await consumer.change_invisible_time(m, 1.0)
            else:
                await consumer.ack(m)
    await sleep(p["linger"])
    await consumer.shutdown()
    await prod.shutdown()


async def op_dlq(p: dict) -> None:
    prod = await producer(p)
    await send_all(prod, p)
    limit = p["max_reconsume"]
    emit("config", max_reconsume=limit)
    members = Members(p, fail=lambda m: True, max_reconsume=limit)
    await members.start()
    await until(lambda: all(any(e["body"] == b and e["reconsume"] >= limit for e in members.events) for b in bodies(p)), p["wait"])
    await sleep(p["linger"])
    await members.stop()
    await prod.shutdown()


async def op_transaction(p: dict) -> None:
    from rmqtx.client import TransactionState
    from rmqtx.client.producer import TransactionProducer

    specs = {m["body"]: m for m in p["messages"]}

    async def execute(msg, arg):
        await sleep(p["hold"])
        state = TransactionState[specs[msg.body.decode()]["local"]]
        emit("local", body=msg.body.decode(), state=state.name, at=time.time())
        return state

    def check(msg):
        state = TransactionState[specs[msg.body.decode()]["check"] or "UNKNOW"]
        emit("checked", body=msg.body.decode(), state=state.name, at=time.time())
        return state

    members = Members(p)
    await members.start()
    prod = TransactionProducer(p["producer_group"], config=config(p), execute=execute, check=check)
    await prod.start()
    at = time.time()
    results = await defer.gatherResults([prod.send_in_transaction(message(p, spec)) for spec in specs.values()], consumeErrors=True)
    for spec, result in zip(specs.values(), results):
        sent(spec, at, result.send_result)
    want = [m["body"] for m in specs.values() if "COMMIT_MESSAGE" in (m["local"], m["check"])]
    await until(lambda: members.has(want), p["wait"])
    await sleep(p["linger"])
    await members.stop()
    await prod.shutdown()


async def admin(p: dict):
    from rmqtx.client.admin import MQAdmin

    return MQAdmin(config=config(p))


async def op_query_id(p: dict) -> None:
    prod = await producer(p)
    spec = p["messages"][0]
    at = time.time()
    result = await prod.send(message(p, spec))
    sent(spec, at, result)
    mqadmin = await admin(p)
    view = await mqadmin.view_message(result.offset_msg_id)
    emit("found", how="offset_id", body=view.body.decode())
    found = None
    for _ in range(50):  # the index is built behind the commit log
        found = await mqadmin.query_by_uniq_key(p["topic"], result.msg_id)
        if found is not None:
            break
        await sleep(0.1)
    if found is not None:
        emit("found", how="uniq_id", body=found.body.decode())
    await mqadmin.close()
    await prod.shutdown()


async def op_query_key(p: dict) -> None:
    prod = await producer(p)
    await send_all(prod, p)
    mqadmin = await admin(p)
    want = [m for m in p["messages"] if p["key"] in m["keys"]]
    found = []
    for _ in range(50):
        found = await mqadmin.query_message(p["topic"], p["key"])
        if len(found) >= len(want):
            break
        await sleep(0.1)
    for m in found:
        emit("found", how="key", body=m.body.decode())
    await mqadmin.close()
    await prod.shutdown()


async def op_admin_topic(p: dict) -> None:
    from rmqtx.common import fastjson
    from rmqtx.remoting import RemotingCommand
    from rmqtx.remoting.codes import RequestCode

    mqadmin = await admin(p)
    await mqadmin.create_topic(p["topic"], p["cluster"], queues=4)
    topics: list[str] = []
    for _ in range(50):  # the broker registers the new topic with the name server in the background
        listed = await mqadmin.client.call_namesrv(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        topics = fastjson.loads(listed.body).get("topicList") or []
        if p["topic"] in topics:
            break
        await sleep(0.1)
    route = await mqadmin.route(p["topic"])
    emit("topic", listed=p["topic"] in topics, count=len(topics), queues=len(route.subscribe_queues(p["topic"])))
    await mqadmin.close()


async def op_admin_cluster(p: dict) -> None:
    from rmqtx.common import fastjson
    from rmqtx.remoting import RemotingCommand
    from rmqtx.remoting.codes import RequestCode

    mqadmin = await admin(p)
    masters = await mqadmin.cluster_masters(p["cluster"])
    emit("cluster", brokers=masters)
    for addr in masters.values():
        response = await mqadmin.client.call(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
        emit("runtime", addr=addr, keys=sorted((fastjson.loads(response.body).get("table") or {}).keys()))
    await mqadmin.close()


async def op_admin_progress(p: dict) -> None:
    from rmqtx.common import fastjson
    from rmqtx.remoting import RemotingCommand
    from rmqtx.remoting.codes import RequestCode

    prod = await producer(p)
    await send_all(prod, p)
    members = Members(p)
    await members.start()
    await until(lambda: members.has(bodies(p)), p["wait"])
    await members.stop()  # persists the offsets
    await prod.shutdown()
    mqadmin = await admin(p)
    route = await mqadmin.route("%RETRY%" + p["group"])
    broker_offset = consumer_offset = 0
    for name in route.broker_addrs:
        request = RemotingCommand.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": p["group"]})
        response = await mqadmin.client.call(route.master_addr(name), request)
        for mq, wrapper in (fastjson.loads(response.body).get("offsetTable") or {}).items():
            if dict(mq).get("topic") == p["topic"]:
                broker_offset += int(wrapper.get("brokerOffset", 0))
                consumer_offset += int(wrapper.get("consumerOffset", 0))
    emit("progress", broker_offset=broker_offset, consumer_offset=consumer_offset)
    await mqadmin.close()


async def op_request_reply(p: dict) -> None:
    from rmqtx.client import Producer, create_reply_message

    replier = Producer(p["producer_group"] + "_reply", config=config(p))
    await replier.start()

    def answer(m: Any) -> None:
        body = m.body.decode()

        async def send() -> None:
            try:
                result = await replier.send(create_reply_message(m, (p["reply_prefix"] + body).encode()))
                emit("replied", body=body, status=result.send_status.name)
                replied.add(body)
            except Exception as exc:
                emit("error", error=f"reply to {body}: {type(exc).__name__}: {exc}")

        defer.ensureDeferred(send())

    replied: set[str] = set()
    members = Members(p, then=answer)
    await members.start()
    await sleep(p["settle"])
    prod = await producer(p)
    for spec in p["messages"]:
        try:
            reply = await prod.request(message(p, spec), timeout=p["request_timeout"])
            emit("reply", body=spec["body"], reply=reply.body.decode(), topic=reply.topic, at=time.time())
        except Exception as exc:
            emit("error", error=f"request {spec['body']}: {type(exc).__name__}: {exc}")
    await until(lambda: replied >= set(bodies(p)), p["wait"])  # the reply's send may finish after the requester has it
    await members.stop()
    await prod.shutdown()
    await replier.shutdown()


async def op_lite_pull(p: dict) -> None:
    """The client's pull consumer as Java's lite pull consumer: assigned queues, own offsets, explicit commits."""
    from rmqtx.client.consumer import PullConsumer

    prod = await producer(p)
    await send_sharded(prod, p)
    await prod.shutdown()
    consumer = PullConsumer(p["group"], config=config(p), offset_store_dir=tempfile.mkdtemp(prefix="offsets-"))
    await consumer.start()
    queues = await consumer.fetch_queues(p["topic"])
    position = {mq: 0 for mq in queues}  # assign all; a new group starts at the first offset

    async def poll_until(want: list[str], phase: str, seconds: float) -> None:
        got: set[str] = set()
        deadline = time.monotonic() + seconds
        while not set(want) <= got and time.monotonic() < deadline:
            idle = True
            for mq in queues:
                result = await consumer.pull(mq, position[mq], 32)
                position[mq] = result.next_begin_offset
                for m in result.messages:
                    got.add(recv_event(p, m, 0, phase=phase)["body"])
                    idle = False
            if idle:
                await sleep(0.1)

    await poll_until(bodies(p), "poll", p["wait"])
    for mq in queues:  # commitSync
        await consumer.update_offset(mq, position[mq])
    await consumer.offsets.persist(queues)
    for mq in queues:
        emit("committed", queue_id=mq.queue_id, offset=await consumer.fetch_offset(mq, from_store=True))
    for mq in queues:
        if mq.queue_id == p["seek"]["queue_id"]:
            position[mq] = p["seek"]["offset"]
    await poll_until(bodies(p, "after_seek"), "seek", p["wait"])
    await poll_until([f"{p['topic']} never sends this"], "seek", p["linger"])
    await consumer.shutdown()


async def op_dlq_consume(p: dict) -> None:
    await op_dlq(p)
    want = bodies(p)
    reader = Members(p, base=1, group=p["group"] + "_dlq", topic="%DLQ%" + p["group"])
    await reader.start()
    await until(lambda: reader.has(want, 1), p["wait"])
    await reader.stop()


async def op_restart(p: dict) -> None:
    before = Members(p)
    await before.start()
    await sleep(p["settle"])
    prod = await producer(p)
    await send_all(prod, p)
    await until(lambda: before.has(bodies(p), 0), p["wait"])
    await sleep(p["linger"])
    await before.stop()
    await send_all(prod, p, key="later")
    after = Members(p, base=1)
    await after.start()
    await until(lambda: after.has(bodies(p, "later"), 1), p["wait"])
    await sleep(p["linger"])
    await after.stop()
    await prod.shutdown()


async def op_refused_send(p: dict) -> None:
    """One sync send per spec, no retries, no consumer: each answer is a ``sent`` or a ``refused`` event."""
    prod = await producer(p, retries=0)
    for spec in p["messages"]:
        at = time.time()
        try:
            sent(spec, at, await prod.send(message(p, spec)))
        except Exception as exc:
            emit("refused", body=spec["body"], error=f"{type(exc).__name__}: {exc}")
    await prod.shutdown()


async def main(op: str, params: dict) -> None:
    try:
        await globals()[f"op_{op}"](params)
    except Exception as exc:
        emit("error", error=f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    task.react(lambda reactor, op, params: defer.ensureDeferred(main(op, json.loads(params))), sys.argv[1:3])
