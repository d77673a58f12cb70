"""CI guard against vacuous passes: a strict run must collect the whole suite, deselect nothing, skip nothing.

Strict when ``CI`` is true (CI runs ``bash .ci/run`` with CI=true) or ``RMQTX_STRICT=1`` (tox's default).
Neither RMQTX_SUBSET nor RMQTX_STRICT passes tox's passenv: only tox.ini can set them.
"""

from __future__ import annotations

import os

import pytest

#: The fewest tests each tox environment may run in a strict run, about 95% of what it collects when last
#: raised (pytest 625 on 2026-11-29, pure 256 with the send lane's tests; trial 77 before): a run under its floor
#: ran only part of the suite.
#: tests/test_floors.py collects each environment's suite and fails when a floor no longer follows it.
FLOORS = {"pytest": 593, "trial": 73, "pure": 240}
#: The trial env's share of the suite, each with why it is there: suites that start JVMs, clusters or
#: browsers. tox runs each test once: the pytest env leaves these to trial (``--leave-to-trial``) and the
#: trial env runs only these (``python -m tests.trial_strict --trial-share``).
TRIAL_SHARE = {
    "tests/interop": "the client matrix takes minutes: tox runs it once, in the trial env",
    "tests/container": "packaging (rmqtx's own image, an editable install into a fresh venv) installs from PyPI "
                       "and takes a minute: once, in the trial env",
    "tests/console_browser": "a real Chromium and a real Prometheus: once, in the trial env",
    "tests/cluster/test_java_cluster.py": "two broker groups driven by the Java client for a minute: once, in the trial env",
    "tests/cluster/test_mixed_cluster.py": "an Apache 4.9.8 broker group beside an rmqtx one: once, in the trial env",
    "tests/cluster/test_apache_namesrv.py": "rmqtx broker groups under Apache 4.9.8 and 5.4.0 NameServers (two JVMs): once, in the trial env",
    "tests/pop/test_pop_java.py": "the Apache 5.3.3 Java client's pop calls in a JVM: once, in the trial env",
    "tests/spark_cluster": "a standalone Spark cluster (master, two workers) and an Apache broker group take minutes: once, in the trial env",
    "tests/ha/test_mixed_java.py": "master/slave pairs with the Apache 4.9.8 broker, kill -9 included, take two minutes: once, in the trial env",
    "tests/admin/test_mqadmin_java.py": "Apache's mqadmin 4.9.8, 49 subcommands in a few JVMs, takes about 20 s: once, in the trial env",
    "tests/admin/test_mqadmin5_java.py": "Apache's mqadmin 5.5.0, 70 subcommands in a few JVMs, takes about a minute: once, in the trial env",
    "tests/controller/test_apache_brokers.py": "three Apache 5.4.0 brokers and a NameServer under rmqtx controllers, kill -9 "
                                               "included, about a minute and a half: once, in the trial env",
    "tests/controller/test_rmqtx_brokers_apache.py": "rmqtx brokers under Apache 5.4.0's controller (a JVM), kill -9 "
                                                      "included, about half a minute: once, in the trial env",
    "tests/controller/test_mixed_group.py": "an Apache 5.4.0 broker and two rmqtx brokers in one controller-mode group "
                                            "(a JVM), two kill -9 failovers, about 40 s: once, in the trial env",
    "tests/controller/test_rmqtx_brokers.py": "three rmqtx controllers and three rmqtx brokers in controller mode, two kill -9 "
                                              "failovers, about 15 s: once, in the trial env",
    "tests/controller/test_isolated_master.py": "an rmqtx controller-mode group with its slaves stopped, about 12 s: once, in the trial env",
    "tests/controller/test_partition.py": "an rmqtx controller-mode master cut off through relays, twice (ASYNC_FLUSH, then "
                                          "SYNC_FLUSH with a re-election), about 40 s: once, in the trial env",
    "tests/grpc/test_vs_apache.py": "Apache 5.4.0's NameServer and Proxy, two JVMs started and stopped, about a minute: once, in the trial env",
    "tests/security/test_acl2_vs_apache.py": "ACL 2.0 against Apache 5.4.0's broker and its mqadmin and client (three JVMs, a minute and a half): once, in the trial env",
}
#: Skip reasons that stay acceptable in CI, each with why.
ALLOWED_SKIPS = {
    "this machine has the Java client's jars": "tests/interop/test_matrix.py checks the SKIP text only where the jars are missing",
}

