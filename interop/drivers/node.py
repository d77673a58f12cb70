"""The Node client ali-ons (``interop/node``) as a column; the cells run ``node interop/drivers/node.js``."""

from __future__ import annotations

import json
import shutil

from interop.drivers import REPO, Driver, without_tx_query_admin

ALI_ONS = REPO / "interop" / "node" / "node_modules" / "ali-ons"
NO_API = "ali-ons 3.12 has no {}"


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
    }

    def prepare(self) -> str | None:
        if not shutil.which("node"):
            return "node is not on PATH"
        return None if ALI_ONS.exists() else "ali-ons missing: run npm ci in interop/node"

    def command(self, op: str, params: dict) -> list[str]:
        return [shutil.which("node") or "node", str(REPO / "interop" / "drivers" / "node.js"), op, json.dumps(params)]
