"""``python -m interop`` against a fresh standalone: the table's shape, its summary, every cell a client can do PASSes.

Runs under trial only (tox.ini's pytest env ignores tests/interop): the matrix takes minutes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from interop.drivers import all_drivers
from interop.runner import Cell
from interop.scenarios import SCENARIOS
from testkit.matrix import LEVELS, MATRIX_CONF
from testkit.ports import free_port
from testkit.standalone import REPO, Standalone
from testkit.py5 import PY5_VENV

#: Every column: java, java5, go, cpp, node, python and the 5.x gRPC SDKs py5, java5grpc, node5, go5.
DRIVERS = all_drivers()
CLIENTS = list(DRIVERS)
#: The broker the CLI starts for a matrix run (short delay levels, filters, quick check-backs, recall on).
SERVER_CONF = MATRIX_CONF
CELL = re.compile(r"^(PASS|FAIL: .+|SKIP: .+)$")
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")
JOBS = 6  # two cores: more parallel JVM start-ups only make the clients' own timeouts fire


def allowed_skips(client: str) -> dict[str, str]:
    """scenario title -> the reason a driver gives for a scenario its library has no API for, or the reason a
    scenario for some columns only (``Scenario.clients``) gives the others."""
    by_key = {s.key: s.title for s in SCENARIOS}
    out = {s.title: s.clients_reason for s in SCENARIOS if s.clients and client not in s.clients}
    out.update({by_key[key]: reason for key, reason in DRIVERS[client].unsupported.items()})
    return out


_run: tuple[int, str, str] | None = None
#: The run's --log-dir, once it ran.
LOG_DIR: list[str] = []


def matrix() -> tuple[int, str, str]:
    """Run the whole matrix once per test process (trial runs no setUpClass): exit status, stdout, stderr."""
    global _run
    if _run is None:
        grpc_port = free_port()  # the 5.x gRPC SDK columns (py5, java5grpc, node5, go5) talk to the gRPC endpoint
        server = Standalone({**SERVER_CONF, "grpcPort": str(grpc_port)})
        server.env = {"RMQTX_GRPC_STUBS": str(PY5_VENV)}
        server.start()
        try:
            logs = tempfile.mkdtemp(prefix="rmqtx-interop-logs-")  # each cell's events and stderr, for a failure's cause
            LOG_DIR.append(logs)
            cmd = [sys.executable, "-m", "interop", "--namesrv", server.namesrv, "--broker", server.broker,
                   "--clients", ",".join(CLIENTS), "--delay-levels", LEVELS, "--jobs", str(JOBS), "--log-dir", logs,
                   "--grpc", f"127.0.0.1:{grpc_port}"]
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1500)  # a cold go build: ~2 min
            _run = (proc.returncode, proc.stdout, f"{proc.stderr}\ncell logs: {logs}")
        finally:
            server.close()
    return _run


def cell_log(scenario: str, client: str, limit: int = 3000) -> str:
    """One cell's params and events (its log without the client's stderr) from the run's --log-dir."""
    path = Path(LOG_DIR[0]) / f"{scenario}.{client}.log" if LOG_DIR else None
    if path is None or not path.exists():
        return f"[no log for {scenario}.{client}]"
    return f"[{path.name}]\n" + path.read_text(errors="replace").split("\n--- stderr\n")[0][:limit]


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

    def test_skips_only_where_the_library_lacks_the_api(self) -> None:
        """Every other cell must run: a column SKIPped for want of jars, Maven, podman or a library is a failure."""
        unexpected = [f"{title} / {client}: {text}" for title, cells in table().items() for client, text in cells.items()
                      if text.startswith("SKIP") and title not in allowed_skips(client)]
        self.assertEqual(unexpected, [], matrix()[2][-3000:])

    def test_declared_skips_are_reported_with_their_reason(self) -> None:
        rows = table()
        for client in CLIENTS:
            for title, reason in allowed_skips(client).items():
                self.assertEqual(rows[title][client], Cell("SKIP", reason).text(), f"{title} / {client}")

    def test_java_columns_ran_in_a_container(self) -> None:
        """The runner names the image the Java cells ran in (--no-containers would run them on the host)."""
        for client in ("java", "java5"):
            self.assertRegex(matrix()[2], rf"\[{client}\] cells run in container image localhost/rmqtx-interop-java:[0-9a-f]{{16}}")

    def test_no_cell_fails(self) -> None:
        """The CI bar: every cell is PASS or an honest SKIP; a failure shows its cells' events (the cause)."""
        failing = [f"{title} / {client}: {text}" for title, cells in table().items() for client, text in cells.items()
                   if text.startswith("FAIL")]
        key = {s.title: s.key for s in SCENARIOS}
        logs = [cell_log(key[title], client) for title, cells in table().items() for client, text in cells.items()
                if text.startswith("FAIL")]
        self.assertEqual(failing, [], "\n".join(logs) + matrix()[2][-2000:])


if __name__ == "__main__":
    unittest.main()
