"""A Spark standalone master and workers on loopback, started with pyspark's own spark-class."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from testkit.ports import free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    """`spark-class ...deploy.master.Master` and N `...deploy.worker.Worker` processes, each 1 core."""

    def __init__(self, workers: int = 2, worker_memory: str = "768m") -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-spark-standalone-")
        self.root = Path(self.tmp.name)
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.count = workers
        self.memory = worker_memory
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_LOG_DIR": str(self.root / "logs"), "SPARK_WORKER_DIR": str(self.root / "work"),
                    "SPARK_DAEMON_MEMORY": "256m", "SPARK_NO_DAEMONIZE": "1"}

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "wb")
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self.env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs.append((name, proc))

    def start(self, timeout: float = 90) -> "SparkStandalone":
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i in range(self.count):
            self._spawn(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--cores", "1", "--memory", self.memory, "--webui-port", str(free_port()),
                        "--work-dir", str(self.root / f"work{i}"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
            if self.alive_workers() == self.count:
                return self
            time.sleep(0.2)
        raise RuntimeError(f"{self.count} workers did not register in {timeout} s:\n{self.log('master')}")

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as resp:
                state = json.load(resp)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def log(self, name: str) -> str:
        try:
            return (self.root / f"{name}.log").read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """Workers first, then the master; each process group gets SIGTERM, then SIGKILL."""
        for name, proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        self.procs.clear()
        self.tmp.cleanup()
