"""The gRPC endpoint under load (issue 28): 300 long-polling ReceiveMessage calls and 50 open Telemetry
streams held at once, while QueryRoute, Heartbeat and SendMessage are each answered within their 5 s
deadline, every sent message reaches a parked receive, and the broker's thread count stays bounded
(a thread per parked call, as grpcio's thread-pool server needed, fails here). Not timed, but bounded."""

from __future__ import annotations

import asyncio
import os
import time
import unittest

from testkit.grpc_load import Figures, Load
from testkit.py5 import PY5_VENV, grpc_standalone, stop_cleanly

RECEIVERS = 300
STREAMS = 50
MESSAGES = 120
#: Threads the broker may have: ~11 idle with the endpoint on (reactor, grpc core, the loop), a few
#: more for the reactor's thread pool; far under one per parked call.
MAX_THREADS = 40


class LoadTest(unittest.TestCase):
    def setUp(self) -> None:
        os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
        self.server = grpc_standalone(by_option=True).start()  # twistd rmqstandalone --grpc-port
        self.topic = f"GRPC_LOAD_{int(time.time() * 1000) % 10**8}"
        self.server.create_topic(self.topic, 4)

    def tearDown(self) -> None:
        stop_cleanly(self.server)

    def test_parked_calls_do_not_starve_the_rest(self) -> None:
        started = time.monotonic()

        async def run() -> Figures:  # grpc.aio's channels belong to the loop they are made on
            load = Load(self.server.grpc, self.topic, self.server.proc.pid, receivers=RECEIVERS, streams=STREAMS,
                        messages=MESSAGES)
            return await asyncio.wait_for(load.run(), 100)

        figures = asyncio.run(run())
        self.assertLess(time.monotonic() - started, 110)
        self.assertEqual(figures.failures, [], "every control call answered OK within its deadline")
        for name in ("QueryRoute", "Heartbeat", "SendMessage"):
            self.assertEqual(len(figures.latencies.get(name, [])), MESSAGES, name)
        self.assertEqual(figures.telemetry_settings, STREAMS, "every Telemetry stream got its settings")
        self.assertEqual(len(figures.sent), MESSAGES)
        self.assertEqual(figures.sent - figures.received, set(), "every sent message received")
        self.assertEqual(figures.receive_errors, [], "no receive failed")
        self.assertLess(figures.threads_max, MAX_THREADS,
                        f"broker threads with {RECEIVERS} receives and {STREAMS} streams parked "
                        f"(idle: {figures.threads_idle})")
