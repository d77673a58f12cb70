"""The 5.x gRPC SDK columns against rmqtx's gRPC endpoint: ``py5`` (rocketmq-python-client, in its
own venv from ``scripts/ensure-py5.sh``, as its ``rocketmq`` module clashes with the C++ client's,
through ``interop/py5/driver.py``), ``java5grpc`` (rocketmq-client-java from Maven Central,
``interop/java5grpc``, on the host JVM), ``node5`` (rocketmq-client-nodejs from npm, ``interop/node5``)
and ``go5`` (rocketmq-clients golang/v5 from the module proxy, ``interop/go5``). All read the same
params on stdin and print the same events.

Producer scenarios read what was sent back through the broker over remoting (PULL_MESSAGE from every
queue), the ``recv`` events carrying each message's store time as ``at`` (when it became visible).
The consumer scenarios (consume, retry, restart, pop, fifo_consume) send with the SDK and then receive
with its SimpleConsumer(s) over the endpoint's POP (ReceiveMessage / AckMessage); reconsumeTimes is the
delivery attempt less one, and the queue is not shown by the SDK. ``crowd`` runs its producers and
SimpleConsumers in one SDK process, the producers sending while the consumers receive. The cell
runs ``python -m interop.drivers.py5 COLUMN OP PARAMS``; the endpoint comes from ``$RMQTX_INTEROP_GRPC``
(``python -m interop --grpc HOST:PORT``).
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

from interop.drivers.base import REPO, Driver
from interop.scenarios import Context, Scenario

PY5_VENV = os.environ.get("RMQTX_PY5_VENV") or str(REPO / "interop" / "py5" / ".venv")
SDK_DRIVER = REPO / "interop" / "py5" / "driver.py"
JAVA5GRPC = REPO / "interop" / "java5grpc"
NODE5 = REPO / "interop" / "node5"
GO5 = REPO / "interop" / "go5"
GO5_BUILD_TIMEOUT = 600  # a cold module download and compile on a slow machine
NO_ENDPOINT = "no gRPC endpoint given (python -m interop --grpc HOST:PORT)"
NO_QUEUE_OWNERSHIP = ("5.x SimpleConsumers pop from every queue (no member owns a queue, which this check "
                      "wants); three_consumers covers sharing a group")
NO_BROADCAST = "the 5.x gRPC SDKs have no broadcasting consumer"
NO_API = "rocketmq-python-client 5.x has no {}"
STORED_PLAIN = ("the gRPC endpoint stores 5.x SDK bodies uncompressed (a GZIP body_encoding is inflated, "
                "4.x consumers only inflate zlib)")
STATES = {"COMMIT_MESSAGE": "COMMIT", "ROLLBACK_MESSAGE": "ROLLBACK"}


class Py5Driver(Driver):
    name = "py5"
    unsupported = {
        "oneway_send": NO_API.format("oneway send"),
        "batch_send": NO_API.format("batch send"),
        "compressed": STORED_PLAIN,
        "cluster_consume": NO_QUEUE_OWNERSHIP,
        "broadcast_consume": NO_BROADCAST,
        "lite_pull": NO_API.format("lite pull consumer"),
        "request_reply": NO_API.format("request-reply API"),
        "query_id": NO_API.format("message query API"),
        "query_key": NO_API.format("message query API"),
        "admin_topic": NO_API.format("admin API"),
        "admin_cluster": NO_API.format("admin API"),
        "admin_progress": NO_API.format("admin API"),
    }

    def prepare(self) -> str | None:
        if not os.path.exists(os.path.join(PY5_VENV, "bin", "python")):
            return f"no py5 venv at {PY5_VENV}: run scripts/ensure-py5.sh"
        return None

    def adapt(self, scenario: Scenario, params: dict, ctx: Context) -> str | None:
        """Only with an endpoint (every SDK driver hands the cell's ``acl`` keys and ``tls`` to its SDK)."""
        if not os.environ.get("RMQTX_INTEROP_GRPC"):
            return NO_ENDPOINT
        return super().adapt(scenario, params, ctx)

    def command(self, op: str, params: dict) -> list[str]:
        return [sys.executable, "-m", "interop.drivers.py5", self.name, op, json.dumps(params)]


class Java5GrpcDriver(Py5Driver):
    name = "java5grpc"
    unsupported = {
        **Py5Driver.unsupported,
        "compressed": STORED_PLAIN,
        "oneway_send": "rocketmq-client-java 5.x has no oneway send",
        "batch_send": "rocketmq-client-java 5.x has no batch send",
        "request_reply": "rocketmq-client-java 5.x has no request-reply API",
        "query_id": "rocketmq-client-java 5.x has no message query API",
        "query_key": "rocketmq-client-java 5.x has no message query API",
        "admin_topic": "rocketmq-client-java 5.x has no admin API",
        "admin_cluster": "rocketmq-client-java 5.x has no admin API",
        "admin_progress": "rocketmq-client-java 5.x has no admin API",
        "lite_pull": "rocketmq-client-java 5.x has no lite pull consumer",
    }
    slot = ("jvm", 3)

    def adapt(self, scenario: Scenario, params: dict, ctx: Context) -> str | None:
        """Without PUB on the topic the endpoint refuses the producer's Telemetry settings (as Apache's proxy
        does); rocketmq-client-java waits for them before its first send and fails with "Task was cancelled",
        so the refusal's text never reaches the exception: still refused, still nothing stored."""
        if scenario.key == "acl_no_permission":
            params["refusal"] = None
        return super().adapt(scenario, params, ctx)

    def prepare(self) -> str | None:
        if not shutil.which("java") or not shutil.which("mvn"):
            return "java or mvn is not on PATH (scripts/ensure-java.sh)"
        built = JAVA5GRPC / "target" / "classes" / "org" / "rmqtx" / "interop" / "Grpc5.class"
        source = JAVA5GRPC / "src" / "main" / "java" / "org" / "rmqtx" / "interop" / "Grpc5.java"
        if not built.exists() or built.stat().st_mtime < source.stat().st_mtime:  # a stale build lacks newer ops
            build = subprocess.run(["mvn", "-q", "-B", "package"], cwd=JAVA5GRPC, capture_output=True, text=True, timeout=900)
            if build.returncode != 0:
                return f"mvn package failed in interop/java5grpc: {build.stdout[-500:]}"
        return None


def _sdk_skips(sdk: str) -> dict[str, str]:
    """py5's skips, with this SDK named where it lacks an API."""
    skips = {key: (reason.replace("rocketmq-python-client 5.x", sdk) if reason.startswith("rocketmq-python-client") else reason)
             for key, reason in Py5Driver.unsupported.items()}
    return skips


class Node5Driver(Py5Driver):
    """rocketmq-client-nodejs (npm, ``interop/node5``), same scenarios and checks as py5 (its driver consumes
    with the SDK's SimpleConsumer, and its PushConsumer for the DLQ scenarios)."""

    name = "node5"
    unsupported = _sdk_skips("rocketmq-client-nodejs 1.0")

    def prepare(self) -> str | None:
        if not shutil.which("node"):
            return "node is not on PATH"
        if not (NODE5 / "node_modules" / "rocketmq-client-nodejs").exists():
            return "rocketmq-client-nodejs missing: run npm ci in interop/node5"
        return None


class Go5Driver(Py5Driver):
    """rocketmq-clients/golang/v5 (module proxy, ``interop/go5``), built once per run like the go column."""

    name = "go5"
    unsupported = _sdk_skips("rocketmq-clients golang/v5")

    def prepare(self) -> str | None:
        go = shutil.which("go")
        if not go:
            return "no Go toolchain (go) on PATH"
        out = tempfile.mkdtemp(prefix="rmqtx-interop-go5-")
        atexit.register(shutil.rmtree, out, True)
        binary = os.path.join(out, "interop-go5")
        # -mod=readonly: go.sum must already pin every module (a fresh machine needs only the proxy)
        try:
            done = subprocess.run([go, "build", "-mod=readonly", "-trimpath", "-o", binary, "."], cwd=GO5,
                                  capture_output=True, text=True, timeout=GO5_BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            return f"go build of interop/go5 took longer than {GO5_BUILD_TIMEOUT} s"
        if done.returncode != 0:
            return f"go build of interop/go5 failed: {done.stderr.strip()[-300:]}"
        os.environ["RMQTX_INTEROP_GO5"] = binary  # the cells inherit it
        return None


def sdk_command(column: str) -> list[str]:
    if column == "node5":
        return [shutil.which("node") or "node", str(NODE5 / "driver.js")]
    if column == "go5":
        return [os.environ["RMQTX_INTEROP_GO5"]]
    if column == "java5grpc":
        classpath = os.pathsep.join([str(JAVA5GRPC / "target" / "classes"), str(JAVA5GRPC / "target" / "lib" / "*")])
        return [shutil.which("java") or "java", "-Xmx256m", "-cp", classpath, "org.rmqtx.interop.Grpc5"]
    return [os.path.join(PY5_VENV, "bin", "python"), str(SDK_DRIVER), "-"]


# -- the cell (runs in the project's venv) ---------------------------------------------------------
def emit(kind: str, **fields: object) -> None:
    print(json.dumps({"kind": kind, **fields}), flush=True)


def sdk_messages(op: str, params: dict) -> list[dict]:
    from interop.scenarios import body_bytes, timer_due_s

    out = []
    for spec in params["messages"]:
        item: dict = {"body": spec["body"], "body_b64": base64.b64encode(body_bytes(spec)).decode(),
                      "tag": spec.get("tags"), "keys": spec.get("keys") or [], "props": spec.get("props") or {}}
        if op in ("orderly", "fifo_consume"):
            item["group"] = f"shard-{spec['shard']}"
        if spec.get("delay"):
            item["delay_s"] = params["levels"][spec["delay"] - 1]
        if spec.get("timer"):
            item["delay_s"] = timer_due_s(spec)  # a delivery timestamp: the gRPC form of every timer kind
        if op == "transaction":
            local = spec.get("local")
            item["action"] = {"COMMIT_MESSAGE": "commit", "ROLLBACK_MESSAGE": "rollback"}.get(local, "check")
            item["check_state"] = STATES.get(spec.get("check") or "", "ROLLBACK")
        out.append(item)
    return out


def expected(op: str, params: dict) -> set[str]:
    if op != "transaction":
        return {m["body"] for m in params["messages"]}
    return {m["body"] for m in params["messages"] if "COMMIT_MESSAGE" in (m.get("local"), m.get("check"))}


def read_back(params: dict, want: set[str], deadline: float) -> list:
    """Pull every queue of the topic until ``want`` is stored (or the deadline), then once more after ``linger``."""
    from interop.probe import call
    from rmqtx.remoting.codes import RequestCode
    from rmqtx.remoting.command import RemotingCommand
    from testkit.py5 import pull_topic

    how = access(params)

    def ask(addr: str, request: RemotingCommand):
        return call(addr, request, access=how)

    route = json.loads(ask(params["namesrv"], RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                      {"topic": params["topic"]})).body)
    broker = route["brokerDatas"][0]["brokerAddrs"]["0"]
    queues = route["queueDatas"][0]["readQueueNums"]

    def stored() -> list:
        return [m for msgs in pull_topic(broker, params["topic"], queues, ask).values() for m in msgs]

    while time.time() < deadline:
        if want <= {m.body.split(b"#", 1)[0].decode() for m in stored()}:
            break
        time.sleep(0.2)
    time.sleep(params.get("linger", 1.0))
    return stored()


#: The cell's ``acl`` keys and ``tls`` flag (security modes), given to every SDK process it runs.
_SECURITY: dict = {}


def security(params: dict) -> None:
    _SECURITY.clear()
    _SECURITY.update({key: params[key] for key in ("acl", "tls") if key in params})


def access(params: dict):
    """How the cell reads back over remoting: signed with its own keys, over TLS when it speaks TLS."""
    from interop.probe import Access

    keys = params.get("acl") or {}
    return Access(keys.get("access_key"), keys.get("secret_key"), tls=bool(params.get("tls")))


def run_sdk(column: str, sdk: dict, timeout: float) -> tuple[int, list[dict]]:
    """One SDK driver process (with the cell's keys and TLS): its exit status and JSON events."""
    proc = subprocess.run(sdk_command(column), input=json.dumps({**_SECURITY, **sdk}), capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    sys.stderr.write(proc.stderr[-4000:])
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def report_sent(events: list[dict]) -> None:
    for e in events:
        if e["event"] == "sent":
            emit("sent", body=e["body"], at=e["at"], status="SEND_OK", msg_id=e["msg_id"], offset_msg_id="",
                 **({"queue_offset": e["offset"]} if e.get("offset") is not None else {}))
        elif e["event"] == "error":
            emit("error", error=e["error"])


def set_retry_max_times(params: dict, times: int) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with the group's retryMaxTimes (mqadmin updateSubGroup -r)."""
    from rmqtx.broker.groups import SubscriptionGroupConfig
    from rmqtx.common import fastjson
    from rmqtx.remoting.codes import RequestCode, ResponseCode
    from rmqtx.remoting.command import RemotingCommand
    from testkit.standalone import call

    route = json.loads(call(params["namesrv"], RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                       {"topic": params["topic"]})).body)
    broker = route["brokerDatas"][0]["brokerAddrs"]["0"]
    body = fastjson.dumps(SubscriptionGroupConfig(groupName=params["group"], retryMaxTimes=times).to_json())
    resp = call(broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body=body))
    if resp.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"update group {params['group']}: {resp.code} {resp.remark}")


