"""rmqtx's own image (deploy/image.py): built, started with podman, a client sends and receives through it.

Slow (the first build installs rmqtx and its dependencies into a root file system): run under trial
only, once per CI run, as tests/interop is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

from deploy.image import STORE, ensure_image
from interop.container import engine, run_flags
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.ports import free_port
from testkit.standalone import REPO, call

CLIENT = """
import queue, sys
from rmqtx.client.blocking import BlockingProducer, BlockingPushConsumer
from rmqtx.client.consumer import CONSUME_FROM_FIRST_OFFSET, ConsumeStatus

got = queue.Queue()
with BlockingProducer(sys.argv[1], "P_image") as producer:
    sent = [producer.send("T_image", f"through the image {i}", tags="TagI").msg_id for i in range(10)]
def handle(msgs, ctx):
    for m in msgs:
        got.put(m.body.decode())
    return ConsumeStatus.CONSUME_SUCCESS
with BlockingPushConsumer(sys.argv[1], "C_image", handle, topics={"T_image": "*"}, consume_from=CONSUME_FROM_FIRST_OFFSET):
    bodies = sorted(got.get(timeout=60) for _ in range(10))
print(len(set(sent)), " | ".join(bodies))
"""


class ImageTest(unittest.TestCase):
    def test_standalone_in_its_image_with_the_store_on_a_volume(self) -> None:
        cli = engine()
        self.assertIsNotNone(cli, "podman (with runc) is needed: scripts/ensure-interop.sh installs it")
        tag, why = ensure_image()
        self.assertIsNotNone(tag, why)
        volume = tempfile.mkdtemp(prefix="rmqtx-volume-")
        self.addCleanup(shutil.rmtree, volume, True)
        namesrv_port, broker_port = free_port(), free_port()
        name = f"rmqtx-image-test-{uuid.uuid4().hex[:8]}"
        flags = [f for f in run_flags(cli) if f not in ("-i", "--rm")]  # logs are read after the stop
        # the image's own command, but on loopback and free ports (the host's network is shared)
        command = ["/usr/local/bin/twistd", "-n", "--pidfile=", "rmqstandalone", "--bind", "127.0.0.1",
                   "--namesrv-port", str(namesrv_port), "--port", str(broker_port), "--store", STORE]
        started = subprocess.run([*cli, "run", "-d", *flags, "--name", name, "-v", f"{volume}:{STORE}", tag, *command],
                                 capture_output=True, text=True, timeout=120)
        self.assertEqual(started.returncode, 0, started.stderr)
        self.addCleanup(subprocess.run, [*cli, "rm", "-f", name], capture_output=True)
        namesrv = f"127.0.0.1:{namesrv_port}"
        deadline = time.time() + 60
        while True:
            try:
                if call(namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), 1).code \
                        == ResponseCode.SUCCESS:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                logs = subprocess.run([*cli, "logs", name], capture_output=True, text=True).stdout
                self.fail(f"the container's broker never registered:\n{logs[-3000:]}")
            time.sleep(0.2)
        client = subprocess.run([sys.executable, "-c", CLIENT, namesrv], cwd=REPO, capture_output=True, text=True,
                                timeout=180, env={**os.environ, "PYTHONPATH": str(REPO)})
        self.assertEqual(client.returncode, 0, client.stderr[-3000:])
        self.assertEqual(client.stdout.strip(), "10 " + " | ".join(sorted(f"through the image {i}" for i in range(10))))
        stopped = subprocess.run([*cli, "stop", "-t", "20", name], capture_output=True, text=True, timeout=60)
        self.assertEqual(stopped.returncode, 0, stopped.stderr)
        logs = subprocess.run([*cli, "logs", name], capture_output=True, text=True).stdout
        self.assertIn("Server Shut Down.", logs)
        verify = subprocess.run([sys.executable, "-m", "rmqtx.store", "verify", volume], cwd=REPO, capture_output=True,
                                text=True, timeout=120)
        self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)
        self.assertGreaterEqual(json.loads(verify.stdout)["records"], 10)  # the messages are on the host's volume
        self.assertFalse(os.path.exists(os.path.join(volume, "abort")))  # and the store was shut down cleanly
