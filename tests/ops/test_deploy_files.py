"""The example systemd unit (conf/rmqtx-standalone.service) is one systemd accepts."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from testkit.standalone import REPO

UNIT = REPO / "conf" / "rmqtx-standalone.service"


class SystemdUnitTest(unittest.TestCase):
    def verify(self, text: str) -> subprocess.CompletedProcess:
        analyze = shutil.which("systemd-analyze")
        self.assertIsNotNone(analyze, "systemd-analyze is needed: scripts/ensure-interop.sh installs systemd")
        tmp = Path(tempfile.mkdtemp(prefix="rmqtx-unit-"))
        self.addCleanup(shutil.rmtree, tmp, True)
        unit = tmp / UNIT.name
        unit.write_text(text)
        return subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=120)

    def test_unit_verifies(self) -> None:
        text = UNIT.read_text()
        exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
        self.assertIn("twistd -n --pidfile= rmqstandalone", exec_start)
        # the unit's twistd is /opt/rmqtx's; systemd checks that the binary exists, so point it at this one
        twistd = Path(sys.executable).parent / "twistd"
        proc = self.verify(text.replace("/opt/rmqtx/bin/twistd", str(twistd)))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual([line for line in proc.stderr.splitlines() if UNIT.name in line], [])
        broken = self.verify(text.replace("Restart=on-abnormal", "Restart=on-abnormal\nRestartt=always"))
        self.assertIn("Unknown key", broken.stderr)  # the check above can fail
