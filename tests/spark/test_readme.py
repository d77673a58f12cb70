"""The README's Spark one-liner, run as a newcomer would: the venv's python by path, the venv not on PATH."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from rmqtx.spark.session import find_java

from .support import REPO, requires_spark, write_store

PREFIX = ".venv/bin/python -c "


def readme_one_liner() -> str:
    """The README line that reads a store with Spark."""
    lines = [line for line in (REPO / "README.md").read_text().splitlines()
             if line.startswith(PREFIX) and "rmqtx.spark.register" in line]
    if len(lines) != 1:
        raise AssertionError(f"expected one Spark one-liner in README.md, found {len(lines)}")
    return lines[0]


@requires_spark
class ReadmeOneLinerTest(unittest.TestCase):
    def test_one_liner_without_an_activated_venv(self) -> None:
        work = tempfile.mkdtemp(prefix="rmqtx-readme-")
        self.addCleanup(shutil.rmtree, work, True)
        put = write_store(os.path.join(work, "store"))
        command = sys.executable + " " + readme_one_liner()[len(".venv/bin/python "):]
        here = os.path.dirname(sys.executable)
        path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.realpath(d) != os.path.realpath(here)]
        path.append(os.path.dirname(find_java()))
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
        env.update(PATH=os.pathsep.join(path), PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1")
        self.assertNotEqual(os.path.realpath(shutil.which("python3", path=env["PATH"]) or ""), os.path.realpath(sys.executable))
        proc = subprocess.run(["sh", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        rows = dict(re.findall(r"^\|\s*(R_[AB])\s*\|\s*(\d+)\s*\|$", proc.stdout, re.M))
        expected = {t: str(sum(1 for p in put if p["topic"] == t)) for t in ("R_A", "R_B")}
        self.assertEqual(rows, expected, proc.stdout)