def dlq_cell(column: str, params: dict, endpoint: str, wait: float) -> int:
    """A PushConsumer fails every delivery; after retryMaxTimes retries the SDK forwards each to %DLQ%group."""
    limit = params["max_reconsume"]
    set_retry_max_times(params, limit)  # a 5.x group's retries are the broker's, as mqadmin updateSubGroup -r sets
    emit("config", max_reconsume=limit)
    code, events = run_sdk(column, {"op": "push", "endpoint": endpoint, "topic": params["topic"],
                                    "group": params["group"], "expect": len(params["messages"]),
                                    "fail_always": [m["body"] for m in params["messages"]], "attempts": limit + 1,
                                    "wait": wait, "linger": 1.0}, wait + 60)
    for e in events:
        if e["event"] == "recv":
            emit("recv", body=e["body"], tags=e.get("tag"), keys=e.get("keys") or [], topic=e["topic"], queue_id=-1,
                 reconsume=(e.get("attempt") or 1) - 1, member=0, at=e["at"])
        elif e["event"] == "error":
            emit("error", error=e["error"])
    if code == 0:
        wait_in_dlq(params, time.time() + 15)
    return code


def wait_in_dlq(params: dict, deadline: float) -> None:
    """The SDK forwards after its listener returns: wait (bounded) until %DLQ%group holds every spec's key."""
    from interop.probe import Probe

    probe = Probe(params["namesrv"])
    dlq = "%DLQ%" + params["group"]
    while time.time() < deadline:
        if all(m["body"] in probe.query_keys(dlq, m["keys"][0]) for m in params["messages"]):
            return
        time.sleep(0.2)


