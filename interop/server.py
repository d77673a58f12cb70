"""A standalone (``twistd rmqstandalone``) the runner starts itself when no --namesrv is given.

It runs on free loopback ports with its store, config and log in a temp dir, configured for the
matrix (short delay levels, property filters, quick transaction check-backs) and the mode's ACL/TLS.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from interop.modes import Mode
from interop.probe import Access, Probe
from testkit.matrix import MATRIX_CONF
from testkit.ports import free_port

REPO = Path(__file__).resolve().parents[1]


class Standalone:
    """Name server and broker in one process; ``start`` returns once the broker is registered."""

    def __init__(self, mode: Mode, access: Access, grpc_stubs: str | None = None) -> None:
        """``grpc_stubs``: a venv with rocketmq-python-client, to open the gRPC endpoint (``grpc``) as well."""
        self.root = Path(tempfile.mkdtemp(prefix=f"rmqtx-interop-{mode.name}-"))
        self.access = access
        self.namesrv = f"127.0.0.1:{free_port()}"
        self.broker = f"127.0.0.1:{free_port()}"
        conf = {"brokerName": "broker-a", "flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
                "haListenPort": str(free_port()), **MATRIX_CONF, **mode.server_conf(self.root)}
        self.grpc = ""
        self.grpc_stubs = grpc_stubs
        if grpc_stubs:
            self.grpc = f"127.0.0.1:{free_port()}"
            conf["grpcPort"] = self.grpc.rsplit(":", 1)[1]
        self.conf_path = self.root / "broker.conf"
        self.conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.log_path = self.root / "twistd.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> "Standalone":
        cmd = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "-n", "--pidfile=", "--logfile",
               str(self.log_path), "rmqstandalone", "-c", str(self.conf_path), "--namesrv-port", self.namesrv.rsplit(":", 1)[1],
               "--port", self.broker.rsplit(":", 1)[1], "--store", str(self.root / "store")]
        env = {**os.environ, "RMQTX_GRPC_STUBS": self.grpc_stubs} if self.grpc_stubs else None
        with open(self.root / "stdout.txt", "wb") as out:  # a refused start says why here, in one line
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = (self.root / "stdout.txt").read_text(errors="replace")
                raise RuntimeError(f"rmqstandalone exited with {self.proc.returncode}: {said[-500:]}{self.log()[-2000:]}")
            try:
                if Probe(self.namesrv, access=self.access).master_addr() == self.broker:
                    return self
            except (OSError, RuntimeError):
                pass
            time.sleep(0.2)
        self.close()
        raise RuntimeError(f"rmqstandalone did not come up in {timeout:.0f} s: {self.log()[-2000:]}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def close(self) -> str:
        """Stop it and remove its files; its log, for the runner's last checks."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        log = self.log()
        shutil.rmtree(self.root, ignore_errors=True)
        return log
