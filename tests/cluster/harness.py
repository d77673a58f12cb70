"""Two NameServers and two broker groups (``a``, ``b``) as real processes on loopback, and client
processes (rmqtx's Python client, the Apache 4.9.8 Java client) that print one line per event.

Every broker registers with both NameServers (``namesrvAddr=h:p1;h:p2``); clients are given both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rmqtx.broker.jsonfiles import loads_fastjson
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.ports import free_port
from testkit.standalone import REPO, call
from testkit.ha import Broker, Proc, wait_until

CLUSTER = "TwoGroups"
TOPIC = "T_cluster"
QUEUES = 4


class Namesrv(Proc):
    """``twistd rmqnamesrv`` with its own name, port and KV file (two run side by side)."""

    def __init__(self, root: Path, name: str) -> None:
        super().__init__(root, name)
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"

    def start(self) -> "Namesrv":
        self.spawn(["rmqnamesrv", "--listen-port", str(self.port), "--listen-address", "127.0.0.1",
                    "--kv-config-path", str(self.root / f"{self.name}-kvConfig.json")])
        return self

    def ready(self) -> bool:
        if not self.alive():
            raise AssertionError(f"{self.name} exited:\n{self.log()}")
        return call(self.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 1).code == ResponseCode.SUCCESS

    def cluster_info(self) -> dict:
        resp = call(self.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 2)
        return loads_fastjson(resp.body) if resp.body else {}

    def masters(self) -> dict[str, str]:
        """brokerName -> master address, for the brokers of CLUSTER this NameServer lists."""
        info = self.cluster_info()
        names = (info.get("clusterAddrTable") or {}).get(CLUSTER) or []
        table = info.get("brokerAddrTable") or {}
        out = {}
        for name in names:
            addrs = (table.get(name) or {}).get("brokerAddrs") or {}
            master = addrs.get(0, addrs.get("0"))
            if master:
                out[name] = master
        return out

    def route_brokers(self, topic: str) -> set[str]:
        """The broker names with queues of ``topic`` in this NameServer's route (empty when it has none)."""
        resp = call(self.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 2)
        if resp.code != ResponseCode.SUCCESS:
            return set()
        route = loads_fastjson(resp.body)
        return {q["brokerName"] for q in route.get("queueDatas") or []}


class TwoGroups:
    """A temp dir, two NameServers (started), and the broker groups a test adds."""

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-cluster-")
        self.root = Path(self.tmp.name)
        self.namesrvs = self.make_namesrvs()
        self.procs: list[Proc] = list(self.namesrvs)
        self.clients: list[ClientProc] = []
        for ns in self.namesrvs:
            wait_until(ns.ready, 90, f"NameServer {ns.name}")
        self.namesrv = ";".join(ns.addr for ns in self.namesrvs)

    def make_namesrvs(self) -> list[Namesrv]:
        """The two NameServers, started (rmqtx's; a subclass may bring others)."""
        return [Namesrv(self.root, "ns1").start(), Namesrv(self.root, "ns2").start()]

    def rmqtx_broker(self, name: str, **conf: str) -> Broker:
        """An rmqtx broker group of one master; its store stays across kill and restart."""
        broker = Broker(self.root, name, self.namesrv, {"brokerName": name, "brokerClusterName": CLUSTER,
                                                        "mappedFileSizeCommitLog": str(4 * 1024 * 1024),
                                                        # Java's shortest: a restarted NameServer relearns the group in <= 10 s
                                                        "registerNameServerPeriod": "10000",
                                                        **{k: str(v) for k, v in conf.items()}})
        self.procs.append(broker)
        return broker

    def live_namesrvs(self) -> list[Namesrv]:
        return [ns for ns in self.namesrvs if ns.alive()]

    def wait_registered(self, brokers: dict[str, str], timeout: float = 30) -> None:
        """Every running NameServer lists exactly these groups (name -> master address)."""
        for ns in self.live_namesrvs():
            wait_until(lambda: ns.masters() == brokers, timeout, f"{ns.name} listing {brokers}", step=0.1)

    def create_topic(self, broker_addr: str, topic: str = TOPIC, queues: int = QUEUES) -> None:
        """UPDATE_AND_CREATE_TOPIC on one group's master, as ``mqadmin updateTopic -b`` sends it."""
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        resp = call(broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10)
        if resp.code != ResponseCode.SUCCESS:
            raise AssertionError(f"create {topic} on {broker_addr}: {resp.code} {resp.remark}")

    def wait_route(self, topic: str, names: set[str], timeout: float = 30) -> None:
        """Every running NameServer routes ``topic`` to exactly these groups."""
        for ns in self.live_namesrvs():
            wait_until(lambda: ns.route_brokers(topic) == names, timeout, f"{ns.name}'s route of {topic} over {names}", step=0.1)

    def start_client(self, argv: list[str], name: str, env: dict[str, str] | None = None) -> "ClientProc":
        client = ClientProc(argv, self.root / f"{name}.err", env)
        self.clients.append(client)
        return client

    def close(self) -> list[str]:
        """Stop clients and servers; the names of servers that did not shut down cleanly."""
        for client in self.clients:
            client.kill()
        bad = [p.name for p in reversed(self.procs) if p.alive() and not p.stop()]
        self.tmp.cleanup()
        return bad


