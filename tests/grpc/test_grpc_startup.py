"""A gRPC endpoint that cannot start ends start-up with one line on stderr and status 1: its port held by
some other socket, or by a running broker's gRPC endpoint (no SO_REUSEPORT sharing), or no generated
classes to serve with."""

from __future__ import annotations

import os
import socket
import subprocess
import unittest

from testkit.py5 import PY5_VENV, grpc_standalone
from testkit.ports import free_port
from tests.ops.support import TWISTD, Scratch, tree_env


class GrpcPortTakenTest(unittest.TestCase):
    def setUp(self) -> None:
        os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
        self.scratch = Scratch()
        self.addCleanup(self.scratch.close)

    def assertOneLine(self, proc: subprocess.CompletedProcess, port: int) -> None:
        self.assertEqual(proc.returncode, 1, proc.stderr + proc.stdout)
        self.assertEqual(proc.stderr, f"rmqtx: cannot start: the gRPC endpoint cannot listen on 127.0.0.1:{port}: "
                                      "Address already in use\n")
        self.assertNotIn("Traceback", proc.stdout)
        self.assertFalse((self.scratch.dir / "store" / "abort").exists())  # the store was closed cleanly

    def test_port_held_by_a_socket(self) -> None:
        port = free_port()
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", port))
            taken.listen()
            proc = self.scratch.run(self.scratch.standalone_args("--grpc-port", str(port)))
        self.assertOneLine(proc, port)

    def test_port_of_a_running_endpoint(self) -> None:
        running = grpc_standalone(by_option=True).start()
        self.addCleanup(running.close)
        port = int(running.grpc.rsplit(":", 1)[1])
        proc = self.scratch.run(self.scratch.standalone_args("--grpc-port", str(port)))
        self.assertOneLine(proc, port)
        self.assertTrue(running.stop(), "the running one is unharmed and stops cleanly")

    def test_no_generated_classes(self) -> None:
        """$RMQTX_GRPC_STUBS names an empty directory (and the test envs have no SDK on sys.path)."""
        empty = self.scratch.dir / "no-sdk"
        empty.mkdir()
        env = {**tree_env(), "RMQTX_GRPC_STUBS": str(empty)}
        proc = subprocess.run([*TWISTD, "-n", *self.scratch.standalone_args("--grpc-port", str(free_port()))],
                              cwd=self.scratch.dir, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stderr + proc.stdout)
        self.assertEqual(proc.stderr, "rmqtx: cannot start: the gRPC endpoint needs the generated classes of "
                                      "rocketmq-python-client: pip install rocketmq-python-client (into this env, "
                                      "or into a venv named by $RMQTX_GRPC_STUBS)\n")
        self.assertFalse((self.scratch.dir / "store" / "abort").exists())
