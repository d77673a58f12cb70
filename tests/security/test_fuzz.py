"""The decoders' regression cases, and a short coverage-guided fuzz run when atheris is installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from tests.security.hostile import one_input, seed_inputs

TARGET = Path(__file__).with_name("fuzz_decoders.py")


class DecoderRegressionTest(unittest.TestCase):
    def test_seeds_and_found_cases_decode_or_refuse_cleanly(self) -> None:
        for data in seed_inputs():
            one_input(data)  # raises on anything but a clean refusal


class FuzzRunTest(unittest.TestCase):
    def test_fuzz_briefly(self) -> None:
        if importlib.util.find_spec("atheris") is None:
            if os.environ.get("CI", "").lower() == "true":
                self.fail("atheris is not installed but CI=true requires the fuzz run")
            raise unittest.SkipTest("atheris not installed (pip install atheris)")
        seconds = int(os.environ.get("RMQTX_FUZZ_SECONDS", "20"))
        with tempfile.TemporaryDirectory(prefix="rmqtx-fuzz-") as tmp:
            corpus = Path(tmp) / "corpus"
            corpus.mkdir()
            for i, seed in enumerate(seed_inputs()):
                (corpus / f"seed{i}").write_bytes(seed)
            proc = subprocess.run(
                [sys.executable, str(TARGET), f"-max_total_time={seconds}", "-rss_limit_mb=1024",
                 f"-artifact_prefix={tmp}/", str(corpus)],
                capture_output=True, text=True, timeout=seconds + 120, cwd=tmp,
            )
            crashes = sorted(p.name for p in Path(tmp).glob("crash-*"))
        self.assertEqual(proc.returncode, 0, f"fuzz crash {crashes}:\n{proc.stderr[-4000:]}")
        self.assertIn("Done", proc.stderr)
