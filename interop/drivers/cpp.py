"""The Apache C++ client (PyPI ``rocketmq``, ctypes over librocketmq) as a column.

``python -m interop.drivers.cpp OP PARAMS`` runs one cell. The binding re-raises listener
exceptions inside its ctypes callback, so listeners here are registered directly and return the
consume status as a number.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import threading
import time
from typing import Any, Callable

from interop.drivers.base import Driver, without_tx_query_admin
from interop.scenarios import Context, Scenario, body_bytes

CONSUME_SUCCESS, RECONSUME_LATER = 0, 1
MAX_RECONSUME = 16  # the C API has no setter; the client sends the default
DLQ_BUDGET = 150.0  # seconds the DLQ cell may spend on 16 retries
#: The client learns the %RETRY% topic's route only at its periodic refresh (10 s after start, then every
#: 30 s): it asks before its first heartbeat has made the broker create that topic, so a retry cell waits
#: one full period more than the delay levels alone need.
ROUTE_REFRESH_S = 30.0
#: A send whose route lookup meets a name server that closes every plain connection (TLS enforcing)
#: fails only after the client's own retries, about 60 s.
PLAIN_REFUSED_S = 60.0
NO_API = "PyPI rocketmq 0.4.4 (C API of rocketmq-client-cpp) has no {}"
NO_TLS = NO_API.format("TLS (librocketmq 2.0 is built without SSL and its C API has no TLS switch)")


class CppDriver(Driver):
    name = "cpp"
    unsupported = {
        "sql92_filter": "the C++ client subscribes with tag expressions only",
        **without_tx_query_admin(NO_API),
        "request_reply": NO_API.format("request-reply API (request / reply message)"),
        "pop": NO_API.format("POP consumer (RocketMQ 5.x)"),
        "lite_pull": NO_API.format("lite pull consumer: its pull API reads whole queues, no assign/seek/commit"),
        "timer": NO_API.format("timer message API (delivery time / delay in ms are RocketMQ 5.x; it has delay levels only)"),
    }

    drops_remarks = "the C++ client answers a refused send with its own 'No route info of this topic' exception"

    def prepare(self) -> str | None:
        return None if importlib.util.find_spec("rocketmq") else "PyPI rocketmq (the C++ client) is not installed"

    def adapt(self, scenario: Scenario, params: dict, ctx: Context) -> str | None:
        """The DLQ comes after the client's fixed 16 retries: feasible only with short delay levels."""
        if params.get("tls"):
            return NO_TLS
        if params.get("outcome") == "refused" and params.get("tls") is False:
            params["wait"] += PLAIN_REFUSED_S
        if scenario.key in ("dlq", "dlq_consume"):
            retries = sum(ctx.levels[2:2 + MAX_RECONSUME])
            if retries > DLQ_BUDGET:
                return f"maxReconsumeTimes is fixed at 16 in the C API; 16 retries take {retries:.0f} s with this broker's delay levels"
            params.update(max_reconsume=MAX_RECONSUME, wait=retries * 2 + 30 + ROUTE_REFRESH_S * (2 if scenario.key == "dlq_consume" else 1))
            # librocketmq 2.0 hands a whole pull to the C API's listener, which calls back message by
            # message and fails the rest of the pull unseen at the first failure (consumeMessageBatchMaxSize
            # is not read): two messages retried together would show only one reconsume count each time
            params["messages"] = params["messages"][:1]
        elif scenario.key == "retry":
            params.update(wait=params["wait"] + ROUTE_REFRESH_S)
        return super().adapt(scenario, params, ctx)

    def command(self, op: str, params: dict) -> list[str]:
        return [sys.executable, "-m", "interop.drivers.cpp", op, json.dumps(params)]


# -- the cell program ---------------------------------------------------------------------------
_out = threading.Lock()


def emit(kind: str, **fields: Any) -> None:
    """One whole line at a time: callbacks run on the client's threads."""
    line = json.dumps({"kind": kind, **fields}) + "\n"
    with _out:
        sys.stdout.write(line)
        sys.stdout.flush()


def text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def message(p: dict, spec: dict):
    from rocketmq.client import Message

    msg = Message(p["topic"])
    msg.set_body(body_bytes(spec))
    msg.set_tags(spec["tags"])
    msg.set_keys(" ".join(spec["keys"]))
    for name, value in (spec.get("props") or {}).items():
        msg.set_property(name, value)
    if spec.get("delay"):
        msg.set_delay_time_level(spec["delay"])
    return msg


def sent(spec: dict, at: float, result: Any = None) -> None:
    status = None if result is None else ("SEND_OK" if int(result.status) == 0 else result.status.name)
    emit("sent", body=spec["body"], at=at, status=status, msg_id=getattr(result, "msg_id", None))