def consume_cell(column: str, op: str, params: dict) -> int:
    """Send with the SDK, then receive with its SimpleConsumer(s) over POP until every expected body is acked."""
    endpoint = os.environ["RMQTX_INTEROP_GRPC"]
    wait = params.get("wait", 30)
    prop_names = sorted({k for m in params["messages"] for k in (m.get("props") or {})})

    def send(specs: list[dict]) -> bool:
        kind = "fifo_consume" if op == "fifo_consume" else "send"  # FIFO: each spec in its message group
        code, events = run_sdk(column, {"op": "send", "endpoint": endpoint, "topic": params["topic"],
                                        "messages": sdk_messages(kind, {**params, "messages": specs})}, wait + 60)
        report_sent(events)
        return code == 0

    def consume(expect: list[dict], member_base: int, **extra: object) -> bool:
        sdk = {"op": "consume", "endpoint": endpoint, "topic": params["topic"], "group": params["group"],
               "expect": len(expect), "wait": wait, "linger": params.get("linger", 0.0),
               "tag": params.get("expression") or "*", "expression_type": params.get("expression_type") or "TAG",
               "members": params.get("members", 1), "invisible": 20, **extra}
        code, events = run_sdk(column, sdk, wait + 60)
        for e in events:
            if e["event"] == "recv":
                event = {"body": e["body"], "tags": e.get("tag"), "keys": e.get("keys") or [], "topic": e["topic"],
                         "queue_id": -1, "reconsume": (e.get("attempt") or 1) - 1, "member": member_base + e["member"],
                         "at": e["at"]}
                if prop_names:
                    event["props"] = {name: (e.get("props") or {}).get(name) for name in prop_names}
                if e.get("message_group"):
                    event["message_group"] = e["message_group"]
                emit("recv", **event)
            elif e["event"] == "acked":
                emit("acked", body=e["body"], member=member_base + e["member"], at=e["at"])
            elif e["event"] == "error":
                emit("error", error=e["error"])
        return code == 0

    if op == "crowd":  # its producers send while its consumers receive
        return crowd_cell(column, params, endpoint, wait)
    if not send(params["messages"]):
        return 1
    if op == "consume":
        return 0 if consume(params.get("expect") or params["messages"], 0) else 1
    if op in ("retry", "pop"):
        refused = params["messages"] if op == "retry" else params["fail_once"]
        # retry: back no sooner than delay level 3 (a second more, as the SDK's receive returns a little after
        # the broker's pop time); pop: 2 s, as the 5.x push consumer's 10 s is too long here
        invisible = math.ceil(params["levels"][2]) + 1 if op == "retry" else 2
        return 0 if consume(params["messages"], 0, invisible=invisible,
                            actions={m["body"]: "skip_once" for m in refused}) else 1
    if op == "fifo_consume":
        # one message a receive: a re-popped batch counts a delivery for every message in it (as Apache does)
        return 0 if consume(params["messages"], 0, invisible=2, batch=1, fifo=True,
                            actions={body: "skip_once" for body in params["fail_once"]}) else 1
    if op == "dlq_consume":
        if dlq_cell(column, params, endpoint, wait) != 0:
            return 1
        time.sleep(params.get("linger", 0.0))
        return 0 if consume(params["messages"], 1, topic="%DLQ%" + params["group"], group=params["group"] + "_dlq",
                            tag="*", expression_type="TAG", members=1, linger=0.0) else 1
    if op == "dlq":
        return dlq_cell(column, params, endpoint, wait)
    if op == "restart":
        if not consume(params["messages"], 0):
            return 1
        if not send(params["later"]):
            return 1
        return 0 if consume(params["later"], 1) else 1
    emit("error", error=f"no consumer op {op}")
    return 1