def max_offset(addr: str, topic: str, queue_id: int) -> int:
    resp = call(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}), 5)
    if resp.code != ResponseCode.SUCCESS:
        raise AssertionError(f"GET_MAX_OFFSET {topic}:{queue_id} on {addr}: {resp.code} {resp.remark}")
    return int(resp.ext_fields["offset"])


def stored(brokers: dict[str, str], topic: str, queues: int = QUEUES) -> dict[tuple[str, int], int]:
    """(brokerName, queueId) -> max offset, over the given groups."""
    return {(name, q): max_offset(addr, topic, q) for name, addr in brokers.items() for q in range(queues)}


@dataclass
class Lines:
    """What one client process printed, parsed."""

    acked: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # key -> (broker, queue, offset)
    ack_order: list[tuple[float, str, str]] = field(default_factory=list)  # (monotonic time, key, broker)
    failed: list[tuple[float, str, str]] = field(default_factory=list)  # (time, key, error)
    consumed: Counter = field(default_factory=Counter)  # key -> times
    positions: dict[tuple[str, str, int, int], str] = field(default_factory=dict)  # (topic, broker, queue, offset) -> key
    queues: set[str] = field(default_factory=set)  # latest share of the first topic: "broker:queue"
    started: bool = False
    paused: bool = False  # the last "pause"/"resume" took effect as "pause"
    done: bool = False
    other: list[str] = field(default_factory=list)


class ClientProc:
    """A client child process: stdout parsed by a thread; closing stdin asks it to finish."""

    def __init__(self, argv: list[str], err_path: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.err_path = err_path
        self.lines = Lines()
        self.lock = threading.Lock()
        self.topic_of_consumer = ""
        with open(err_path, "ab") as err:
            self.proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         text=True, env=env, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if not parts:
                continue
            now = time.monotonic()
            with self.lock:
                kind = parts[0]
                if kind == "ACK":
                    key, broker = parts[1], parts[2]
                    self.lines.acked[key] = (broker, int(parts[3]), int(parts[4]))
                    self.lines.ack_order.append((now, key, broker))
                elif kind == "FAIL":
                    self.lines.failed.append((now, parts[1], " ".join(parts[2:])))
                elif kind == "MSG":  # MSG topic key broker queue offset
                    self.lines.consumed[parts[2]] += 1
                    self.lines.positions[(parts[1], parts[3], int(parts[4]), int(parts[5]))] = parts[2]
                elif kind == "QUEUES":
                    self.lines.queues = set(parts[1:])
                elif kind in ("PAUSED", "RESUMED"):
                    self.lines.paused = kind == "PAUSED"
                elif kind == "STARTED":
                    self.lines.started = True
                elif kind == "DONE":
                    self.lines.done = True
                else:
                    self.lines.other.append(line.rstrip())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check_alive(self) -> None:
        if not self.alive() and not self.lines.done:
            raise AssertionError(f"client {self.argv[-6:]} exited with {self.proc.returncode}:\n{self.stderr()}")

    def stderr(self) -> str:
        try:
            return self.err_path.read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    def snapshot(self) -> Lines:
        with self.lock:
            return Lines(dict(self.lines.acked), list(self.lines.ack_order), list(self.lines.failed),
                         Counter(self.lines.consumed), dict(self.lines.positions), set(self.lines.queues),
                         self.lines.started, self.lines.paused, self.lines.done, list(self.lines.other))

    def wait_started(self, timeout: float = 60) -> None:
        def started() -> bool:
            self.check_alive()
            return self.lines.started
        wait_until(started, timeout, f"client {self.argv[-6:]} to start", step=0.1)

    def tell(self, line: str, timeout: float = 10) -> None:
        """Write "pause" or "resume" and wait until the client says it took effect."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        wait_until(lambda: self.snapshot().paused == (line == "pause"), timeout, f"the client to {line}", step=0.02)

    def finish(self, timeout: float = 30) -> Lines:
        """Close stdin, wait for the process to print DONE and exit."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"client {self.argv[-6:]} did not finish within {timeout} s:\n{self.stderr()}")
        self.reader.join(10)
        if not self.lines.done:
            raise AssertionError(f"client {self.argv[-6:]} exited with {self.proc.returncode} without DONE:\n{self.stderr()}")
        return self.snapshot()

    def wait_exit(self, timeout: float) -> int:
        """For a program that ends by itself (Apache's benchmark Producer with -q): its exit code."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.argv[-8:]} still running after {timeout} s; output: {self.snapshot().other[-5:]}")
        self.reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL the client's process group if it still runs; close our ends of its pipes."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self.reader.join(10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                try:
                    pipe.close()
                except OSError:
                    pass


def rmqadmin(namesrv: str, *args: str) -> str:
    """rmqadmin in its own process; its stdout."""
    done = subprocess.run([sys.executable, "-c", "from rmqtx.tools.admin import main; main()", *args, "-n", namesrv],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"rmqadmin {args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def python_client(*args: str) -> list[str]:
    return [sys.executable, "-m", "tests.cluster.py_client", *args]
