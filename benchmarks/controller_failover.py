"""Controller mode failover: three brokers of one group under controllers; each run kills the master
(``kill -9``) under SYNC sends from Apache's Java client (DefaultMQProducer of rocketmq-client 5.4.0, default
retries; ``--client python``: rmqtx's Python client, no retries).

    python benchmarks/controller_failover.py [--brokers apache|rmqtx] [--controllers rmqtx|apache]
                                             [--client java|python] [--runs 5] [--before 150] [--after 100]

The mixes: ``--brokers apache`` (default): three rmqtx controllers, Apache 5.4.0's NameServer and brokers;
``--brokers rmqtx``: rmqtx's NameServer and brokers in controller mode (``allAckInSyncStateSet=true``) under
three rmqtx controllers, or under one Apache 5.4.0 controller with ``--controllers apache``.

Between runs the killed broker is started again on its own store (it rejoins as a slave, the AutoSwitch HA
truncating what it had beyond the new master) and the next run waits until the sync-state set
holds all three again. Per run it prints: seconds from the kill to the controller's election and to the first
acked send, acked sends, acked sends missing from the new master (lost) or there with other contents or,
with the Java client, another msgId (changed), and the sends that failed meanwhile; then the totals as one Markdown table row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.controller import ControllerModeGroup, RmqtxControllerModeGroup, failover_run  # noqa: E402
from testkit.ha import wait_until  # noqa: E402

TOPIC = "ControllerFailoverBench"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", type=int, default=150, help="acked sends before each kill")
    parser.add_argument("--after", type=int, default=100, help="acked sends after each kill")
    parser.add_argument("--brokers", choices=("apache", "rmqtx"), default="apache")
    parser.add_argument("--controllers", choices=("rmqtx", "apache"), default="rmqtx",
                        help="with --brokers rmqtx: three rmqtx controllers or one Apache 5.4.0 controller")
    parser.add_argument("--client", choices=("java", "python"), default="java",
                        help="who sends: Apache's Java DefaultMQProducer or rmqtx's Python producer")
    args = parser.parse_args(argv)
    began = time.monotonic()
    if args.brokers == "rmqtx":
        group: ControllerModeGroup = RmqtxControllerModeGroup(apache_controller=args.controllers == "apache").start()
        mix = "rmqtx brokers, " + ("Apache 5.4.0 controller" if args.controllers == "apache" else "rmqtx controllers")
    else:
        group = ControllerModeGroup().start()
        mix = "Apache 5.4.0 brokers, rmqtx controllers"
    rows = []
    try:
        print(f"started in {time.monotonic() - began:.1f} s; load {os.getloadavg()[0]:.1f}", flush=True)
        group.create_topic(TOPIC)
        for run in range(1, args.runs + 1):
            wait_until(lambda: len(group.sync_state_set()) == 3, 120, "all three brokers in the sync-state set", step=0.5)
            figures = failover_run(group, TOPIC, before=args.before, after=args.after,
                                   client=args.client)
            rows.append(figures)
            print(f"run {run}: " + json.dumps({k: v for k, v in figures.items() if k != "lost_keys"}), flush=True)
            dead = next(b for b in group.brokers if not b.alive())
            dead.start()  # same home, same store, same ports: it comes back as a slave
    finally:
        group.close()
    acked = sum(int(r["acked"]) for r in rows)  # type: ignore[call-overload]
    lost = sum(int(r["lost"]) + int(r["changed"]) for r in rows)  # type: ignore[call-overload]
    resumed = [float(r["resumed_s"]) for r in rows]  # type: ignore[arg-type]
    elected = [float(r["elected_s"]) for r in rows]  # type: ignore[arg-type]
    mix += f" ({args.client} client)"
    print("\n| mix | runs | acked | lost | elected after kill (s) min/max | first acked send after kill (s) min/max |")
    print("|---|---|---|---|---|---|")
    if rows:
        print(f"| {mix} | {len(rows)} | {acked} | {lost} | "
              f"{min(elected):.2f} / {max(elected):.2f} | {min(resumed):.2f} / {max(resumed):.2f} |")
    print(f"\nload average now {os.getloadavg()[0]:.1f}; total {time.monotonic() - began:.0f} s")
    return 0 if lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
