"""The strict guard's floors (tests/conftest.py FLOORS) follow the suite: each tox environment's suite is
collected as tox.ini runs it, and its floor must lie between 90% and 100% of that count, so a floor
neither lets most of the suite vanish unnoticed nor fails a run that ran everything."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
import sys
import unittest

from tests.conftest import FLOORS
from tests.trial_strict import expand
from testkit.standalone import REPO


def tox_command(env: str) -> list[str]:
    """The env's test command from tox.ini, ``{posargs:X}`` as X and ``python`` as this interpreter."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO / "tox.ini")
    line = ini[f"testenv:{env}"]["commands"].strip()
    line = re.sub(r"\{posargs:([^}]*)\}", r"\1", line)
    words = shlex.split(line)
    assert words[0] == "python", line
    return [sys.executable, *words[1:]]


def without_workers(command: list[str]) -> list[str]:
    """The pytest command without pytest-xdist's ``-n N`` and ``--dist MODE``: one process collects."""
    out, skip = [], False
    for word in command:
        if skip:
            skip = False
        elif word in ("-n", "--dist"):
            skip = True
        else:
            out.append(word)
    return out


def collected(env: str) -> int:
    """How many tests the env's command would run, collected without running them (not strict)."""
    command = tox_command(env)
    if command[1:3] == ["-m", "pytest"]:
        command = without_workers(command) + ["--collect-only"]
        pattern = r"^(\d+) tests? collected"
    else:  # python -m tests.trial_strict ... --trial-share: trial's dry run reports every test it would run
        assert command[1:3] == ["-m", "tests.trial_strict"], command
        command = [sys.executable, "-m", "twisted.trial", "--dry-run", *expand(command[-1:])]
        pattern = r"^Ran (\d+) tests? in"
    env_vars = {k: v for k, v in os.environ.items()
                if k not in ("CI", "PYTEST_ADDOPTS", "RMQTX_SUBSET") and not k.startswith("PYTEST_XDIST_")}
    env_vars["RMQTX_STRICT"] = "0"
    proc = subprocess.run(command, cwd=REPO, env=env_vars, capture_output=True, text=True, timeout=600)
    found = re.findall(pattern, proc.stdout, re.M)
    if not found:
        raise AssertionError(f"{env}: no count in the collection's output:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return int(found[-1])


class FloorsTest(unittest.TestCase):
    def test_each_floor_follows_its_suite(self) -> None:
        for env, least in FLOORS.items():
            count = collected(env)
            with self.subTest(env=env, floor=least, collected=count):
                self.assertLessEqual(least, count, f"{env} collects {count} tests, under its floor {least}")
                self.assertGreaterEqual(least, int(0.9 * count),
                                        f"{env} collects {count} tests: raise its floor {least} to about {int(0.95 * count)}")

    def test_a_subset_is_held_to_its_own_floor(self) -> None:
        """RMQTX_SUBSET names a floor; a name with none fails the run instead of lifting the floor."""
        from tests.conftest import floor

        saved = os.environ.get("RMQTX_SUBSET")
        self.addCleanup(lambda: os.environ.__setitem__("RMQTX_SUBSET", saved) if saved is not None
                        else os.environ.pop("RMQTX_SUBSET", None))
        os.environ.pop("RMQTX_SUBSET", None)
        self.assertEqual((floor("pytest"), floor("trial")), (FLOORS["pytest"], FLOORS["trial"]))
        os.environ["RMQTX_SUBSET"] = "pure"
        self.assertEqual(floor("pytest"), FLOORS["pure"])
        os.environ["RMQTX_SUBSET"] = "byte-level suites"
        with self.assertRaises(ValueError):
            floor("pytest")
