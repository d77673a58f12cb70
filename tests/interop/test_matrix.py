"""``python -m interop`` against a fresh standalone: the table's shape, its summary, and what must PASS today."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

from interop.scenarios import SCENARIOS
from tests.e2e.harness import REPO, Standalone

CLIENTS = ["cpp", "node", "python", "java", "go"]
#: Short delay levels keep retry (level 3) and the C++ client's 16 retries before the DLQ quick.
LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
SERVER_CONF = {"messageDelayLevel": LEVELS, "enablePropertyFilter": "true",
               "transactionCheckInterval": "2000", "transactionTimeOut": "3000"}
CELL = re.compile(r"^(PASS|FAIL: .+|SKIP: .+)$")
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")

#: What the broker supports today, for each client that can do it.
MUST_PASS = {
    "cpp": ["sync send", "async send", "oneway send", "batch send", "cluster consume", "broadcast consume",
            "tag filter", "orderly", "delay level", "retry", "DLQ"],
    "node": ["sync send", "async send", "cluster consume", "broadcast consume", "tag filter", "SQL92 filter",
             "delay level", "retry", "DLQ"],
    "python": ["sync send", "async send", "oneway send", "batch send", "cluster consume", "broadcast consume",
               "tag filter", "SQL92 filter", "orderly", "delay level", "retry", "DLQ", "transaction commit",
               "transaction rollback", "transaction check-back", "query by id", "query by key",
               "admin topic create/list", "admin cluster info", "admin consumer progress"],
    "go": ["sync send", "async send", "oneway send", "batch send", "cluster consume", "broadcast consume",
           "tag filter", "SQL92 filter", "orderly", "delay level", "retry", "DLQ", "transaction commit",
           "transaction rollback", "transaction check-back", "admin topic create/list"],
}

_run: tuple[int, str, str] | None = None


def matrix() -> tuple[int, str, str]:
    """Run the whole matrix once per test process (trial runs no setUpClass): exit status, stdout, stderr."""
    global _run
    if _run is None:
        server = Standalone(SERVER_CONF).start()
        try:
            cmd = [sys.executable, "-m", "interop", "--namesrv", server.namesrv, "--broker", server.broker,
                   "--clients", ",".join(CLIENTS), "--delay-levels", LEVELS]
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)  # a cold go build: ~2 min
            _run = (proc.returncode, proc.stdout, proc.stderr)
        finally:
            server.close()
    return _run


def table() -> dict[str, dict[str, str]]:
    """scenario title -> client -> cell text."""
    rows = [line for line in matrix()[1].splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    out = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        out[cells[0]] = dict(zip(header[1:], cells[1:]))
    return out


class InteropMatrixTest(unittest.TestCase):
    def test_table_shape(self) -> None:
        lines = [line for line in matrix()[1].splitlines() if line.startswith("|")]
        self.assertEqual(lines[0], "| scenario | " + " | ".join(CLIENTS) + " |")
        self.assertEqual(lines[1], "|---" * (len(CLIENTS) + 1) + "|")
        self.assertEqual(list(table()), [s.title for s in SCENARIOS])
        for title, cells in table().items():
            self.assertEqual(list(cells), CLIENTS, title)
            for client, text in cells.items():
                self.assertRegex(text, CELL, f"{title} / {client}")

    def test_summary_line_counts_pass_and_fail(self) -> None:
        code, out, err = matrix()
        last = out.strip().splitlines()[-1]
        match = SUMMARY.match(last)
        self.assertIsNotNone(match, last)
        cells = [text for cells in table().values() for text in cells.values()]
        passed, failed = int(match[1]), int(match[2])
        self.assertEqual(passed, sum(t == "PASS" for t in cells))
        self.assertEqual(failed, sum(t.startswith("FAIL") for t in cells))
        self.assertEqual(code, 0 if failed == 0 else 1, err[-2000:])

    def test_every_skip_has_a_reason(self) -> None:
        for title, cells in table().items():
            for client, text in cells.items():
                if text.startswith("SKIP"):
                    self.assertGreater(len(text[len("SKIP: "):].strip()), 10, f"{title} / {client}")

    @unittest.skipIf(os.environ.get("ROCKETMQ_CLIENT_CLASSPATH")
                     or (Path.home() / ".m2/repository/org/apache/rocketmq/rocketmq-client/4.9.8/rocketmq-client-4.9.8.jar").exists(),
                     "this machine has the Java client's jars")
    def test_java_column_skipped_without_jars(self) -> None:
        for title, cells in table().items():
            self.assertTrue(cells["java"].startswith("SKIP: "), f"{title}: {cells['java']}")
            self.assertIn("no Maven repository", cells["java"])
            self.assertIn("no Docker", cells["java"])

    def test_supported_scenarios_pass(self) -> None:
        rows = table()
        failing = [f"{title} / {client}: {rows[title][client]}" for client, titles in MUST_PASS.items()
                   for title in titles if rows[title][client] != "PASS"]
        self.assertEqual(failing, [], matrix()[2][-3000:])

    def test_no_cell_fails(self) -> None:
        """The CI bar: every cell is PASS or an honest SKIP."""
        failing = [f"{title} / {client}: {text}" for title, cells in table().items() for client, text in cells.items()
                   if text.startswith("FAIL")]
        self.assertEqual(failing, [], matrix()[2][-3000:])


if __name__ == "__main__":
    unittest.main()
