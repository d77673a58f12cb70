"""``pip install -e .`` (a developer's habit) leaves twistd able to find rmqtx's plugins; without the
``grpc`` extra, ``--grpc-port`` is refused in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from deploy.image import package_sources
from testkit.ports import free_port
from testkit.standalone import REPO


def copy_sources(dest: Path) -> None:
    """The package's sources (building in place must not rewrite the C extension tests have loaded)."""
    for path in package_sources():
        target = dest / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


class EditableInstallTest(unittest.TestCase):
    def test_twistd_lists_the_plugins_after_an_editable_install(self) -> None:
        tmp = Path(tempfile.mkdtemp(prefix="rmqtx-editable-"))
        self.addCleanup(shutil.rmtree, tmp, True)
        tree, venv, elsewhere = tmp / "rmqtx", tmp / "venv", tmp / "elsewhere"
        tree.mkdir()
        elsewhere.mkdir()
        copy_sources(tree)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        # this pip installs into the new venv (quicker than seeding it with its own); CC=false skips the
        # optional C extension, whose build proves nothing here
        pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                              "-e", str(tree)], cwd=elsewhere, env={**env, "CC": "false"},
                             capture_output=True, text=True, timeout=600)
        self.assertEqual(pip.returncode, 0, pip.stderr[-3000:])
        help_text = subprocess.run([str(venv / "bin" / "twistd"), "--help"], cwd=elsewhere, env=env,
                                   capture_output=True, text=True, timeout=120)
        self.assertEqual(help_text.returncode, 0, help_text.stderr)
        for name in ("rmqnamesrv", "rmqbroker", "rmqstandalone", "rmqcontroller"):
            self.assertIn(name, help_text.stdout)
        where = subprocess.run([str(venv / "bin" / "python"), "-c", "import twisted.plugins.rmqtx_plugins as m, rmqtx; "
                                "print(m.__file__); print(rmqtx.__file__)"],
                               cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(where.stdout.split(), [str(tree / "twisted" / "plugins" / "rmqtx_plugins.py"),
                                                str(tree / "rmqtx" / "__init__.py")], where.stderr)
        # no extras were installed: the gRPC endpoint's grpcio is missing, and start-up says so in one line
        store = tmp / "store"
        run = subprocess.run([str(venv / "bin" / "twistd"), "-n", "rmqstandalone", "--namesrv-port", str(free_port()),
                              "--port", str(free_port()), "--grpc-port", str(free_port()), "--store", str(store)],
                             cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual((run.returncode, run.stderr), (1, "rmqtx: cannot start: grpcPort needs the 'grpc' extra: "
                                                           "pip install 'rmqtx[grpc]' (No module named 'grpc')\n"))
        self.assertNotIn("Traceback", run.stdout)
        # nor is the controller's pysyncobj
        conf = tmp / "controller.conf"
        conf.write_text(f"controllerDLegerPeers=n0-127.0.0.1:{free_port()}\ncontrollerDLegerSelfId=n0\n")
        run = subprocess.run([str(venv / "bin" / "twistd"), "-n", "rmqcontroller", "-c", str(conf)],
                             cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual((run.returncode, run.stderr), (1, "rmqtx: cannot start: the controller needs the 'controller' extra: "
                                                           "pip install 'rmqtx[controller]' (No module named 'pysyncobj')\n"))
