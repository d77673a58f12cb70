"""The matrix: every scenario with every client against one running rmqtx, as a Markdown table."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from interop.drivers import all_drivers
from interop.drivers.base import Driver
from interop.modes import ADMIN, MODES, SECRETS, Mode
from interop.probe import DEFAULT_LEVELS, Access, Probe, level_seconds
from interop.scenarios import BY_KEY, SCENARIOS, Context, Scenario, cell_timeout

REASON_CHARS = 160


@dataclass(frozen=True)
class Cell:
    status: str  # PASS, FAIL or SKIP
    reason: str = ""
    seconds: float = 0.0

    def text(self) -> str:
        reason = " ".join(self.reason.split()).replace("|", "/")
        if len(reason) > REASON_CHARS:
            reason = reason[: REASON_CHARS - 3] + "..."
        return f"{self.status}: {reason}" if reason else self.status


def context(probe: Probe, namesrv: str, levels: str | None, mode: str = "plain") -> Context:
    """Delay levels and check-back timing: given, else what GET_BROKER_CONFIG says, else RocketMQ's defaults."""
    conf = probe.broker_config()
    check_ms = int(conf.get("transactionCheckInterval", 60000)) + int(conf.get("transactionTimeOut", 6000))
    return Context(run=uuid.uuid4().hex[:8], namesrv=namesrv, levels=level_seconds(levels or conf.get("messageDelayLevel") or DEFAULT_LEVELS),
                   tx_check_seconds=check_ms / 1000, cluster=conf.get("brokerClusterName", "DefaultCluster"), mode=mode,
                   broker=probe.broker)


def run_cell(scenario: Scenario, driver: Driver, ctx: Context, probe: Probe, log_dir: Path | None = None) -> Cell:
    if scenario.modes and ctx.mode not in scenario.modes:
        return Cell("SKIP", f"runs in --mode {' / '.join(scenario.modes)} only")
    if scenario.clients and driver.name not in scenario.clients:
        return Cell("SKIP", scenario.clients_reason)
    params = scenario.params(ctx, driver.name)
    for key, value in MODES[ctx.mode].cell_params(scenario.key).items():
        params.setdefault(key, value)  # a scenario's own keys (or none) win
    skip = driver.adapt(scenario, params, ctx)
    if skip:
        return Cell("SKIP", skip)
    started = time.monotonic()
    timeout = cell_timeout(params)
    try:
        if scenario.create_topic:
            probe.create_topic(params["topic"], message_type=scenario.message_type)
        if scenario.pop_mode:
            probe.set_request_mode(params["topic"], params["group"], "POP")
        if scenario.orderly_group:
            probe.make_orderly(params["group"])
        run = driver.run(scenario.op, params, timeout)
        if log_dir is not None:
            log = "\n".join(json.dumps(e) for e in [params, *run.events])
            (log_dir / f"{scenario.key}.{driver.name}.log").write_text(f"{log}\n--- stderr\n{run.stderr}")
        reason = scenario.check(run.events, params, probe)
    except Exception as exc:  # the runner's own trouble is this cell's failure, not the matrix's
        return Cell("FAIL", f"runner: {exc!r}", time.monotonic() - started)
    stderr = (run.stderr.strip().splitlines() or [""])[-1]
    if run.timed_out:
        reason = f"timed out after {timeout:.0f} s" + (f": {reason}" if reason else "")
    elif reason is None and run.returncode != 0:
        reason = f"driver exited {run.returncode}: {stderr}"
    elif reason and not run.events and stderr:
        reason = f"{reason} ({stderr})"
    notes = [str(e.get("note")) for e in run.events if e["kind"] == "note"]
    if reason and notes:  # what the driver saw of its own clients when the deliveries did not come
        reason = f"{reason} [{'; '.join(notes)}]"
    return Cell("FAIL" if reason else "PASS", reason or "", time.monotonic() - started)


def run_matrix(probe: Probe, ctx: Context, drivers: list[Driver], scenarios: list[Scenario], jobs: int,
               log_dir: Path | None = None) -> dict[tuple[str, str], Cell]:
    """Cells run in parallel (each scenario has its own topic and groups); the longest start first."""
    results: dict[tuple[str, str], Cell] = {}
    ready: list[Driver] = []
    for driver in drivers:
        reason = driver.prepare()
        if reason:
            results.update({(s.key, driver.name): Cell("SKIP", reason) for s in scenarios})
        else:
            ready.append(driver)
    cells = [(s, d) for s in scenarios for d in ready]
    cells.sort(key=lambda sd: -cell_timeout(sd[0].params(ctx, sd[1].name)))

    slots = {d.slot[0]: threading.Semaphore(d.slot[1]) for d in ready if d.slot}

    def one(cell: tuple[Scenario, Driver]) -> None:
        scenario, driver = cell
        if driver.slot:
            with slots[driver.slot[0]]:
                result = run_cell(scenario, driver, ctx, probe, log_dir)
        else:
            result = run_cell(scenario, driver, ctx, probe, log_dir)
        results[scenario.key, driver.name] = result
        print(f"[{driver.name}] {scenario.title}: {result.text()} ({result.seconds:.1f} s)", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, cells))
    return results


