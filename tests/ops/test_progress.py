"""Long offline jobs say how far they are and end with one summary line (store verify here; Spark in tests/spark)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

from rmqtx.common.progress import Progress
from testkit.standalone import REPO
from tests.store.helpers import FIXTURES


class VerifyCommandTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="rmqtx-verify-")
        self.addCleanup(tmp.cleanup)
        with tarfile.open(FIXTURES / "store-java-4.9.8-clean.tar.gz") as tf:
            tf.extractall(tmp.name, filter="data")
        self.store = os.path.join(tmp.name, "store")

    def verify(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rmqtx.store", "verify", self.store], cwd=REPO,
                              capture_output=True, text=True, timeout=120)

    def test_summary_line_on_stderr_and_json_on_stdout(self) -> None:
        proc = self.verify()
        self.assertEqual(proc.returncode, 0, proc.stderr)
        report = json.loads(proc.stdout)  # stdout stays one JSON document
        self.assertTrue(report["ok"])
        self.assertRegex(proc.stderr.splitlines()[-1],
                         r"^verify: OK, 197 records \(1\.2 MiB\) in 2 commit log files, 197 consume queue units, "
                         r"434 index entries, 0 errors \(\d+\.\d s\)$")

    def test_summary_line_names_errors(self) -> None:
        path = os.path.join(self.store, "commitlog", f"{0:020d}")
        with open(path, "r+b") as fh:  # one byte of the first record's body: its CRC no longer matches
            fh.seek(200)
            byte = fh.read(1)
            fh.seek(200)
            fh.write(bytes([byte[0] ^ 0xFF]))
        proc = self.verify()
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertFalse(json.loads(proc.stdout)["ok"])
        self.assertRegex(proc.stderr.splitlines()[-1], r"^verify: ERRORS, \d+ records .* [1-9]\d* errors \(\d+\.\d s\)$")


class ProgressTest(unittest.TestCase):
    def test_lines_at_most_every_interval_then_the_summary(self) -> None:
        now = [100.0]
        lines: list[str] = []
        progress = Progress("job", say=lines.append, interval=2.0, clock=lambda: now[0])
        for step in range(10):  # 10 ticks 0.5 s apart: lines at 2 s and 4 s only
            now[0] += 0.5
            progress.tick(step * 1024 * 1024, 10 * 1024 * 1024, "read")
        now[0] += 0.3
        progress.done("10 things")
        self.assertEqual(lines, ["job: 30% (3.0 MiB of 10.0 MiB) read", "job: 70% (7.0 MiB of 10.0 MiB) read",
                                 "job: 10 things (5.3 s)"])
