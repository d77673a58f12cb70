"""Nothing generated is tracked: a committed build output (a Maven marker in benchmarks/java/target (now testkit/java) once
made Maven skip unpacking Apache's source release) hides on a machine whose caches hold the real thing."""

from __future__ import annotations

import re
import subprocess
import unittest

from testkit.standalone import REPO

#: Paths a build, a tool or an install writes, never a source.
GENERATED = re.compile(
    r"(^|/)(target|build|dist|\.tox|__pycache__|node_modules|\.pytest_cache|\.hypothesis|_trial_temp[^/]*|\.venv[^/]*)/"
    r"|\.(so|pyc|pyo|class|o)$|(^|/)(dropin\.cache|twistd\.pid)$|\.egg-info/"
)


def generated(paths: list[str]) -> list[str]:
    return [p for p in paths if GENERATED.search(p)]


class TrackedFilesTest(unittest.TestCase):
    def test_git_tracks_no_build_output(self) -> None:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True)
        paths = [p for p in listed.stdout.split("\0") if p]
        self.assertGreater(len(paths), 100, "not a checkout of rmqtx?")
        self.assertEqual(generated(paths), [])

    def test_the_pattern_knows_build_outputs(self) -> None:
        """The check above could never fail if the pattern matched nothing a build writes."""
        made = ["benchmarks/java/target/dependency-maven-plugin-markers/x.marker", "rmqtx/_accel.cpython-311-x86_64-linux-gnu.so",
                "rmqtx/__pycache__/a.cpython-311.pyc", ".tox/pytest/x", "interop/node/node_modules/ali-ons/index.js",
                "build/lib/rmqtx/x.py", "rmqtx.egg-info/PKG-INFO", "twisted/plugins/dropin.cache"]
        sources = ["rmqtx/_accel.c", "testkit/java/pom.xml", "tests/captures/apache-4.9.8/messages.jsonl",
                   "rmqtx/broker/processors/send.py", "interop/node/package-lock.json", "deploy/image.py"]
        self.assertEqual(generated(made + sources), made)
