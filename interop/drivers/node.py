"""The Node client ali-ons (``interop/node``) as a column; the cells run ``node interop/drivers/node.js``."""

from __future__ import annotations

import json
import shutil

from interop.drivers.base import REPO, Driver, without_tx_query_admin
from interop.scenarios import Context, Scenario

ALI_ONS = REPO / "interop" / "node" / "node_modules" / "ali-ons"
NO_API = "ali-ons 3.12 has no {}"
NO_TLS = NO_API.format("TLS (its channels are plain net sockets, no TLS option)")


class NodeDriver(Driver):
    name = "node"
    unsupported = {
        "oneway_send": NO_API.format("oneway send"),
        "pop": NO_API.format("POP consumer (RocketMQ 5.x)"),
        "batch_send": NO_API.format("batch send"),
        "orderly": NO_API.format("queue selector or orderly consumer"),
        **without_tx_query_admin(NO_API),
        "request_reply": NO_API.format("request-reply API (request / reply message)"),
        "lite_pull": NO_API.format("lite pull consumer (assign/seek/commit)"),
        "timer": NO_API.format("timer message API (delivery time / delay in ms are RocketMQ 5.x; it has delay levels only)"),
    }

    drops_remarks = "ali-ons 3.12 answers a refused send with its own 'Send [n] times, still failed' error"

    def prepare(self) -> str | None:
        if not shutil.which("node"):
            return "node is not on PATH"
        return None if ALI_ONS.exists() else "ali-ons missing: run npm ci in interop/node"

    def adapt(self, scenario: Scenario, params: dict, ctx: Context) -> str | None:
        return NO_TLS if params.get("tls") else super().adapt(scenario, params, ctx)

    def command(self, op: str, params: dict) -> list[str]:
        return [shutil.which("node") or "node", str(REPO / "interop" / "drivers" / "node.js"), op, json.dumps(params)]
