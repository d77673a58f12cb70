"""Run ``twistd`` from this tree in a scratch directory and capture what an operator would see."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from testkit.ports import free_port
from testkit.standalone import REPO

TWISTD = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"]


def tree_env() -> dict[str, str]:
    """This tree's rmqtx and twistd plugins first, whatever the working directory."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{path}" if path else str(REPO)}


class Scratch:
    """A temporary working directory with free ports for one standalone."""

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-ops-")
        self.dir = Path(self.tmp.name)
        self.namesrv_port = free_port()
        self.broker_port = free_port()

    def standalone_args(self, *extra: str, store: str | None = None) -> list[str]:
        return ["rmqstandalone", "--namesrv-port", str(self.namesrv_port), "--port", str(self.broker_port),
                "--store", store or str(self.dir / "store"), *extra]

    def run(self, args: list[str], timeout: float = 60, prefix: list[str] | None = None) -> subprocess.CompletedProcess:
        """twistd -n ARGS to completion (for start-ups that must fail)."""
        return subprocess.run([*(prefix or []), *TWISTD, "-n", *args], cwd=self.dir, env=tree_env(),
                              capture_output=True, text=True, timeout=timeout)

    def close(self) -> None:
        self.tmp.cleanup()
