"""What keeps the pytest env's two workers (pytest-xdist processes) apart: port slices and the build lock."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import unittest
from unittest import mock

from testkit import ports
from testkit.standalone import REPO

#: A child that takes the build lock, says so with a timestamp, holds it for a while, then says it let go.
HOLDER = """
import sys, time
from testkit.buildlock import one_build_at_a_time

@one_build_at_a_time
def build():
    print("in", time.monotonic(), flush=True)
    time.sleep(float(sys.argv[1]))
    print("out", time.monotonic(), flush=True)

build()
"""


class PortSlicesTest(unittest.TestCase):
    def share(self, worker: str, count: str) -> tuple[int, int]:
        env = {"PYTEST_XDIST_WORKER": worker, "PYTEST_XDIST_WORKER_COUNT": count}
        with mock.patch.dict(os.environ, env):
            return ports._share(32768)

    def test_workers_pick_from_disjoint_slices(self) -> None:
        first, second = self.share("gw0", "2"), self.share("gw1", "2")
        self.assertEqual(first, (10000, 21384))
        self.assertEqual(second, (21384, 32768))

    def test_one_process_picks_from_the_whole_range(self) -> None:
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("PYTEST_XDIST_WORKER", None)
            self.assertEqual(ports._share(32768), (10000, 32768))
        self.assertEqual(self.share("gw0", "1"), (10000, 32768))
        self.assertEqual(self.share("master", "2"), (10000, 32768))

    def test_a_workers_picks_stay_in_its_slice(self) -> None:
        with mock.patch.dict(os.environ, {"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"}), \
                mock.patch.object(ports, "_ephemeral_low", return_value=32768):
            picks = [ports._candidate("127.0.0.1") for _ in range(20)]
        self.assertTrue(all(21384 + ports.NEIGHBOURS <= p < 32768 - ports.NEIGHBOURS for p in picks), picks)


class BuildLockTest(unittest.TestCase):
    def test_two_processes_build_one_after_the_other(self) -> None:
        with tempfile.TemporaryDirectory(prefix="rmqtx-buildlock-") as cache:
            env = {**os.environ, "XDG_CACHE_HOME": cache, "PYTHONPATH": str(REPO)}
            procs = [subprocess.Popen([sys.executable, "-c", HOLDER, "0.5"], env=env, stdout=subprocess.PIPE, text=True)
                     for _ in range(2)]
            spans = []
            for proc in procs:
                out, _ = proc.communicate(timeout=60)
                self.assertEqual(proc.returncode, 0, out)
                marks = dict(line.split() for line in out.split("\n") if line)
                spans.append((float(marks["in"]), float(marks["out"])))
            spans.sort()
            self.assertLessEqual(spans[0][1], spans[1][0], f"the builds overlapped: {spans}")

    def test_a_builder_calling_another_does_not_wait_for_itself(self) -> None:
        from testkit.buildlock import one_build_at_a_time

        @one_build_at_a_time
        def inner() -> str:
            return "made"

        @one_build_at_a_time
        def outer() -> str:
            return inner()

        made: list[str] = []
        with tempfile.TemporaryDirectory(prefix="rmqtx-buildlock-") as cache, \
                mock.patch.dict(os.environ, {"XDG_CACHE_HOME": cache}):
            thread = threading.Thread(target=lambda: made.append(outer()), daemon=True)  # a deadlock hangs it
            thread.start()
            thread.join(10)
        self.assertEqual(made, ["made"])