_state = {"deselected": 0, "skipped": []}


def strict() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("RMQTX_STRICT") == "1"


def floor(runner: str) -> int:
    """The fewest tests this run may have: its runner's floor, or the floor of the part of the suite that a
    tox env runs on purpose and names with RMQTX_SUBSET (e.g. ``pure``: the byte-level suites again)."""
    subset = os.environ.get("RMQTX_SUBSET")
    if not subset:
        return FLOORS[runner]
    if subset not in FLOORS:
        raise ValueError(f"RMQTX_SUBSET={subset!r} names no floor (one of {', '.join(FLOORS)})")
    return FLOORS[subset]


def trial_share_modules() -> list[str]:
    """TRIAL_SHARE as the dotted names trial takes."""
    return [path.removesuffix(".py").replace("/", ".") for path in TRIAL_SHARE]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--leave-to-trial", action="store_true",
                     help="collect nothing under TRIAL_SHARE (tox's trial env runs those)")


def pytest_ignore_collect(collection_path: "os.PathLike[str]", config: pytest.Config) -> bool | None:
    if not config.getoption("leave_to_trial"):
        return None
    rel = os.path.relpath(os.fspath(collection_path), config.rootpath)
    return True if rel in TRIAL_SHARE else None


def pytest_configure(config: pytest.Config) -> None:
    if not strict():
        return
    narrowing = {
        "PYTEST_ADDOPTS": os.environ.get("PYTEST_ADDOPTS"),
        "-k": config.getoption("keyword", None),
        "-m": config.getoption("markexpr", None),
        "--lf": config.getoption("lf", None),
        "--sw": config.getoption("stepwise", None),
        "--collect-only": config.getoption("collectonly", None),
        "--deselect": config.getoption("deselect", None),
        "--ignore": [p for p in config.getoption("ignore", None) or [] if p.rstrip("/") not in TRIAL_SHARE],
        "--ignore-glob": config.getoption("ignore_glob", None),
    }
    used = [name for name, value in narrowing.items() if value]
    if used:
        raise pytest.UsageError(f"strict run (CI / RMQTX_STRICT=1) refuses options that narrow it: {', '.join(used)}")


def pytest_deselected(items: list) -> None:
    _state["deselected"] += len(items)


def _check_floor(collected: int) -> None:
    # a tox env that runs a declared part of the suite on purpose (e.g. again without the C accelerator)
    # names it with RMQTX_SUBSET in its setenv, which sets its own floor; it still may not deselect, skip
    # or take -k/-m
    try:
        least = floor("pytest")
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    if collected < least:
        raise pytest.UsageError(f"strict run collected {collected} tests, fewer than its floor {least}")


def pytest_collection_finish(session: pytest.Session) -> None:
    # under pytest-xdist (-n) each worker collects, and the controller checks what they collected (below)
    if strict() and not hasattr(session.config, "workerinput"):
        _check_floor(len(session.items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    if strict():
        _check_floor(len(ids))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and strict():
        reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
        if not any(allowed in reason for allowed in ALLOWED_SKIPS):
            _state["skipped"].append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not strict():
        return
    problems = []
    if _state["deselected"]:
        problems.append(f"{_state['deselected']} tests deselected")
    problems += [f"skipped: {line}" for line in _state["skipped"]]
    if problems:
        session.config.get_terminal_writer().line("strict run failed:\n  " + "\n  ".join(problems), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
