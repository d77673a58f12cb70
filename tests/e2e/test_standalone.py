"""The twistd plugins as an operator runs them, and the captured bad input replayed to a running broker."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import unittest
from collections import defaultdict
from pathlib import Path

from rmqtx.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.serializer import decode_frame
from testkit.ports import free_port
from testkit.standalone import REPO, Standalone, call
from tests.fixtures import records

TWISTD = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"]


def exchange(addr: str, payload: bytes, wait: float = 1.0, half_close: bool = False) -> tuple[bytes, bool]:
    """Send raw bytes (then FIN when ``half_close``); what came back within ``wait``, and whether the server closed."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        sock.sendall(payload)
        if half_close:
            time.sleep(wait)
            sock.shutdown(socket.SHUT_WR)
        data = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return data, True
                data += chunk
        except socket.timeout:
            return data, False


def bad_input_cases(target: str) -> dict[str, dict]:
    """Per case: the bytes the script sent, what the Java server answered, and whether it closed."""
    cases: dict[str, dict] = defaultdict(lambda: {"sent": [], "answers": [], "closed": False})
    for rec in records("scenario-bad-input.jsonl"):
        if rec.get("target") != target:
            continue
        case = cases[rec["case"]]
        if "hex" in rec:
            (case["sent"] if rec["dir"] == "c2s" else case["answers"]).append(bytes.fromhex(rec["hex"]))
        if rec.get("event") == "close" and "server closed" in rec.get("note", ""):
            case["closed"] = True
    return dict(cases)


class PluginsTest(unittest.TestCase):
    def test_twistd_help_lists_the_three_plugins(self) -> None:
        out = subprocess.run([*TWISTD, "--help"], cwd=REPO, capture_output=True, text=True, timeout=60).stdout
        for name in ("rmqnamesrv", "rmqbroker", "rmqstandalone"):
            self.assertIn(name, out)

    def test_namesrv_and_broker_as_separate_processes(self) -> None:
        """``twistd rmqnamesrv`` and ``twistd rmqbroker -c conf/broker.conf -n ADDR``, as the README says."""
        with tempfile.TemporaryDirectory() as tmp:
            ns_port, broker_port = free_port(), free_port()
            namesrv = subprocess.Popen([*TWISTD, "-n", "--pidfile=", "--logfile", f"{tmp}/ns.log", "rmqnamesrv", "-c",
                                        "conf/namesrv.conf", "-p", str(ns_port), "--kv-config-path", f"{tmp}/kv.json"], cwd=REPO)
            broker = subprocess.Popen([*TWISTD, "-n", "--pidfile=", "--logfile", f"{tmp}/broker.log", "rmqbroker", "-c",
                                       "conf/broker.conf", "-n", f"127.0.0.1:{ns_port}", "-p", str(broker_port),
                                       "--store", f"{tmp}/store"], cwd=REPO)
            try:
                deadline = time.time() + 20
                route = None
                while time.time() < deadline:
                    try:
                        route = call(f"127.0.0.1:{ns_port}", RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), 1)
                        if route.code == ResponseCode.SUCCESS:
                            break
                    except OSError:
                        pass
                    time.sleep(0.1)
                self.assertIsNotNone(route)
                self.assertEqual(route.code, ResponseCode.SUCCESS, Path(f"{tmp}/broker.log").read_text()[-2000:])
                self.assertIn(f"127.0.0.1:{broker_port}".encode(), route.body)
            finally:
                for proc in (broker, namesrv):
                    proc.terminate()
                    proc.wait(20)
            self.assertIn("Server Shut Down.", Path(f"{tmp}/broker.log").read_text())
            self.assertTrue(Path(f"{tmp}/store/config/topics.json").exists())
            self.assertFalse(Path(f"{tmp}/store/abort").exists())  # clean shutdown


class BadInputTest(unittest.TestCase):
    """Every case of ``scenario-bad-input.jsonl`` against a running ``twistd rmqstandalone``."""

    def setUp(self) -> None:
        self.server = Standalone().start()

    def tearDown(self) -> None:
        self.assertTrue(self.server.stop(), self.server.log())
        self.server.close()

    def test_broker_answers_like_the_java_broker(self) -> None:
        cases = bad_input_cases("broker")
        self.assertEqual(len(cases), 14)
        for name, case in cases.items():
            payload = case["sent"][0]
            # d: the script sent the first 20 bytes of a valid frame, waited, then half-closed
            data, closed = exchange(self.server.broker, payload, half_close=name.startswith("d-"))
            self.assertEqual(closed, case["closed"], name)
            java_answer = case["answers"][0] if case["answers"] else None
            if name.startswith("a4"):  # Java's remark is its NullPointerException text: compare the code
                self.assertEqual(decode_frame(data).code, ResponseCode.SYSTEM_ERROR, name)
            elif name.startswith("i-"):  # no opaque in the request: Java uses its own counter (390)
                ours, java = decode_frame(data), decode_frame(java_answer)
                self.assertEqual((ours.code, ours.remark), (java.code, java.remark), name)
            elif java_answer is None:
                self.assertEqual(data, b"", name)
            else:
                self.assertEqual(data, java_answer, name)  # the same bytes as the Java broker
        # and the server is still there for everybody else
        resp = call(self.server.broker, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": 0}))
        self.assertEqual(resp.code, ResponseCode.SUCCESS)

    def test_namesrv_answers_unknown_codes(self) -> None:
        """Unlike Java's NameServer (silent, so clients wait out their timeout), rmqtx's answers code 3."""
        data, closed = exchange(self.server.namesrv, bad_input_cases("namesrv")["a-unknown-code"]["sent"][0])
        answer = decode_frame(data)
        self.assertFalse(closed)
        self.assertEqual((answer.code, answer.remark), (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 9999 not supported"))


if __name__ == "__main__":
    unittest.main()