def sign(client: Any, p: dict) -> None:
    """The cell's ACL keys (``acl``), if any: the client signs every request with them."""
    keys = p.get("acl")
    if keys:
        client.set_session_credentials(keys["access_key"], keys["secret_key"], "")


def producer(p: dict):
    from rocketmq.client import Producer

    prod = Producer(p["producer_group"], timeout=5000)
    prod.set_namesrv_addr(p["namesrv"])
    prod.set_max_message_size(4 * 1024 * 1024)  # the client's own default is 128 KiB; Java's and the broker's 4 MiB
    sign(prod, p)
    prod.start()
    return prod


def send_all(prod: Any, p: dict, mode: str = "sync", key: str = "messages") -> None:
    specs = p[key]
    if mode == "sync":
        for spec in specs:
            at = time.time()
            sent(spec, at, send_sync(prod, p, spec))
    elif mode == "oneway":
        for spec in specs:
            at = time.time()
            prod.send_oneway(message(p, spec))
            sent(spec, at)
    elif mode == "batch":
        at = time.time()
        result = prod.send_batch([message(p, spec) for spec in specs])
        for spec in specs:
            sent(spec, at, result)
    elif mode == "async":
        send_async(prod, p, specs)


ROUTE_RETRIES = 5


def send_sync(prod: Any, p: dict, spec: dict) -> Any:
    """One synchronous send. The client fails it with "No route info" when its own route lookup timed
    out on a loaded machine; nothing was stored then, so that error is retried a few times (noted), as
    tests/e2e/cpp_client.py does. Not in a cell that expects refusals: the client words those the same."""
    from rocketmq.exceptions import ProducerSendSyncFailed

    for _ in range(ROUTE_RETRIES - 1):
        try:
            return prod.send_sync(message(p, spec))
        except ProducerSendSyncFailed as exc:
            if p.get("outcome") == "refused" or "No route info" not in str(exc):
                raise
            emit("note", note=f"send of {spec['body']} retried after the client's route lookup failed: {exc}")
            time.sleep(1.0)
    return prod.send_sync(message(p, spec))  # the last try: its error is the cell's


def send_async(prod: Any, p: dict, specs: list[dict]) -> None:
    """All sends in flight at once; callbacks report, the main thread waits for every one."""
    left = threading.Semaphore(0)
    keep = []  # the binding needs the messages alive until the callback ran
    at = time.time()
    for spec in specs:
        def ok(result: Any, spec: dict = spec) -> None:
            sent(spec, at, result)
            left.release()

        def failed(exc: Exception) -> None:
            emit("error", error=f"async send failed: {exc}")
            left.release()

        msg = message(p, spec)
        keep.append(msg)
        prod.send_async(msg, ok, failed)
    for _ in specs:
        left.acquire(timeout=p["wait"])


class Members:
    """Push consumers of one group; ``fail(msg)`` decides RECONSUME_LATER."""

    def __init__(self, p: dict, count: int = 1, *, model: str = "CLUSTERING", orderly: bool = False,
                 fail: Callable[[Any], bool] = lambda m: False, base: int = 0, group: str | None = None,
                 topic: str | None = None) -> None:
        from rocketmq.client import MessageModel, PushConsumer, RecvMessage
        from rocketmq.exceptions import ffi_check
        from rocketmq.ffi import dll

        self.lock = threading.Lock()
        self.events: list[dict] = []
        self.consumers = []
        group, topic = group or p["group"], topic or p["topic"]
        names = sorted({name for spec in p.get("messages", []) for name in spec.get("props") or {}})
        for i in range(base, base + count):
            consumer = PushConsumer(group, orderly=orderly, message_model=MessageModel[model])
            consumer.set_namesrv_addr(p["namesrv"])
            consumer.set_instance_name(f"{group}-{i}")
            sign(consumer, p)

            def on_message(_consumer: Any, handle: Any, member: int = i) -> int:
                msg = RecvMessage(handle)
                raw = msg.body or b""
                event = {"body": raw.split(b"#", 1)[0].decode("utf-8", "replace"), "tags": text(msg.tags),
                         "keys": text(msg.keys).split(), "topic": text(msg.topic), "queue_id": msg.queue_id,
                         "queue_offset": msg.queue_offset, "reconsume": msg.reconsume_times, "member": member, "at": time.time()}
                if len(raw) > 1024:
                    event.update(size=len(raw), sha256=hashlib.sha256(raw).hexdigest())
                if names:
                    event["props"] = {name: text(msg.get_property(name)) or None for name in names}
                with self.lock:  # printed before it counts, so the main thread cannot exit first
                    emit("recv", **event)
                    self.events.append(event)
                return RECONSUME_LATER if fail(msg) else CONSUME_SUCCESS

            ffi_check(dll.Subscribe(consumer._handle, topic.encode(), p.get("expression", "*").encode()))
            consumer._register_callback(on_message)
            self.consumers.append(consumer)

    def seen(self, member: int | None = None, reconsume: int = 0) -> set[str]:
        with self.lock:
            return {e["body"] for e in self.events if member in (None, e["member"]) and e["reconsume"] >= reconsume}

    def wait_for(self, bodies: list[str], seconds: float, member: int | None = None, reconsume: int = 0) -> None:
        deadline = time.monotonic() + seconds
        while not set(bodies) <= self.seen(member, reconsume) and time.monotonic() < deadline:
            time.sleep(0.1)

    def start(self) -> None:
        for consumer in self.consumers:
            consumer.start()

    def stop(self) -> None:
        for consumer in self.consumers:
            consumer.shutdown()


