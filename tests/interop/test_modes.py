"""``python -m interop --mode acl|acl2|tls|tls-permissive``: a few scenarios per mode, every column, each on its own standalone.

The runner starts the standalone itself (no --namesrv): ACL on with interop/modes.py's accounts, or
ACL 2.0 users and policies (acl2), TLS enforcing / permissive. Runs under trial only, like test_matrix (tox.ini's pytest env ignores
tests/interop). The scenario lists are small to keep the three runs within about three minutes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import unittest

from interop.drivers import all_drivers
from interop.drivers.cpp import NO_TLS as CPP_NO_TLS
from interop.drivers.java import ACL_QUERY
from interop.drivers.node import NO_TLS as NODE_NO_TLS
from interop.modes import SECRETS
from interop.runner import Cell
from interop.scenarios import BY_KEY
from testkit.standalone import REPO

DRIVERS = all_drivers()
CLIENTS = list(DRIVERS)
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")
#: mode -> the scenarios CI runs in it
#: (sync send consumes what it sent too: heartbeat, rebalance, pulls and offset commits go through ACL / TLS.)
RUNS = {
    "acl": ["sync_send", "acl_wrong_secret", "acl_no_credentials", "acl_no_permission"],
    # every column signs for a 5.3+ broker: 4.x clients with the 1.0 hook, 5.x remoting and gRPC ones with theirs
    "acl2": ["sync_send", "acl_wrong_secret", "acl_unknown_key", "acl_no_permission", "query_key"],
    "tls": ["sync_send", "tls_plain_client"],
    "tls-permissive": ["sync_send", "tls_plain_client"],
}
#: Columns whose clients speak TLS (the others are SKIP in TLS cells, with their driver's reason).
TLS_CLIENTS = ("java", "java5", "go", "python", "py5", "java5grpc", "node5", "go5")


def every_column_passes() -> dict[str, str]:
    """PASS in every column: the remoting ones against the broker, the four gRPC ones against the endpoint's ACL / TLS."""
    return {client: "PASS" for client in CLIENTS}

_runs: dict[str, tuple[int, str, str]] = {}


def run(mode: str) -> tuple[int, str, str]:
    """One ``python -m interop --mode MODE`` per test process (trial runs no setUpClass): exit status, stdout, stderr."""
    if mode not in _runs:
        logs = tempfile.mkdtemp(prefix=f"rmqtx-interop-{mode}-")
        cmd = [sys.executable, "-m", "interop", "--mode", mode, "--clients", ",".join(CLIENTS), "--scenarios",
               ",".join(RUNS[mode]), "--jobs", "4", "--log-dir", logs]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
        _runs[mode] = (proc.returncode, proc.stdout, f"{proc.stderr}\ncell logs and broker log: {logs}")
    return _runs[mode]


