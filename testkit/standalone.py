"""Start a real ``twistd rmqstandalone`` (NameServer + Broker) in a subprocess for end-to-end tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rmqtx.common import fastjson
from testkit.ports import NEIGHBOURS, free_port, port_free
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import decode_frame, encode_frame

REPO = Path(__file__).resolve().parents[1]


def call(addr: str, request: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
    """One blocking request/response over a fresh socket (tests only)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(encode_frame(request))
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                raise ConnectionError("closed before answering")
            head += chunk
        total = int.from_bytes(head, "big", signed=True)
        data = b""
        while len(data) < total:
            chunk = sock.recv(total - len(data))
            if not chunk:
                raise ConnectionError("closed mid-answer")
            data += chunk
        return decode_frame(head + data)


class Standalone:
    """``twistd -n rmqstandalone`` on free loopback ports, with its store in a temp dir."""

    def __init__(self, extra_conf: dict[str, str] | None = None, brokers: int = 1) -> None:
        """``brokers``: ``--brokers N``; group k listens on the broker port + 10*(k-1) (rmqtx.groups)."""
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-e2e-")
        self.root = Path(self.tmp.name)
        self.namesrv_port = free_port()
        self.brokers = brokers
        self.broker_port = self._group_ports(brokers)
        self.group_addrs = [f"127.0.0.1:{self.broker_port + 10 * k}" for k in range(brokers)]
        self.namesrv = f"127.0.0.1:{self.namesrv_port}"
        self.broker = f"127.0.0.1:{self.broker_port}"
        conf = {"brokerName": "broker-a", "flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": str(64 * 1024 * 1024)}
        conf.update(extra_conf or {})
        self.conf_path = self.root / "broker.conf"
        self.conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.log_path = self.root / "twistd.log"
        self.proc: subprocess.Popen | None = None
        self.extra_twistd_args: list[str] = []  # e.g. --profile for benchmarks
        self.env: dict[str, str] = {}  # extra environment of the server process
        self.plugin_args: list[str] = [] if brokers == 1 else ["--brokers", str(brokers)]  # e.g. --console-port

    @staticmethod
    def _group_ports(brokers: int) -> int:
        """A broker port whose groups' ports (each with its fast and HA port) are all free now."""
        for _ in range(50):
            port = free_port()
            if all(port_free(port + 10 * k + d, "127.0.0.1") for k in range(1, brokers) for d in range(-NEIGHBOURS, NEIGHBOURS + 1)):
                return port
        raise RuntimeError(f"no free run of ports for {brokers} broker groups")

    def start(self, timeout: float = 20.0) -> "Standalone":
        cmd = [
            sys.executable, "-c", "from twisted.scripts.twistd import run; run()",
            "-n", "--pidfile=", "--logfile", str(self.log_path), *self.extra_twistd_args, "rmqstandalone",
            "-c", str(self.conf_path), "--namesrv-port", str(self.namesrv_port),
            "--port", str(self.broker_port), "--store", str(self.root / "store"), *self.plugin_args,
        ]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     env={**os.environ, **self.env} if self.env else None)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rmqstandalone exited with {self.proc.returncode}:\n{self.log()}")
            try:
                resp = call(self.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), 1)
                if resp.code == ResponseCode.SUCCESS and len(fastjson.loads(resp.body)["brokerDatas"]) == self.brokers:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"rmqstandalone did not come up in {timeout} s:\n{self.log()}")

    def create_topic(self, topic: str, queues: int = 4, message_type: str = "") -> None:
        """UPDATE_AND_CREATE_TOPIC on the broker, as ``mqadmin updateTopic`` does (5.x's ``-a
        +message.type=FIFO`` when a message type is named)."""
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        if message_type:
            fields["attributes"] = f"+message.type={message_type}"
        resp = call(self.broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"create topic {topic}: {resp.code} {resp.remark}")
        deadline = time.time() + 5
        while time.time() < deadline:  # the broker registers the new topic with the NameServer at once
            route = call(self.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
            if route.code == ResponseCode.SUCCESS:
                return
            time.sleep(0.05)
        raise RuntimeError(f"topic {topic} never reached the NameServer")

    def send_to_queue(self, topic: str, queue_id: int, body: str) -> None:
        """One SEND_MESSAGE_V2 to a given queue, as a Java producer builds it (for probes)."""
        from rmqtx.remoting.headers import SendMessageRequestHeader, send_header_to_v2

        header = SendMessageRequestHeader(
            producerGroup="P_probe", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=queue_id,
            sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0, properties="WAIT\x01true\x02TAGS\x01Probe",
            reconsumeTimes=0, unitMode=False, batch=False,
        )
        fields, order = send_header_to_v2(header)
        request = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=body.encode(), fast_keys=order)
        resp = call(self.broker, request)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"probe to {topic}/{queue_id}: {resp.code} {resp.remark}")

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-5000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> bool:
        """SIGTERM and wait; True when it shut down cleanly (twistd re-raises SIGTERM, so -15 is normal)."""
        if self.proc is None:
            return False
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode in (0, -signal.SIGTERM) and "Server Shut Down." in self.log()

    def close(self) -> None:
        self.stop()
        self.tmp.cleanup()


