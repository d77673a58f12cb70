"""The Apache Go client (``github.com/apache/rocketmq-client-go/v2``) as a column, from ``interop/go``.

The program is built once per matrix run with ``go build`` (modules from the Go module proxy, pinned
by ``interop/go/go.sum``) into a temp dir; Go's own build cache makes later runs quick.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile

from interop.drivers.base import REPO, Driver
from interop.probe import Probe
from interop.scenarios import Context, Scenario

GO_DIR = REPO / "interop" / "go"
BUILD_TIMEOUT = 600  # a cold module download and compile on a slow machine
NO_API = "rocketmq-client-go v2 has no {}"
#: A new consumer asks for its %RETRY% topic's route 10 ms after start, racing its own first heartbeat
#: (which makes the broker create that topic); when it loses, it sees the route at the next refresh
#: (every 30 s) and pulls the retry queue after the next rebalance (every 20 s). Retry cells wait for both.
RETRY_ROUTE_S = 30.0 + 20.0
#: SeekOffset on its pull consumer takes effect at the queue's next pull, after the long poll in flight,
#: which the broker holds up to the 20 s suspend timeout the client sends.
LONG_POLL_S = 20.0


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


class GoDriver(Driver):
    name = "go"
    unsupported = {
        "query_id": NO_API.format("message view/query API (VIEW_MESSAGE_BY_ID and QUERY_MESSAGE exist only in its internal package)"),
        "query_key": NO_API.format("message query API (QUERY_MESSAGE exists only in its internal package)"),
        "admin_cluster": NO_API.format("cluster or broker runtime info in its admin API (GET_BROKER_CLUSTER_INFO is commented out of admin.Admin)"),
        "admin_progress": NO_API.format("consume stats in its admin API (no GET_CONSUME_STATS)"),
        "timer": NO_API.format("timer message API (delivery time / delay in ms are RocketMQ 5.x; it has delay levels only)"),
        "pop": NO_API.format("POP consumer (RocketMQ 5.x)"),
        # Brokers match a tag subscription by the codes the client puts in its heartbeat (Apache 4.9.8 too).
        "non_ascii": "rocketmq-client-go v2 hashes subscribed tags over UTF-8 bytes (utils.HashString), brokers hash stored "
                     "tags as Java's String.hashCode over UTF-16: a non-ASCII tag subscription matches nothing",
    }

    def __init__(self) -> None:
        self.binary = ""

    def prepare(self) -> str | None:
        go = shutil.which("go")
        if not go:
            return "no Go toolchain (go) on PATH"
        out = tempfile.mkdtemp(prefix="rmqtx-interop-go-")
        atexit.register(shutil.rmtree, out, True)
        binary = os.path.join(out, "interop-go")
        # -mod=readonly: go.sum must already pin every module (a fresh machine needs only the proxy)
        cmd = [go, "build", "-mod=readonly", "-trimpath", "-o", binary, "."]
        try:
            done = subprocess.run(cmd, cwd=GO_DIR, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            return f"go build of interop/go took longer than {BUILD_TIMEOUT} s"
        if done.returncode != 0:
            return f"go build of interop/go failed: {_tail(done.stderr)}"
        self.binary = binary
        return None

    def adapt(self, scenario: Scenario, params: dict, ctx: Context) -> str | None:
        """Topics are created on a broker address (``admin.WithBrokerAddrCreate``); some cells wait for the client's timers."""
        if scenario.key == "admin_topic":
            params["broker"] = ctx.broker or Probe(ctx.namesrv).master_addr()
        elif scenario.key in ("retry", "dlq", "dlq_consume"):
            params["wait"] += RETRY_ROUTE_S
        elif scenario.key == "lite_pull":
            params["wait"] += LONG_POLL_S
        return super().adapt(scenario, params, ctx)

    def command(self, op: str, params: dict) -> list[str]:
        return [self.binary, op, json.dumps(params)]