def render(results: dict[tuple[str, str], Cell], clients: list[str], scenarios: list[Scenario]) -> str:
    """The Markdown table and the ``N passed, M failed`` line (SKIPs not counted)."""
    lines = ["| scenario | " + " | ".join(clients) + " |", "|---" * (len(clients) + 1) + "|"]
    for s in scenarios:
        lines.append(f"| {s.title} | " + " | ".join(results[s.key, c].text() for c in clients) + " |")
    statuses = [cell.status for cell in results.values()]
    lines += ["", f"{statuses.count('PASS')} passed, {statuses.count('FAIL')} failed"]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m interop", description="Run real RocketMQ clients against a running rmqtx.")
    parser.add_argument("--namesrv", help="name server address, e.g. 127.0.0.1:9876 (default: start a standalone for the run)")
    parser.add_argument("--mode", choices=list(MODES), default="plain",
                        help="plain; acl (aclEnable, signed clients, refusals); acl2 (the same with ACL 2.0 users and policies); tls (enforcing) or tls-permissive (clients over TLS)")
    parser.add_argument("--broker", help="broker address (default: the first master the name server knows)")
    parser.add_argument("--clients", help="comma-separated columns (default: all there are drivers for: java,java5,go,cpp,node,python,py5,java5grpc,node5,go5)")
    parser.add_argument("--no-containers", action="store_true", help="run the Java columns' JVMs on the host, not in the podman image")
    parser.add_argument("--java-image", help="run the Java cells in this prebuilt image (interop/java/Dockerfile, target client)")
    parser.add_argument("--scenarios", help="comma-separated scenario keys (default: all in plain mode, the mode's list otherwise)")
    parser.add_argument("--delay-levels", help="the broker's messageDelayLevel when it does not answer GET_BROKER_CONFIG")
    parser.add_argument("--grpc", help="rmqtx's gRPC endpoint (grpcPort), HOST:PORT, for the 5.x gRPC SDK columns (py5, java5grpc, node5, go5); "
                             "a standalone the runner starts opens its own in plain mode")
    parser.add_argument("--jobs", type=int, default=8, help="cells run at once")
    parser.add_argument("--log-dir", type=Path, help="write each cell's params, events and stderr here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    drivers = all_drivers()
    if args.grpc:
        os.environ["RMQTX_INTEROP_GRPC"] = args.grpc  # the cells inherit it
    for driver in drivers.values():
        if hasattr(driver, "containers"):
            driver.containers = not args.no_containers
            driver.image = args.java_image
    clients = [c.strip() for c in args.clients.split(",") if c.strip()] if args.clients else list(drivers)
    unknown = [c for c in clients if c not in drivers]
    if unknown:
        print(f"unknown client(s) {unknown}; choose from {sorted(drivers)}", file=sys.stderr)
        return 2
    mode = MODES[args.mode]
    scenarios = [BY_KEY[k] for k in mode.scenarios] if mode.scenarios else SCENARIOS
    if args.scenarios:
        keys = [k.strip() for k in args.scenarios.split(",") if k.strip()]
        unknown = [k for k in keys if k not in BY_KEY]
        if unknown:
            print(f"unknown scenario(s) {unknown}; choose from {sorted(BY_KEY)}", file=sys.stderr)
            return 2
        scenarios = [BY_KEY[k] for k in keys]
    access = Access(*ADMIN, tls=mode.tls) if mode.acl else Access(tls=mode.tls)
    server = None
    if not args.namesrv:
        from interop.server import Standalone

        from interop.drivers.py5 import PY5_VENV

        # the gRPC columns get the standalone's own endpoint (with the mode's ACL and TLS on it too)
        stubs = PY5_VENV if not args.grpc and os.path.isdir(PY5_VENV) else None
        server = Standalone(mode, access, grpc_stubs=stubs).start()
        args.namesrv, args.broker = server.namesrv, server.broker
        if server.grpc:
            os.environ["RMQTX_INTEROP_GRPC"] = server.grpc
        print(f"started a standalone in mode {mode.name}: name server {server.namesrv}, broker {server.broker}"
              f"{', gRPC ' + server.grpc if server.grpc else ''}", file=sys.stderr, flush=True)
    try:
        probe = Probe(args.namesrv, args.broker, access)
        if server is not None and mode.acl_version == 2:
            probe.make_acl2_users()
        ctx = context(probe, args.namesrv, args.delay_levels, mode.name)
        if args.log_dir:
            args.log_dir.mkdir(parents=True, exist_ok=True)
        results = run_matrix(probe, ctx, [drivers[c] for c in clients], scenarios, args.jobs, args.log_dir)
    finally:
        log = server.close() if server is not None else ""
    table = render(results, clients, scenarios)
    leaks = broker_log_findings(mode, log)
    if args.log_dir:
        (args.log_dir / "matrix.md").write_text(table + "\n")
        if server is not None:
            (args.log_dir / "broker.log").write_text(log)
    for leak in leaks:
        print(leak, file=sys.stderr, flush=True)
    print(table, flush=True)
    return 0 if not leaks and all(cell.status != "FAIL" for cell in results.values()) else 1


def broker_log_findings(mode: Mode, log: str) -> list[str]:
    """With ACL on, the standalone's log must hold no secret key (right or wrong) the cells used."""
    if not mode.acl:
        return []
    return [f"the broker log contains the secret key {secret[:3]}..." for secret in SECRETS if secret in log]