def run_client(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> list[dict]:
    """Run a client scenario script; it prints one JSON object per line. Raises on failure."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        raise AssertionError(f"{argv[1:3]} exited {proc.returncode}\nstdout:{proc.stdout[-3000:]}\nstderr:{proc.stderr[-3000:]}")
    return lines


class EventReader:
    """A scenario process's JSON lines, read in a thread, so a test can wait for an event with a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            if line.startswith("{"):
                with self._lock:
                    self.events.append(json.loads(line))

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)

    def finish(self, timeout: float = 90) -> tuple[int, list[dict], str]:
        """Wait for the process to end: (exit code, every event, stderr)."""
        err = self.proc.stderr.read() if self.proc.stderr else ""  # type: ignore[union-attr]
        code = self.proc.wait(timeout)
        self._thread.join(timeout)
        return code, self.snapshot(), err


def wait_for(predicate, timeout: float, what: str, step: float = 0.05) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds saying ``what`` was awaited."""
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(step)


PROBE = "probe-"


def settle_with_probes(server: "Standalone", topic: str, readers: list[EventReader], queues: int, shared: bool,
                       timeout: float = 40) -> None:
    """Send rounds of probe messages, one to each queue, until one round shows the group settled.

    ``shared`` (broadcasting): every member got every queue's probe. Otherwise (clustering, orderly):
    every probe reached exactly one member, and the members split the queues evenly.
    """
    deadline = time.time() + timeout
    for round_no in range(10_000):
        bodies = {f"{PROBE}{round_no}-{q}": q for q in range(queues)}
        for body, q in bodies.items():
            server.send_to_queue(topic, q, body)

        def round_seen() -> list[set[int]]:
            return [{bodies[e["body"]] for e in r.snapshot() if e.get("kind") == "recv" and e.get("body") in bodies}
                    for r in readers]

        try:
            wait_for(lambda: set().union(*round_seen()) == set(bodies.values()), min(3.0, max(deadline - time.time(), 0.1)),
                     "a probe round")
        except AssertionError:
            if time.time() > deadline:
                raise AssertionError(f"the group never settled on {topic}: last round {round_seen()}") from None
            continue
        seen = round_seen()
        if shared and all(s == set(bodies.values()) for s in seen):
            return
        if not shared and sum(len(s) for s in seen) == queues and all(len(s) == queues // len(readers) for s in seen):
            return
        if time.time() > deadline:
            raise AssertionError(f"the group never settled on {topic}: last round {seen}")


def real_events(events: list[dict]) -> list[dict]:
    """Events without the probes settle_with_probes sent."""
    return [e for e in events if not str(e.get("body", "")).startswith(PROBE)]


def stop_when_all_seen(readers: list[EventReader], bodies: set[str], timeout: float) -> None:
    """Members of one group split the messages, so none can tell when to stop: once their ``recv``
    events together hold every body in ``bodies`` (or after ``timeout``), close their stdin (they were
    started with ``until`` "stdin"); what they got is checked afterwards by the test."""
    def seen() -> set[str]:
        return {e["body"] for r in readers for e in real_events(r.snapshot()) if e.get("kind") == "recv"}
    deadline = time.time() + timeout
    while not bodies <= seen() and time.time() < deadline and any(r.proc.poll() is None for r in readers):
        time.sleep(0.05)
    for reader in readers:
        if reader.proc.stdin is not None:
            reader.proc.stdin.close()


class ServerPerTest:
    """Mixin for unittest.TestCase: a fresh standalone per test (trial runs no setUpClass)."""

    server_conf: dict[str, str] = {}

    def setUp(self) -> None:
        self.home = tempfile.TemporaryDirectory(prefix="rmqtx-client-home-")
        self.server = Standalone(dict(self.server_conf)).start()

    def tearDown(self) -> None:
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        self.home.cleanup()
        if not clean:
            raise AssertionError(f"standalone did not shut down cleanly\n{log}")

    def wait_for_members(self, group: str, count: int, timeout: float = 20) -> None:
        """Until the broker lists ``count`` consumers in ``group`` (they heartbeat at start)."""
        deadline = time.time() + timeout
        members: list = []
        while time.time() < deadline:
            resp = call(self.server.broker, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}))
            if resp.code == ResponseCode.SUCCESS:
                members = json.loads(resp.body)["consumerIdList"]
                if len(members) >= count:
                    return
            time.sleep(0.1)
        raise AssertionError(f"group {group} has members {members}, wanted {count}")
