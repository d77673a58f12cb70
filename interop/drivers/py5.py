"""The 5.x gRPC SDK columns against rmqtx's gRPC endpoint: ``py5`` (rocketmq-python-client, in its
own venv from ``scripts/ensure-py5.sh``, as its ``rocketmq`` module clashes with the C++ client's,
through ``interop/py5/driver.py``), ``java5grpc`` (rocketmq-client-java from Maven Central,
``interop/java5grpc``, on the host JVM), ``node5`` (rocketmq-client-nodejs from npm, ``interop/node5``)
and ``go5`` (rocketmq-clients golang/v5 from the module proxy, ``interop/go5``). All read the same
params on stdin and print the same events.

They can only produce here: POP over gRPC is not built,
so what it sent is read back through the broker over remoting (PULL_MESSAGE from every queue), and
the ``recv`` events carry each message's store time as ``at`` (when it became visible). The cell
runs ``python -m interop.drivers.py5 COLUMN OP PARAMS``; the endpoint comes from ``$RMQTX_INTEROP_GRPC``
(``python -m interop --grpc HOST:PORT``).
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from interop.drivers import REPO, Driver
from interop.scenarios import Context, Scenario

PY5_VENV = os.environ.get("RMQTX_PY5_VENV") or str(REPO / "interop" / "py5" / ".venv")
SDK_DRIVER = REPO / "interop" / "py5" / "driver.py"
JAVA5GRPC = REPO / "interop" / "java5grpc"
NODE5 = REPO / "interop" / "node5"
GO5 = REPO / "interop" / "go5"
GO5_BUILD_TIMEOUT = 600  # a cold module download and compile on a slow machine
NO_POP = "needs POP over gRPC (not built yet)"
NO_SECURE = "the gRPC endpoint has no ACL or TLS yet"
NO_ENDPOINT = "no gRPC endpoint given (python -m interop --grpc HOST:PORT)"
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
        "cluster_consume": NO_POP,
        "pop": NO_POP,
        "broadcast_consume": NO_POP,
        "tag_filter": NO_POP,
        "sql92_filter": NO_POP,
        "retry": NO_POP,
        "dlq": NO_POP,
        "dlq_consume": NO_POP,
        "three_consumers": NO_POP,
        "restart_resume": NO_POP,
        "lite_pull": NO_POP,
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
        """Plain mode only (the endpoint checks no signature and speaks no TLS), and only with an endpoint."""
        if ctx.mode != "plain":
            return NO_SECURE
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
    }
    slot = ("jvm", 3)

    def prepare(self) -> str | None:
        if not shutil.which("java") or not shutil.which("mvn"):
            return "java or mvn is not on PATH (scripts/ensure-java.sh)"
        if not (JAVA5GRPC / "target" / "classes" / "org" / "rmqtx" / "interop" / "Grpc5.class").exists():
            build = subprocess.run(["mvn", "-q", "-B", "package"], cwd=JAVA5GRPC, capture_output=True, text=True, timeout=900)
            if build.returncode != 0:
                return f"mvn package failed in interop/java5grpc: {build.stdout[-500:]}"
        return None


def _sdk_skips(sdk: str) -> dict[str, str]:
    """py5's skips, with this SDK named where it lacks an API."""
    return {key: (reason.replace("rocketmq-python-client 5.x", sdk) if reason.startswith("rocketmq-python-client") else reason)
            for key, reason in Py5Driver.unsupported.items()}


class Node5Driver(Py5Driver):
    """rocketmq-client-nodejs (npm, ``interop/node5``), same scenarios and checks as py5."""

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
        if op == "orderly":
            item["group"] = f"shard-{spec['shard']}"
        if spec.get("delay"):
            item["delay_s"] = params["levels"][spec["delay"] - 1]
        if spec.get("timer"):  # 5.x SDKs only set a delivery timestamp: the timer's delay from the send's start
            item["delay_s"] = timer_due_s(spec)
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
    from rmqtx.remoting.codes import RequestCode
    from rmqtx.remoting.command import RemotingCommand
    from tests.e2e.harness import call
    from tests.grpc.py5 import pull_topic

    route = json.loads(call(params["namesrv"], RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                       {"topic": params["topic"]})).body)
    broker = route["brokerDatas"][0]["brokerAddrs"]["0"]
    queues = route["queueDatas"][0]["readQueueNums"]

    def stored() -> list:
        return [m for msgs in pull_topic(broker, params["topic"], queues).values() for m in msgs]

    while time.time() < deadline:
        if want <= {m.body.split(b"#", 1)[0].decode() for m in stored()}:
            break
        time.sleep(0.2)
    time.sleep(params.get("linger", 1.0))
    return stored()


def main(column: str, op: str, params: dict) -> int:
    started = time.time()
    endpoint = os.environ["RMQTX_INTEROP_GRPC"]
    sdk = {"op": "tx" if op == "transaction" else "send", "endpoint": endpoint, "topic": params["topic"],
           "messages": sdk_messages(op, params), "async": params.get("mode") == "async", "wait": params.get("wait", 30)}
    proc = subprocess.run(sdk_command(column), input=json.dumps(sdk), capture_output=True, text=True,
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