def table(mode: str) -> dict[str, dict[str, str]]:
    """scenario title -> client -> cell text."""
    rows = [line for line in run(mode)[1].splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    return {cells[0]: dict(zip(header[1:], cells[1:])) for cells in ([c.strip() for c in row.strip("|").split("|")] for row in rows[2:])}


def allowed_skips(mode: str, client: str, key: str) -> set[str]:
    """The SKIP texts a driver declares for this cell: its library lacks the API, or the client cannot do TLS."""
    reasons = {DRIVERS[client].unsupported[key]} if key in DRIVERS[client].unsupported else set()
    if not mode.startswith("acl") and client == "cpp":
        reasons.add(CPP_NO_TLS)
    if not mode.startswith("acl") and client == "node":
        reasons.add(NODE_NO_TLS)
    if mode == "acl" and client in ("java", "java5"):
        reasons.add(ACL_QUERY)
    return {Cell("SKIP", r).text() for r in reasons}


class ModeRuns:
    mode = ""

    def test_every_cell_passes_or_skips_for_a_declared_reason(self) -> None:
        code, out, err = run(self.mode)
        rows = table(self.mode)
        self.assertEqual(list(rows), [BY_KEY[k].title for k in RUNS[self.mode]], out)
        bad = []
        for key in RUNS[self.mode]:
            for client, text in rows[BY_KEY[key].title].items():
                if text != "PASS" and text not in allowed_skips(self.mode, client, key):
                    bad.append(f"{key} / {client}: {text}")
        self.assertEqual(bad, [], err[-3000:])
        summary = SUMMARY.match(out.strip().splitlines()[-1])
        self.assertIsNotNone(summary, out)
        self.assertEqual((summary[2], code), ("0", 0), err[-3000:])

    def test_java_columns_ran_in_a_container(self) -> None:
        for client in ("java", "java5"):
            self.assertRegex(run(self.mode)[2], rf"\[{client}\] cells run in container image localhost/rmqtx-interop-java:[0-9a-f]{{16}}")

    def test_runner_started_its_own_standalone(self) -> None:
        self.assertIn(f"started a standalone in mode {self.mode}:", run(self.mode)[2])


class AclModeTest(ModeRuns, unittest.TestCase):
    mode = "acl"

    def test_refusals_in_every_column(self) -> None:
        """Wrong secret, no keys and a missing permission: refused in every column (the remoting ones and the
        four gRPC ones), nothing stored."""
        rows = table(self.mode)
        for key in ("acl_wrong_secret", "acl_no_credentials", "acl_no_permission"):
            self.assertEqual(rows[BY_KEY[key].title], every_column_passes(), key)

    def test_no_secret_in_the_broker_log(self) -> None:
        err = run(self.mode)[2]
        self.assertNotIn("the broker log contains the secret key", err)
        for secret in SECRETS:
            self.assertNotIn(secret, err)


class Acl2ModeTest(ModeRuns, unittest.TestCase):
    """ACL 2.0 as a 5.3+ user runs it: a Super user from initAuthenticationUser, Normal users and their
    policies made through codes 3001/3006; refusals carry ACL 2.0's messages."""

    mode = "acl2"

    def test_refusals_in_every_column(self) -> None:
        """Wrong secret, unknown user and a policy without Pub: refused in every column, nothing stored."""
        rows = table(self.mode)
        for key in ("acl_wrong_secret", "acl_unknown_key", "acl_no_permission"):
            self.assertEqual(rows[BY_KEY[key].title], every_column_passes(), key)

    def test_query_by_key_signed(self) -> None:
        """QUERY_MESSAGE's _UNIQUE_KEY_QUERY: Java 4.9.8 signs it (refused by 1.0 brokers, accepted by 2.0 ones);
        rmqtx's client signs as 4.9.3 does and says so, passing both."""
        row = table(self.mode)[BY_KEY["query_key"].title]
        self.assertEqual({c: row[c] for c in ("java", "java5", "python")}, {"java": "PASS", "java5": "PASS", "python": "PASS"})

    def test_no_secret_in_the_broker_log(self) -> None:
        err = run(self.mode)[2]
        self.assertNotIn("the broker log contains the secret key", err)
        for secret in SECRETS:
            self.assertNotIn(secret, err)


class TlsEnforcingModeTest(ModeRuns, unittest.TestCase):
    mode = "tls"

    def test_tls_clients_work_and_plain_ones_are_turned_away(self) -> None:
        rows = table(self.mode)
        for client in TLS_CLIENTS:
            self.assertEqual(rows[BY_KEY["sync_send"].title][client], "PASS", client)
        self.assertEqual(rows[BY_KEY["tls_plain_client"].title], every_column_passes())


class TlsPermissiveModeTest(ModeRuns, unittest.TestCase):
    mode = "tls-permissive"

    def test_tls_and_plain_clients_on_the_same_ports(self) -> None:
        rows = table(self.mode)
        for client in TLS_CLIENTS:
            self.assertEqual(rows[BY_KEY["sync_send"].title][client], "PASS", client)
        self.assertEqual(rows[BY_KEY["tls_plain_client"].title], every_column_passes())


if __name__ == "__main__":
    unittest.main()
