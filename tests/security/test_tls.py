"""TLS on the broker and NameServer ports: disabled / permissive / enforcing, with the Java and Python clients."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import decode_frame, encode_frame
from testkit.standalone import REPO, Standalone
from tests.security.acl_support import HERE, java_scenario
from tests.security.certs import make_certs

ROUTE = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})


def call_over(sock: socket.socket, request: RemotingCommand) -> RemotingCommand:
    sock.sendall(encode_frame(request))
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return decode_frame(data[: 4 + int.from_bytes(data[:4], "big")])


def plain_call(addr: str, request: RemotingCommand) -> RemotingCommand:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        return call_over(sock, request)


def tls_call(addr: str, request: RemotingCommand, ca: Path | None = None) -> RemotingCommand:
    host, port = addr.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    ctx.check_hostname = False
    with socket.create_connection((host, int(port)), timeout=5) as raw, ctx.wrap_socket(raw) as sock:
        return call_over(sock, request)


class TlsStandalone(Standalone):
    """The harness's standalone, but "up" is decided by ``ready`` (plain probes fail in enforcing mode)."""

    def __init__(self, conf: dict[str, str], ready) -> None:
        super().__init__(conf)
        self.ready = ready

    def start(self, timeout: float = 30.0) -> "TlsStandalone":
        cmd = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "-n", "--pidfile=", "--logfile",
               str(self.log_path), "rmqstandalone", "-c", str(self.conf_path), "--namesrv-port", str(self.namesrv_port),
               "--port", str(self.broker_port), "--store", str(self.root / "store")]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rmqstandalone exited with {self.proc.returncode}:\n{self.log()}")
            if self.ready(self):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"rmqstandalone did not come up in {timeout} s:\n{self.log()}")


class TlsCase(unittest.TestCase):
    mode = "enforcing"

    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="rmqtx-tls-"))
        self.certs = make_certs(self.dir)
        conf = {
            "tls.server.mode": self.mode,
            "tls.server.certPath": str(self.certs["server_cert"]),
            "tls.server.keyPath": str(self.certs["server_key"]),
            "tls.enable": "true" if self.mode == "enforcing" else "false",
        }
        conf.update(self.extra_conf())
        self.server = TlsStandalone(conf, self.ready)
        self.server.start()

    def extra_conf(self) -> dict[str, str]:
        return {}

    def ready(self, server: Standalone) -> bool:
        """Up when its NameServer routes TBW102 (asked over TLS when plain is refused)."""
        ask = plain_call if self.mode != "enforcing" else (lambda addr, req: tls_call(addr, req))
        try:
            return ask(server.namesrv, ROUTE).code == ResponseCode.SUCCESS
        except OSError:
            return False

    def tearDown(self) -> None:
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertTrue(clean, f"standalone did not shut down cleanly\n{log}")
        self.assertNotIn("Traceback", log)

    def java(self, *steps: str, tls: bool = True) -> list[dict]:
        props = ["-Dtls.enable=true"] if tls else []
        proc = subprocess.run(
            [*java_scenario(*props), self.server.namesrv, *steps],
            capture_output=True, text=True, timeout=240, cwd=tempfile.gettempdir(),
        )
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]

    def python(self, topic: str, count: int, *extra: str) -> list[dict]:
        proc = subprocess.run([sys.executable, str(HERE / "py_tls_client.py"), self.server.namesrv, topic, str(count), *extra],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


class EnforcingTest(TlsCase):
    mode = "enforcing"

    def test_enforcing(self) -> None:
        for addr in (self.server.namesrv, self.server.broker):
            with self.assertRaises(OSError):
                plain_call(addr, ROUTE)
            self.assertTrue(tls_call(addr, ROUTE, self.certs["ca"]).is_response)
        self.assertIn("tls.server.mode is enforcing", self.server.log())
        self.assertEqual(self.python("TopicTls", 2, str(self.certs["ca"])),
                         [{"op": "send", "ok": True, "status": "SEND_OK"}] * 2 + [{"op": "pull", "ok": True, "count": 2}])
        out = self.java("-,-,send,TopicTls,1", "-,-,pull,TopicTls,GroupTls")
        self.assertEqual(out, [{"op": "send", "ok": True, "status": "SEND_OK"}, {"op": "pull", "ok": True, "count": 3}])
        plain_java = self.java("-,-,send,TopicTls,1", tls=False)
        self.assertFalse(plain_java[0]["ok"], plain_java)


class PermissiveTest(TlsCase):
    mode = "permissive"

    def test_permissive_serves_both_on_one_port(self) -> None:
        for addr in (self.server.namesrv, self.server.broker):
            self.assertTrue(plain_call(addr, ROUTE).is_response)
            self.assertTrue(tls_call(addr, ROUTE, self.certs["ca"]).is_response)
        self.assertEqual(self.python("TopicP", 1)[-1], {"op": "pull", "ok": True, "count": 1})
        out = self.java("-,-,send,TopicP,1", "-,-,pull,TopicP,GroupP")
        self.assertEqual(out[-1], {"op": "pull", "ok": True, "count": 2})
        plain_java = self.java("-,-,send,TopicP,1", tls=False)
        self.assertEqual(plain_java, [{"op": "send", "ok": True, "status": "SEND_OK"}])


class DisabledTest(TlsCase):
    mode = "disabled"

    def test_disabled_refuses_tls(self) -> None:
        self.assertTrue(plain_call(self.server.broker, ROUTE).is_response)
        with self.assertRaises(OSError):
            tls_call(self.server.broker, ROUTE)
        self.assertEqual(self.python("TopicD", 1)[0]["ok"], False)
        self.assertEqual(self.java("-,-,send,TopicD,1", tls=False), [{"op": "send", "ok": True, "status": "SEND_OK"}])
        tls_java = self.java("-,-,send,TopicD,1")
        self.assertFalse(tls_java[0]["ok"], tls_java)


class ClientAuthTest(TlsCase):
    mode = "enforcing"

    def extra_conf(self) -> dict[str, str]:
        return {"tls.server.need.client.auth": "require", "tls.server.trustCertPath": str(self.certs["ca"]),
                "tls.client.certPath": str(self.certs["client_cert"]), "tls.client.keyPath": str(self.certs["client_key"])}

    def ready(self, server: Standalone) -> bool:
        return "new broker registered" in server.log()  # the broker's own TLS connection, with its client certificate

    def test_client_certificate_required(self) -> None:
        c = self.certs
        self.assertEqual(self.python("TopicCA", 1, str(c["ca"]))[0]["ok"], False)
        with_cert = self.python("TopicCA", 1, str(c["ca"]), str(c["client_cert"]), str(c["client_key"]))
        self.assertEqual(with_cert[-1], {"op": "pull", "ok": True, "count": 1})
