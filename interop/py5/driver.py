"""The ``py5`` driver: rocketmq-python-client (the 5.x gRPC SDK) as a producer, one JSON event per line.

Runs in its own venv (``scripts/ensure-py5.sh``): the SDK's top-level ``rocketmq`` module clashes
with the C++ client's. ``python driver.py '{"op": "send", "endpoint": "127.0.0.1:8081", ...}'`` (or ``-``: the JSON on stdin)

ops:
* ``send``: ``messages`` = [{body, body_b64, tag, keys, props, group, delay_s}] (``body_b64`` the
  bytes when not ``body``; ``async``: send_async); ``sent`` events with ``body``, ``msg_id``, ``offset``.
* ``tx``: ``messages`` = [{body, tag, action: commit|rollback|check, check_state}]; ``check``
  messages are left open and the checker answers ``check_state`` (COMMIT or ROLLBACK, default COMMIT); ``sent`` events, ``ended`` after commit/rollback, ``checked``
  for each check-back, until every ``check`` message was checked or ``wait`` seconds passed.
* ``consume``: a SimpleConsumer of ``group`` (``tag``: its filter, ``await``: long polling seconds)
  receives with ``invisible`` seconds until ``expect`` messages were acked or ``wait`` seconds passed;
  ``actions`` = {body: skip_once | skip_always | change_once} leaves a message un-acked on its first
  delivery (or on every one), or
  changes its invisible duration to ``change_s`` on its first delivery (and acks it only when it comes
  back, or at once with ``change_ack``); ``recv``, ``changed`` and ``acked`` events with ``body``, ``msg_id``,
  ``attempt`` (delivery attempt) and ``handle`` (receipt handle), ``recv`` with ``message_group`` (FIFO);
  ``members`` SimpleConsumers at once; ``fifo``: as an orderly consumer, a message group with an un-acked
  message in a batch has its later messages in that batch left alone too (``held`` events).
* ``crowd``: as ``consume`` (``members`` SimpleConsumers, each its own client), and once they are receiving
  ``producers`` producers (each its own client), started together, send at once, each the ``messages``
  whose ``producer`` is its index, in order; ``sent`` events with ``producer``.
* ``push``: a PushConsumer of ``group`` that fails the first delivery of each body in ``fail_once``,
  every delivery of each body in ``fail_always`` (done with one after ``attempts`` deliveries: the SDK
  then forwards it to the DLQ) and succeeds otherwise, until ``expect`` bodies are done; ``recv`` events.
* ``refused_send``: one send per spec, each answered by a ``sent`` or a ``refused`` event (``error``: the
  SDK's exception text).

Every op takes ``acl`` ({access_key, secret_key}: the SDK signs its calls; none: no credentials) and
``tls`` (a TLS channel; the SDK checks the certificate against grpc's default roots, so the driver points
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` at ``tls_ca``, or at the certificate the endpoint shows).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import socket
import ssl
import sys
import tempfile
import threading
import time


_OUT = threading.Lock()


def emit(event: str, **fields: object) -> None:
    """One JSON line; under a lock, as consumer threads emit at once."""
    line = json.dumps({"event": event, "at": time.time(), **fields}) + "\n"
    with _OUT:
        sys.stdout.write(line)
        sys.stdout.flush()


class _SdkErrors(logging.Handler):
    """The SDK's error log lines: it logs the endpoint's refusal (status code and message) where its
    exceptions say only that a route could not be fetched."""

    lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR and record.getMessage() not in self.lines:
            self.lines.append(record.getMessage())


def refusal_text(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    logged = [line for line in _SdkErrors.lines if line not in text]
    _SdkErrors.lines.clear()
    return f"{text} (SDK log: {' | '.join(logged)})" if logged else text


def trust(params: dict) -> None:
    """With ``tls``: grpc's default roots become ``tls_ca``, or the endpoint's own certificate (test use)."""
    if not params.get("tls"):
        return
    ca = params.get("tls_ca")
    if not ca:
        host, _, port = params["endpoint"].rpartition(":")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.set_alpn_protocols(["h2"])
        with socket.create_connection((host, int(port)), timeout=5) as sock, context.wrap_socket(sock) as tls:
            der = tls.getpeercert(binary_form=True)
        fd, ca = tempfile.mkstemp(prefix="rmqtx-py5-ca-", suffix=".pem")
        with os.fdopen(fd, "w") as out:
            out.write(ssl.DER_cert_to_PEM_cert(der))
    os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = ca


def client_config(params: dict):
    """The SDK's configuration, signed with ``acl``'s keys when given."""
    from rocketmq import ClientConfiguration, Credentials

    keys = params.get("acl") or {}
    credentials = Credentials(keys["access_key"], keys["secret_key"]) if keys else Credentials()
    return ClientConfiguration(params["endpoint"], credentials, request_timeout=params.get("timeout", 5))


def build(spec: dict, topic: str):
    from rocketmq import Message

    msg = Message()
    msg.topic = topic
    msg.body = base64.b64decode(spec["body_b64"]) if "body_b64" in spec else spec["body"].encode()
    if spec.get("tag"):
        msg.tag = spec["tag"]
    if spec.get("keys"):
        msg.keys = spec["keys"][0]
    for key, value in (spec.get("props") or {}).items():
        msg.add_property(key, value)
    if spec.get("group"):
        msg.message_group = spec["group"]
    if spec.get("delay_s"):
        # the SDK copies this value into Timestamp.seconds as is (its docstring says milliseconds)
        msg.delivery_timestamp = math.ceil(time.time() + float(spec["delay_s"]))
    return msg


def consume(params: dict) -> int:
    from rocketmq import FilterExpression, SimpleConsumer
    from rocketmq.grpc_protocol import FilterType

    config = client_config(params)
    topic = params["topic"]
    actions: dict = params.get("actions") or {}
    sql = params.get("expression_type") == "SQL92"
    expression = FilterExpression(params.get("tag") or "*", FilterType.SQL if sql else FilterType.TAG)
    members = [SimpleConsumer(config, params["group"], {topic: expression}, await_duration=params.get("await", 2),
                               tls_enable=bool(params.get("tls")))
               for _ in range(params.get("members", 1))]
    for consumer in members:
        consumer.startup()
    emit("started")
    lock = threading.Lock()
    seen: dict[str, int] = {}
    acked: set[str] = set()
    deadline = time.time() + params.get("wait", 30)
    done = threading.Event()
    failures: list[str] = []
    fifo = bool(params.get("fifo"))

    def handle(member: int, consumer, msg) -> bool:
        """Act on one message; True when it was acked."""
        body = msg.body.split(b"#", 1)[0].decode(errors="replace")
        with lock:
            seen[body] = seen.get(body, 0) + 1
            count = seen[body]
        emit("recv", member=member, body=body, msg_id=msg.message_id, attempt=msg.delivery_attempt,
             handle=msg.receipt_handle, tag=msg.tag, keys=sorted(msg.keys or []), topic=msg.topic,
             props=dict(msg.properties or {}), size=len(msg.body), message_group=msg.message_group)
        action = actions.get(body, "ack")
        if (count == 1 and action == "skip_once") or action == "skip_always":
            return False
        if count == 1 and action in ("change_once", "change_ack"):
            consumer.change_invisible_duration(msg, params.get("change_s", 2))
            emit("changed", member=member, body=body, msg_id=msg.message_id, handle=msg.receipt_handle)
            if action == "change_once":
                return False
        consumer.ack(msg)
        with lock:
            acked.add(body)
            if len(acked) >= params["expect"] and not done.is_set():
                done.set()
        emit("acked", member=member, body=body, msg_id=msg.message_id, handle=msg.receipt_handle)
        return True

    def run(member: int, consumer) -> None:
        try:
            linger_end = None
            while time.time() < deadline:
                if done.is_set():
                    linger_end = linger_end or time.time() + params.get("linger", 0)
                    if time.time() >= linger_end:
                        return
                held: set = set()  # fifo: message groups with an un-acked message in this batch
                for msg in consumer.receive(params.get("batch", 16), params.get("invisible", 10)):
                    if fifo and msg.message_group in held:
                        emit("held", member=member, body=msg.body.split(b"#", 1)[0].decode(errors="replace"),
                             attempt=msg.delivery_attempt, message_group=msg.message_group)
                        continue
                    if not handle(member, consumer, msg) and fifo and msg.message_group:
                        held.add(msg.message_group)
        except Exception as exc:
            failures.append(f"member {member}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(members)]
    for t in threads:
        t.start()
    if params.get("producers"):
        failures.extend(send_together(params, config))
    for t in threads:
        t.join()
    for consumer in members:
        consumer.shutdown()
    for failure in failures:
        emit("error", error=failure)
    return 1 if failures else 0


def send_together(params: dict, config) -> list[str]:
    """Op ``crowd``'s producers: ``producers`` Producer instances, started together, each sending its own
    specs (``producer``: its index) in order, all at once; ``sent`` events carry ``producer``. Failures."""
    from rocketmq import Producer

    topic = params["topic"]
    failures: list[str] = []
    producers = [Producer(config, (topic,), tls_enable=bool(params.get("tls"))) for _ in range(params["producers"])]
    started = threading.Barrier(len(producers))

    def run(index: int, producer) -> None:
        try:
            producer.startup()
        except Exception as exc:
            failures.append(f"producer {index}: start: {type(exc).__name__}: {exc}")
            started.abort()
            return
        try:
            started.wait(30)
            for spec in params["messages"]:
                if spec["producer"] == index:
                    at = time.time()
                    receipt = producer.send(build(spec, topic))
                    emit("sent", producer=index, body=spec["body"], at=at, msg_id=receipt.message_id, offset=receipt.offset)
        except Exception as exc:
            failures.append(f"producer {index}: {type(exc).__name__}: {exc}")
        finally:
            producer.shutdown()

    threads = [threading.Thread(target=run, args=(i, p), daemon=True) for i, p in enumerate(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def push(params: dict) -> int:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    config = client_config(params)
    fail_once = set(params.get("fail_once") or ())
    fail_always = set(params.get("fail_always") or ())
    attempts = params.get("attempts", 0)  # fail_always bodies are done after this many deliveries
    lock = threading.Lock()
    seen: dict[str, int] = {}
    consumed: set[str] = set()
    done = threading.Event()

    class Listener(MessageListener):
        def consume(self, message) -> ConsumeResult:
            body = message.body.decode(errors="replace")
            with lock:
                seen[body] = seen.get(body, 0) + 1
                count = seen[body]
            emit("recv", body=body, msg_id=message.message_id, attempt=message.delivery_attempt, topic=message.topic,
                 tag=message.tag, keys=sorted(message.keys or []))
            if body in fail_always:
                with lock:
                    if count >= attempts:
                        consumed.add(body)
                        if len(consumed) >= params["expect"]:
                            done.set()
                return ConsumeResult.FAILURE
            if body in fail_once and count == 1:
                return ConsumeResult.FAILURE
            with lock:
                consumed.add(body)
                if len(consumed) >= params["expect"]:
                    done.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(config, params["group"], Listener(), {params["topic"]: FilterExpression("*")},
                            tls_enable=bool(params.get("tls")))
    consumer.startup()
    emit("started")
    try:
        if not done.wait(params.get("wait", 30)):
            emit("error", error=f"consumed {sorted(consumed)} of {params['expect']}")
            return 1
        time.sleep(params.get("linger", 0.5))  # the SDK acks (or forwards to the DLQ) after the listener returns
    finally:
        consumer.shutdown()
    return 0


def main() -> int:
    params = json.loads(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-" else sys.stdin.read())
    trust(params)
    import rocketmq  # noqa: F401  (its logging set-up first: it replaces the logger's handlers)

    logging.getLogger("rocketmq-python-client").addHandler(_SdkErrors())
    if params["op"] in ("consume", "crowd"):
        return consume(params)
    if params["op"] == "push":
        return push(params)
    from rocketmq import Producer, TransactionChecker, TransactionResolution

    config = client_config(params)
    topic = params["topic"]
    op = params["op"]
    checked: list[str] = []
    all_checked = threading.Event()
    expected_checks = {s["body"] for s in params["messages"] if s.get("action") == "check"}
    check_states = {s["body"]: s.get("check_state") or "COMMIT" for s in params["messages"]}

    class Checker(TransactionChecker):
        def check(self, message) -> TransactionResolution:
            body = message.body.decode()
            label = body.split("#", 1)[0]
            state = check_states.get(label, "COMMIT")
            emit("checked", body=label, msg_id=message.message_id, state=state)
            checked.append(label)
            if expected_checks <= set(checked):
                all_checked.set()
            return getattr(TransactionResolution, state)

    producer = Producer(config, (topic,), checker=Checker() if op == "tx" else None, tls_enable=bool(params.get("tls")))
    producer.startup()
    try:
        if op == "refused_send":
            for spec in params["messages"]:
                try:
                    receipt = producer.send(build(spec, topic))
                except Exception as exc:
                    emit("refused", body=spec["body"], error=refusal_text(exc))
                else:
                    emit("sent", body=spec["body"], msg_id=receipt.message_id, offset=receipt.offset)
            return 0
        for spec in params["messages"]:
            at = time.time()  # a delivery timestamp counts from here: the ``sent`` event carries it
            msg = build(spec, topic)
            if op == "tx":
                transaction = producer.begin_transaction()
                receipt = producer.send(msg, transaction)
                emit("sent", body=spec["body"], at=at, msg_id=receipt.message_id, offset=receipt.offset,
                     transaction_id=receipt.transaction_id)
                if spec["action"] in ("commit", "rollback"):
                    emit("ended", body=spec["body"], action=spec["action"])  # the decision, before it is sent
                    getattr(transaction, spec["action"])()
            elif params.get("async"):
                receipt = producer.send_async(msg).result(timeout=params.get("timeout", 5) * 3)
                emit("sent", body=spec["body"], at=at, msg_id=receipt.message_id, offset=receipt.offset)
            else:
                receipt = producer.send(msg)
                emit("sent", body=spec["body"], at=at, msg_id=receipt.message_id, offset=receipt.offset)
        if expected_checks and not all_checked.wait(params.get("wait", 30)):
            emit("error", error=f"not every open transaction was checked: {sorted(set(expected_checks) - set(checked))}")
    except Exception as exc:
        emit("error", error=f"{type(exc).__name__}: {exc}")
        return 1
    finally:
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
