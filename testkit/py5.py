"""Helpers for the gRPC tests: the py5 venv (rocketmq-python-client), a standalone with its gRPC
endpoint, the driver, and reading back what the broker stored over remoting PULL_MESSAGE."""

from __future__ import annotations

import json
import os
import subprocess
import time
import unittest
from pathlib import Path
from typing import Callable

from rmqtx.client.message import MessageExt, decode_messages
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader
from testkit.ports import free_port
from testkit.standalone import REPO, Standalone, call

#: scripts/ensure-py5.sh makes it; $RMQTX_PY5_VENV points elsewhere.
PY5_VENV = Path(os.environ.get("RMQTX_PY5_VENV") or REPO / "interop" / "py5" / ".venv")
DRIVER = REPO / "interop" / "py5" / "driver.py"


def py5_python() -> str:
    python = PY5_VENV / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"no py5 venv at {PY5_VENV}: run scripts/ensure-py5.sh")
    return str(python)


def grpc_standalone(*, by_option: bool = False, **conf: str) -> Standalone:
    """A standalone with its gRPC endpoint on a free loopback port (``server.grpc``), turned on by
    ``grpcPort`` in broker.conf or, ``by_option``, by ``--grpc-port``."""
    port = free_port()
    server = Standalone(conf if by_option else {"grpcPort": str(port), **conf})
    if by_option:
        server.plugin_args = ["--grpc-port", str(port)]
    server.grpc = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    server.env = {"RMQTX_GRPC_STUBS": str(PY5_VENV)}
    return server


def stop_cleanly(server: Standalone) -> None:
    """Stop and remove a test's standalone; an unclean shutdown fails the test, with the broker's log."""
    clean = server.stop()
    log = server.log()
    server.close()
    if not clean:
        raise AssertionError(f"standalone with gRPC did not shut down cleanly\n{log}")


def run_driver(params: dict, timeout: float = 60) -> list[dict]:
    proc = subprocess.run([py5_python(), str(DRIVER), json.dumps(params)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    errors = [e for e in events if e["event"] == "error"]
    if proc.returncode != 0 or errors:
        raise AssertionError(f"py5 driver failed ({proc.returncode}): {errors}\n{proc.stderr[-3000:]}")
    return events


def pull_queue(broker: str, topic: str, queue_id: int, ask: Callable = call) -> list[MessageExt]:
    """Every message of one queue, through the broker (PULL_MESSAGE as a 4.x consumer sends it); ``ask``
    makes the call (interop's signs and speaks TLS in the security modes)."""
    out: list[MessageExt] = []
    offset = 0
    while True:
        header = PullMessageRequestHeader(
            consumerGroup="CID_grpc_check", topic=topic, queueId=queue_id, queueOffset=offset, maxMsgNums=32, sysFlag=4,
            commitOffset=0, suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG",
        )
        resp = ask(broker, header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE)))
        if resp.code != ResponseCode.SUCCESS:
            return out
        out += decode_messages(resp.body or b"")
        offset = PullMessageResponseHeader.from_command(resp).nextBeginOffset


def pull_topic(broker: str, topic: str, queues: int, ask: Callable = call) -> dict[int, list[MessageExt]]:
    return {q: pull_queue(broker, topic, q, ask) for q in range(queues)}


def wait_for_bodies(broker: str, topic: str, queues: int, bodies: set[str], timeout: float) -> dict[str, MessageExt]:
    """Pull until every body in ``bodies`` is stored in ``topic`` (or fail at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {m.body.decode(): m for msgs in pull_topic(broker, topic, queues).values() for m in msgs}
        if bodies <= set(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


class GrpcServerTest(unittest.TestCase):
    """A standalone with its gRPC endpoint per test (trial runs no setUpClass); it must stop cleanly."""

    conf: dict[str, str] = {}
    topic_prefix = "GRPC"
    queues = 4

    def setUp(self) -> None:
        self.server = grpc_standalone(**self.conf).start()

    def tearDown(self) -> None:
        stop_cleanly(self.server)

    def _topic(self, name: str, message_type: str = "") -> str:
        """A new topic; of a 5.x ``message.type`` (FIFO, DELAY, TRANSACTION) when named, as Apache's proxy and the
        SDKs take only messages of the topic's type."""
        topic = f"{self.topic_prefix}_{name}_{int(time.time() * 1000) % 10**8}"
        self.server.create_topic(topic, self.queues, message_type)
        return topic