def bodies(p: dict, key: str = "messages") -> list[str]:
    return [m["body"] for m in p[key]]


# -- operations ---------------------------------------------------------------------------------
def op_send(p: dict) -> None:
    prod = producer(p)
    send_all(prod, p, p["mode"])
    members = Members(p)
    members.start()
    members.wait_for(bodies(p), p["wait"])
    members.stop()
    prod.shutdown()


def op_consume(p: dict) -> None:
    members = Members(p, p["members"], model=p["model"])
    members.start()
    time.sleep(p["settle"])
    prod = producer(p)
    send_all(prod, p)
    want = bodies(p, "expect" if "expect" in p else "messages")
    for member in range(p["members"]) if p["model"] == "BROADCASTING" else [None]:
        members.wait_for(want, p["wait"], member)
    time.sleep(p["linger"])
    members.stop()
    prod.shutdown()


def op_orderly(p: dict) -> None:
    members = Members(p, orderly=True)
    members.start()
    time.sleep(p["settle"])
    prod = producer(p)
    for spec in p["messages"]:
        at = time.time()
        sent(spec, at, prod.send_orderly(message(p, spec), spec["shard"]))  # the default selector: arg % queues
    members.wait_for(bodies(p), p["wait"])
    members.stop()
    prod.shutdown()


def op_delay(p: dict) -> None:
    members = Members(p)
    members.start()
    time.sleep(p["settle"])
    prod = producer(p)
    send_all(prod, p)
    members.wait_for(bodies(p), p["wait"] + max(p["levels"][m["delay"] - 1] for m in p["messages"]))
    members.stop()
    prod.shutdown()


def op_retry(p: dict) -> None:
    prod = producer(p)
    send_all(prod, p)
    members = Members(p, fail=lambda m: m.reconsume_times == 0)
    members.start()
    members.wait_for(bodies(p), p["wait"], reconsume=1)
    members.stop()
    prod.shutdown()


def op_dlq(p: dict) -> None:
    prod = producer(p)
    send_all(prod, p)
    emit("config", max_reconsume=p["max_reconsume"])
    members = Members(p, fail=lambda m: True)
    members.start()
    members.wait_for(bodies(p), p["wait"], reconsume=p["max_reconsume"])
    time.sleep(p["linger"])
    members.stop()
    prod.shutdown()


def op_dlq_consume(p: dict) -> None:
    op_dlq(p)
    reader = Members(p, base=1, group=p["group"] + "_dlq", topic="%DLQ%" + p["group"])
    reader.start()
    reader.wait_for(bodies(p), p["wait"], member=1)
    reader.stop()


def op_restart(p: dict) -> None:
    before = Members(p)
    before.start()
    time.sleep(p["settle"])
    prod = producer(p)
    send_all(prod, p)
    before.wait_for(bodies(p), p["wait"], member=0)
    time.sleep(p["linger"])
    before.stop()
    send_all(prod, p, key="later")
    after = Members(p, base=1)
    after.start()
    after.wait_for(bodies(p, "later"), p["wait"], member=1)
    time.sleep(p["linger"])
    after.stop()
    prod.shutdown()


def op_refused_send(p: dict) -> None:
    """One sync send per spec, no consumer: each answer is a ``sent`` or a ``refused`` event."""
    prod = producer(p)
    for spec in p["messages"]:
        at = time.time()
        try:
            sent(spec, at, send_sync(prod, p, spec))
        except Exception as exc:
            emit("refused", body=spec["body"], error=f"{type(exc).__name__}: {exc}")
    prod.shutdown()


if __name__ == "__main__":
    op, raw = sys.argv[1:3]
    try:
        globals()[f"op_{op}"](json.loads(raw))
    except Exception as exc:
        emit("error", error=f"{type(exc).__name__}: {exc}")
