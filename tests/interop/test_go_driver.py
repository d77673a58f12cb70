"""The go column's driver: its SKIP without a toolchain, its build from go.sum alone, its event output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import unittest

from interop.drivers.go import GO_DIR, GoDriver


class GoDriverTest(unittest.TestCase):
    def test_skip_reason_without_go(self) -> None:
        path = os.environ["PATH"]
        os.environ["PATH"] = "/nonexistent"
        try:
            self.assertEqual(GoDriver().prepare(), "no Go toolchain (go) on PATH")
        finally:
            os.environ["PATH"] = path

    @unittest.skipUnless(shutil.which("go"), "no Go toolchain on this machine")
    def test_build_and_events(self) -> None:
        """Built read-only from the committed go.sum; bad input is an ``error`` event on stdout, logs stay off it."""
        driver = GoDriver()
        self.assertIsNone(driver.prepare())
        run = driver.run("no_such_op", {"namesrv": "127.0.0.1:1"}, timeout=60)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertEqual(run.events, [{"kind": "error", "error": 'unknown op "no_such_op"'}])
        done = subprocess.run([driver.binary, "send", "not json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(json.loads(done.stdout)["kind"], "error")

    def test_go_sum_pins_the_client(self) -> None:
        mod = (GO_DIR / "go.mod").read_text()
        self.assertIn("github.com/apache/rocketmq-client-go/v2 ", mod)
        self.assertIn("github.com/apache/rocketmq-client-go/v2 ", (GO_DIR / "go.sum").read_text())


if __name__ == "__main__":
    unittest.main()