def crowd_cell(column: str, params: dict, endpoint: str, wait: float) -> int:
    """One SDK process: ``members`` SimpleConsumers receive while ``producers`` producers send (op ``crowd``)."""
    sdk = {"op": "crowd", "endpoint": endpoint, "topic": params["topic"], "group": params["group"],
           "messages": [dict(item, producer=spec["producer"]) for item, spec in zip(sdk_messages("send", params), params["messages"])],
           "producers": params["producers"], "members": params["members"], "expect": len(params["messages"]),
           "invisible": params["invisible"], "wait": wait, "linger": params.get("linger", 0.0), "tag": "*",
           "expression_type": "TAG"}
    code, events = run_sdk(column, sdk, wait + 60)
    for e in events:
        if e["event"] == "sent":
            emit("sent", body=e["body"], at=e["at"], status="SEND_OK", msg_id=e["msg_id"], offset_msg_id="",
                 producer=e.get("producer"))
        elif e["event"] == "recv":
            emit("recv", body=e["body"], tags=e.get("tag"), keys=e.get("keys") or [], topic=e["topic"], queue_id=-1,
                 reconsume=(e.get("attempt") or 1) - 1, member=e["member"], at=e["at"])
        elif e["event"] == "acked":
            emit("acked", body=e["body"], member=e["member"], at=e["at"])
        elif e["event"] == "error":
            emit("error", error=e["error"])
    return code


