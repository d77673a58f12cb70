"""The base of every driver: which scenarios it cannot do (and why), and how to run one cell in a subprocess.

Every cell runs in its own process group with a timeout: a client waiting on a silent server can
block for minutes, and a crash must not take the matrix down.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from interop.scenarios import Context, Scenario

REPO = Path(__file__).resolve().parents[2]


def without_tx_query_admin(no_api: str) -> dict[str, str]:
    """Skip reasons for a client library with no transactional producer, query API or admin API."""
    missing = {"tx_commit": "transactional producer", "tx_rollback": "transactional producer",
               "tx_check": "transactional producer", "query_id": "message view/query API",
               "query_key": "message view/query API", "admin_topic": "admin API", "admin_cluster": "admin API",
               "admin_progress": "admin API"}
    return {key: no_api.format(api) for key, api in missing.items()}


@dataclass
class CellRun:
    """What came out of one driver process."""

    events: list[dict] = field(default_factory=list)
    timed_out: bool = False
    returncode: int | None = None
    stderr: str = ""


class Driver:
    """Base: subclasses name the client, list what it cannot do and build the command line."""

    name = ""
    unsupported: dict[str, str] = {}
    #: (name, n): at most n cells of all drivers sharing the name run at once (JVM start-ups are CPU-bound).
    slot: tuple[str, int] | None = None
    #: Why a refused send's error cannot show the broker's remark (the client drops it), or "".
    drops_remarks = ""

    def prepare(self) -> str | None:
        """Once per matrix run; a reason when the whole column must be skipped."""
        return None

    def adapt(self, scenario: Scenario, params: dict, ctx: Context) -> str | None:
        """Adjust ``params`` to the client; a reason when this scenario is out of its reach."""
        if self.drops_remarks and params.get("refusal"):
            params["refusal"] = None  # still refused, and still nothing stored
        return self.unsupported.get(scenario.key)

    def command(self, op: str, params: dict) -> list[str]:
        raise NotImplementedError

    def run(self, op: str, params: dict, timeout: float) -> CellRun:
        """Run one cell; JSON lines on stdout are events, anything else is ignored."""
        with tempfile.TemporaryDirectory(prefix=f"rmqtx-interop-{self.name}-") as home:
            env = {**os.environ, "HOME": home, "PYTHONPATH": str(REPO)}
            proc = subprocess.Popen(self.command(op, params), cwd=REPO, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
            out = CellRun()
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                out.timed_out = True
            out.returncode, out.stderr = proc.returncode, stderr
            for line in stdout.splitlines():
                if line.startswith("{"):
                    try:
                        out.events.append(json.loads(line))
                    except ValueError:
                        continue
            return out