def refused_cell(column: str, params: dict) -> int:
    """One send per spec with the cell's keys / TLS: each a ``sent`` (SEND_OK) or a ``refused`` event."""
    code, events = run_sdk(column, {"op": "refused_send", "endpoint": os.environ["RMQTX_INTEROP_GRPC"],
                                    "topic": params["topic"], "messages": sdk_messages("send", params)},
                           params.get("wait", 10) + 60)
    for e in events:
        if e["event"] == "sent":
            emit("sent", body=e["body"], at=e["at"], status="SEND_OK", msg_id=e["msg_id"], offset_msg_id="")
        elif e["event"] == "refused":
            emit("refused", body=e["body"], error=e["error"])
        elif e["event"] == "error":
            emit("error", error=e["error"])
    return code


def main(column: str, op: str, params: dict) -> int:
    security(params)
    if op == "refused_send":
        return refused_cell(column, params)
    if op in ("consume", "retry", "restart", "pop", "dlq", "dlq_consume", "fifo_consume", "crowd"):
        return consume_cell(column, op, params)
    started = time.time()
    endpoint = os.environ["RMQTX_INTEROP_GRPC"]
    sdk = {"op": "tx" if op == "transaction" else "send", "endpoint": endpoint, "topic": params["topic"],
           "messages": sdk_messages(op, params), "async": params.get("mode") == "async", "wait": params.get("wait", 30)}
    proc = subprocess.run(sdk_command(column), input=json.dumps({**_SECURITY, **sdk}), capture_output=True, text=True,
                          timeout=params.get("wait", 30) + 60, cwd=REPO)
    sys.stderr.write(proc.stderr[-4000:])
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        e = json.loads(line)
        if e["event"] == "sent":
            emit("sent", body=e["body"], at=e["at"], status="SEND_OK", msg_id=e["msg_id"], offset_msg_id="",
                 **({"queue_offset": e["offset"]} if e.get("offset") is not None else {}))
        elif e["event"] == "ended":
            state = "COMMIT_MESSAGE" if e["action"] == "commit" else "ROLLBACK_MESSAGE"
            emit("local", body=e["body"], at=e["at"], state=state)
        elif e["event"] == "checked":
            emit("checked", body=e["body"], at=e["at"], state=f"{e['state']}_MESSAGE")
        elif e["event"] == "error":
            emit("error", error=e["error"])
    if proc.returncode != 0:
        emit("error", error=f"{column} SDK driver exited {proc.returncode}")
        return 1
    prop_names = sorted({k for m in params["messages"] for k in (m.get("props") or {})})
    for msg in read_back(params, expected(op, params), started + params.get("wait", 30) + 10):
        event = {"body": msg.body.split(b"#", 1)[0].decode(), "tags": msg.tags, "keys": msg.keys,
                 "topic": msg.topic, "queue_id": msg.queue_id, "queue_offset": msg.queue_offset,
                 "reconsume": msg.reconsume_times, "member": 0, "at": msg.store_timestamp / 1000}
        if len(msg.body) > 1024:
            event.update(size=len(msg.body), sha256=hashlib.sha256(msg.body).hexdigest())
        if prop_names:
            event["props"] = {name: msg.properties.get(name) for name in prop_names}
        emit("recv", **event)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
