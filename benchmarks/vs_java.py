"""rmqtx against the real Apache RocketMQ 4.9.8 NameServer+Broker, driven by Apache's own benchmark tools.

    python benchmarks/vs_java.py [--quick] [--threads 8,64] [--flush ASYNC_FLUSH,SYNC_FLUSH]
                                 [--seconds N] [--consume-seconds N] [--repeat N] [--rmqtx-brokers N]
                                 [--busy spin8,jvm8 [--no-quiet]] [--ceiling]

``--busy`` adds busy cells: the same cells again with a fixed background started beside each server
alike (``spinN``: N spinning processes; ``jvmN``: a JVM of N threads churning its heap, see
``benchmarks/busy/Churn.java``). The table reports, per cell, the share of a core each server used
while the Producer ran and the sends one second of server CPU carries, from which a many-core host
can be projected (rmqtx's one broker process is bounded by one core; ``--rmqtx-brokers N`` by N).

``--cgroups`` (root; cgroup v1 or v2 with the cpu controller) puts the servers, the background and
Apache's clients in three CPU control groups of equal weight, as a service manager puts each service
in its own: the kernel then shares the cores among the three parts rather than among their threads
(where a Java broker's dozens of threads outweigh rmqtx's one reactor thread).

``--ceiling`` runs each cell a third time, between the two servers, against ``benchmarks/answer_only.py``:
rmqtx's NameServer and a listener that answers every send at once and stores nothing, in Python on
Twisted's reactor as rmqtx's broker is. What the Producer sends to it is the most a broker built that way
can get from this machine; rmqtx's ratio to Java cannot pass that one's.

``--rmqtx-brokers N`` runs rmqtx as ``rmqstandalone --brokers N`` (the topic gets its queues on every
group, the server CPU figures add the groups' processes) against one Java broker.
Prints one Markdown table of rmqtx/Java ratios measured in the same minutes on the same machine
(it is shared and noisy: read the ratios, not the absolute figures). ``--quick`` is ASYNC_FLUSH with
64 threads only, one repeat, about 2 minutes; the default (both flush modes, 8 and 64 threads)
takes about 10 minutes per repeat.

What it does, per (flush mode, producer threads) and server, Java and rmqtx taking turns (never both
at once; the order flips every cell and every repeat, so drift hits both):

1. a fresh server on a fresh temp store and free ports: the Java NameServer then Broker
   (``NamesrvStartup``/``BrokerStartup``), or ``twistd rmqstandalone`` (both in one process);
   start-to-listening is from the first process start until the broker port accepts and the
   NameServer serves the route of ``TBW102`` (so the broker has registered); rmqtx's modules are
   byte-compiled first, as ``pip install`` leaves them (Java's come compiled in their jars);
2. topic ``VsJavaBench`` created with 8 queues, as ``mqadmin updateTopic`` does;
3. ``org.apache.rocketmq.example.benchmark.Producer -w THREADS -s 1024`` for ``--seconds`` of its
   own run (stopped after its ``seconds/10``-th report, however slowly its JVM started).
   It prints every 10 s the TPS and average RT of the last ~9 s and the max RT since it started;
   the first line (JVM and connection warm-up) is dropped and the others averaged;
4. ``...benchmark.Consumer -w THREADS`` drains that backlog (a new group starts at offset 0 on a
   fresh store). Consume TPS is measured on the broker's side: its committed offsets for the group
   (the push consumer commits with every pull) are polled every 0.05 s and the drain rate taken
   between 10% and 90% of the smaller backlog of the two sides (the same messages for both: a longer
   drain ramps up to a higher rate; this also leaves out the consumer's start and the tail, which
   the client commits only every 5 s). Apache's own printout (best 9-s window) is shown
   too; it understates a backlog drained in less than one window;
5. meanwhile the server processes' RssAnon (/proc/PID/status) is sampled every 0.1 s for its peak,
   and their CPU time (/proc/PID/stat utime+stime) over the producer phase is divided by the
   messages stored (sum of the queues' max offsets): CPU per message hardly depends on how busy the
   machine is. For Java both JVMs are counted, as rmqtx's one process does both jobs (the
   NameServer's share is small: it idles at ~1% CPU and ~60 MB).

Same broker settings on both sides: brokerName, cluster, flushDiskType, 1 GiB commit log files
(Java's default), 8 queues; everything else at its default.

JVM options: Apache's ``runserver.sh``/``runbroker.sh`` (G1 on Java 9+: ``-XX:+UseG1GC
-XX:G1HeapRegionSize=16m -XX:G1ReservePercent=25 -XX:InitiatingHeapOccupancyPercent=30
-XX:SoftRefLRUPolicyMSPerMB=0``, GC log to a file, ``-XX:-OmitStackTraceInFastThrow
-XX:-UseLargePages``) with the sizes scaled to a 2-core 24 GiB machine that other jobs share:
NameServer ``-Xms512m -Xmx512m`` (Apache: 4g), Broker ``-Xms2g -Xmx2g -XX:MaxDirectMemorySize=4g``
(Apache: 8g heap, 15g direct). A broker keeps messages in mapped files, not on the heap: 2 GiB holds
far more than 64 producers ever have in flight. Java's RssAnon follows the heap given (G1 fills
its young generation before collecting: ~1.6 GB with 2g); ``--broker-heap`` shows the effect. ``-XX:+AlwaysPreTouch`` is left out: it would commit
the whole heap at start, inflating Java's RSS and start-up time, so leaving it out can only favour
Java. ``-XX:-UseBiasedLocking`` is left out as Java 17 disables biased locking anyway. No debug
flags. The benchmark clients run as Apache's ``runclass.sh`` does (``-Xms1g -Xmx1g -Xmn256m``, the
Producer with ``-Dorg.apache.rocketmq.client.sendSmartMsg=true``), ``user.home`` in the temp dir.

The Java side is Apache's 4.9.8 source release (``rocketmq-all-4.9.8-source-release.zip``, on Maven
Central, declared in ``testkit/java/pom.xml``; ``testkit/java.py`` builds it) built once with Maven into a cache
(``$RMQTX_BENCH_CACHE``, default ``~/.cache/rmqtx-bench``; ~2 min the first time): the 4.9.8 broker,
NameServer and example jars are not published on Maven Central (only 4.9.7's broker is).
Needs Java 8+ and Maven (``scripts/ensure-java.sh`` installs a JRE).
The Java broker binds all interfaces: 4.9.8 has no bind-address setting.
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rmqtx.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from rmqtx.remoting.command import RemotingCommand  # noqa: E402
from rmqtx.remoting.serializer import decode_frame_payload, encode_frame  # noqa: E402
from testkit.java import BROKER_OPTS, CLIENT_OPTS, LOGBACK, NAMESRV_OPTS, java_bin, java_classpaths, log  # noqa: E402
from rmqtx.common import fastjson  # noqa: E402
from testkit.ports import NEIGHBOURS, free_port, port_free  # noqa: E402
from testkit.procs import accepts, owned, spawn, stop, stop_all  # noqa: E402

TOPIC = "VsJavaBench"  # not "BenchmarkTest": 4.9.8 brokers reserve it (1024 queues, system topic)
QUEUES = 8
GROUP = "benchmark_consumer"
MSG_SIZE = 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")
KEEP = False  # --keep: leave each run's temp dir (logs, store) for a look

BROKER_HEAP = "2g"  # --broker-heap
RMQTX_BROKERS = 1  # --rmqtx-brokers: rmqstandalone --brokers N (docs/running.md)
CPU_GROUPS: CpuGroups | None = None  # --cgroups


def _on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------- --cgroups: one CPU control group per part of a run

class CpuGroups:
    """Three CPU control groups of equal weight: the servers, the background and Apache's clients.

    Linux shares a core among the runnable threads of one group, and among groups by their weights;
    on a host each service runs in a group of its own (systemd), so this is how a broker meets its
    neighbours there. The groups are made under the cpu hierarchy's root and removed at the end.
    """

    ROLES = ("server", "background", "clients")

    def __init__(self, root: Path, v2: bool) -> None:
        self.root, self.v2 = root, v2
        self.dirs = {role: root / f"rmqtx-vsjava-{os.getpid()}-{role}" for role in self.ROLES}

    @classmethod
    def find(cls, base: Path = Path("/sys/fs/cgroup")) -> CpuGroups:
        """The writable cpu hierarchy (v2 with ``cpu`` among its controllers, else v1's ``cpu``); RuntimeError if none."""
        controllers = base / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            found = cls(base, v2=True)
        elif (base / "cpu" / "cgroup.procs").exists():
            found = cls(base / "cpu", v2=False)
        else:
            raise RuntimeError(f"--cgroups: no cpu controller under {base}")
        if not os.access(found.root, os.W_OK):
            raise RuntimeError(f"--cgroups: {found.root} is not writable (run as root)")
        return found

    def create(self) -> None:
        if self.v2:
            (self.root / "cgroup.subtree_control").write_text("+cpu")
        for path in self.dirs.values():
            path.mkdir(exist_ok=True)

    def wrap(self, role: str, cmd: list[str]) -> list[str]:
        """``cmd`` started inside ``role``'s group: the shell joins it, then becomes the command (same pid)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.dirs[role] / "cgroup.procs"), *cmd]

    def remove(self) -> None:
        for path in self.dirs.values():
            try:
                path.rmdir()
            except OSError:
                pass  # gone already, or a process left in it (stop_all has killed them)


def in_group(role: str, cmd: list[str]) -> list[str]:
    """``cmd`` in ``role``'s CPU group under ``--cgroups``, else as it is."""
    return CPU_GROUPS.wrap(role, cmd) if CPU_GROUPS is not None else cmd


# ---------------------------------------------------------------- talking to either server

class Conn:
    """One blocking RocketMQ remoting connection: requests one at a time (fine for polling)."""

    def __init__(self, addr: str, timeout: float = 5.0) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)

    def call(self, code: int, fields: dict) -> RemotingCommand:
        self.sock.sendall(encode_frame(RemotingCommand.request(code, fields)))
        size = int.from_bytes(self._read(4), "big")
        return decode_frame_payload(self._read(size))

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def call_once(addr: str, code: int, fields: dict, timeout: float = 2.0) -> RemotingCommand:
    conn = Conn(addr, timeout)
    try:
        return conn.call(code, fields)
    finally:
        conn.close()


def wait_until(pred, timeout: float, what: str, procs: list[subprocess.Popen], step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                tail = Path(proc.out_path).read_text(errors="replace")[-1500:]
                raise RuntimeError(f"{what}: process {proc.args[-3:]} exited with {proc.returncode}:\n{tail}")
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(step)
    raise RuntimeError(f"{what}: not within {timeout} s")


def route_served(namesrv: str, topic: str) -> bool:
    return call_once(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).code == ResponseCode.SUCCESS


# ---------------------------------------------------------------- servers

@dataclass
class Server:
    name: str
    tmp: Path
    namesrv: str = ""
    broker: str = ""
    procs: list[subprocess.Popen] = field(default_factory=list)
    start_seconds: float = 0.0
    groups: list[str] = field(default_factory=list)  # every broker group's address (rmqtx --brokers N)
    child_pids: list[int] = field(default_factory=list)  # the groups' processes, children of procs

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs] + self.child_pids

    def wait_ready(self, t0: float) -> None:
        wait_until(lambda: accepts(self.broker) and route_served(self.namesrv, "TBW102"), START_TIMEOUT,
                   f"{self.name} start", self.procs)
        self.start_seconds = time.monotonic() - t0

    def close(self) -> None:
        for proc in reversed(self.procs):  # broker first, as mqshutdown does
            stop(proc)


#: Seconds a broker may take to be ready (benchmarks/queues.py raises it: a restart on a big store)
START_TIMEOUT = 60.0


def broker_conf(flush: str, namesrv: str, port: int, store: Path) -> dict[str, str]:
    return {"brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0", "brokerIP1": "127.0.0.1",
            "namesrvAddr": namesrv, "listenPort": str(port), "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"), "flushDiskType": flush,
            "mappedFileSizeCommitLog": str(1024 * 1024 * 1024)}


def write_props(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def start_java(cps: dict[str, str], flush: str, tmp: Path) -> Server:
    tmp.mkdir(parents=True, exist_ok=True)
    home = tmp / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    logs = tmp / "logs"
    logs.mkdir()
    for who in ("namesrv", "broker"):
        (home / "conf" / f"logback_{who}.xml").write_text(LOGBACK.format(log=logs / f"{who}.log"))
    taken: set[int] = set()
    ns_port, br_port, ha_port = free_port(taken, host="0.0.0.0"), free_port(taken, gap_below=2, host="0.0.0.0"), free_port(taken, host="0.0.0.0")
    server = Server("java", tmp, namesrv=f"127.0.0.1:{ns_port}", broker=f"127.0.0.1:{br_port}")
    env = {**os.environ, "ROCKETMQ_HOME": str(home)}
    common = [f"-Duser.home={tmp / 'home'}", f"-Drocketmq.home.dir={home}"]
    ns_conf = write_props(tmp / "namesrv.conf", {"listenPort": str(ns_port), "kvConfigPath": str(tmp / "kvConfig.json")})
    conf = broker_conf(flush, server.namesrv, br_port, tmp / "store")
    conf["haListenPort"] = str(ha_port)
    br_conf = write_props(tmp / "broker.conf", conf)
    t0 = time.monotonic()
    server.procs.append(spawn(in_group("server", [
        java_bin(), *NAMESRV_OPTS, f"-Xlog:gc*:file={logs / 'namesrv_gc.log'}:time,tags",
        *common, "-cp", cps["namesrv"], "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(ns_conf)]),
        logs / "namesrv.out", env=env))
    wait_until(lambda: accepts(server.namesrv), 60, "java namesrv start", server.procs)
    heap = [f"-Xms{BROKER_HEAP}", f"-Xmx{BROKER_HEAP}"]
    server.procs.append(spawn(in_group("server", [
        java_bin(), *heap, *BROKER_OPTS, f"-Xlog:gc*:file={logs / 'broker_gc.log'}:time,tags",
        *common, "-cp", cps["broker"], "org.apache.rocketmq.broker.BrokerStartup", "-c", str(br_conf)]),
        logs / "broker.out", env=env))
    server.wait_ready(t0)
    return server


def compile_rmqtx() -> None:
    """Byte-compile rmqtx's modules, as ``pip install`` does: run from a checkout with stale or missing
    ``.pyc`` files (or PYTHONDONTWRITEBYTECODE set), every start compiled ~100 modules, ~0.2 s."""
    for sub in ("rmqtx", "twisted/plugins"):
        compileall.compile_dir(str(REPO / sub), quiet=1)


def group_ports_free(port: int, brokers: int) -> bool:
    """Groups 2..N listen on port + 10*(k-1), each with its fast and HA port (rmqtx.groups)."""
    return all(port_free(port + 10 * k + d, "127.0.0.1") for k in range(1, brokers) for d in range(-NEIGHBOURS, NEIGHBOURS + 1))


def child_pids(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
        except OSError:
            pass
    return out


def start_rmqtx(flush: str, tmp: Path, extra_conf: dict[str, str] | None = None) -> Server:
    tmp.mkdir(parents=True, exist_ok=True)
    taken: set[int] = set()
    ns_port, br_port = free_port(taken), free_port(taken)
    while not group_ports_free(br_port, RMQTX_BROKERS):
        br_port = free_port(taken)
    server = Server("rmqtx", tmp, namesrv=f"127.0.0.1:{ns_port}", broker=f"127.0.0.1:{br_port}")
    conf = broker_conf(flush, server.namesrv, br_port, tmp / "store")
    for key in ("namesrvAddr", "listenPort", "storePathRootDir", "storePathCommitLog"):
        conf.pop(key)  # given on the command line / derived by rmqstandalone
    conf.update(extra_conf or {})
    conf_path = write_props(tmp / "broker.conf", conf)
    cmd = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "-n", "--pidfile=",
           "--logfile", str(tmp / "twistd.log"), "rmqstandalone", "-c", str(conf_path),
           "--namesrv-port", str(ns_port), "--port", str(br_port), "--store", str(tmp / "store"),
           "--brokers", str(RMQTX_BROKERS)]
    t0 = time.monotonic()
    server.procs.append(spawn(in_group("server", cmd), tmp / "rmqtx.out", cwd=REPO))
    server.wait_ready(t0)
    server.groups = [f"127.0.0.1:{br_port + 10 * k}" for k in range(RMQTX_BROKERS)]
    if RMQTX_BROKERS > 1:
        def all_routed() -> bool:
            resp = call_once(server.namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
            return len(fastjson.loads(resp.body)["brokerDatas"]) == RMQTX_BROKERS
        wait_until(all_routed, 60, "rmqtx broker groups", server.procs)
        server.child_pids = child_pids(server.procs[0].pid)
        server.start_seconds = time.monotonic() - t0
    return server


def start_answer_only(tmp: Path) -> Server:
    """rmqtx's NameServer and a listener that answers every send at once and stores nothing
    (benchmarks/answer_only.py): the ceiling of a broker on Python and Twisted's reactor here."""
    tmp.mkdir(parents=True, exist_ok=True)
    taken: set[int] = set()
    ns_port, br_port = free_port(taken), free_port(taken)
    server = Server("answer-only", tmp, namesrv=f"127.0.0.1:{ns_port}", broker=f"127.0.0.1:{br_port}")
    cmd = [sys.executable, str(REPO / "benchmarks" / "answer_only.py"), "--namesrv-port", str(ns_port),
           "--port", str(br_port), "--topic", TOPIC, "--queues", str(QUEUES),
           "--kv-config-path", str(tmp / "kvConfig.json")]
    t0 = time.monotonic()
    server.procs.append(spawn(in_group("server", cmd), tmp / "answer_only.out", cwd=REPO))
    server.wait_ready(t0)
    return server


START = {"java": start_java, "rmqtx": lambda cps, flush, tmp: start_rmqtx(flush, tmp),
         "answer": lambda cps, flush, tmp: start_answer_only(tmp)}


def create_topic(server: Server) -> None:
    fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
    for addr in server.groups or [server.broker]:  # QUEUES on every group, as mqadmin updateTopic -c does
        resp = call_once(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields, timeout=10)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"{server.name}: create topic on {addr}: {resp.code} {resp.remark}")
    wait_until(lambda: route_served(server.namesrv, TOPIC), 30, f"{server.name} topic route", server.procs, step=0.1)


# ---------------------------------------------------------------- /proc sampling

def rss_anon_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat: how saturated the cores were."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / CLK_TCK


def wait_seconds(pids: list[int]) -> float:
    """Time the processes' threads spent runnable but waiting for a core (/proc/PID/task/*/schedstat's
    run delay), summed: how much a busy machine's scheduler held a server back, whatever it needed."""
    total = 0
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except (FileNotFoundError, ProcessLookupError):
            continue
        for task in tasks:
            try:
                total += int((task / "schedstat").read_text().split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                pass
    return total / 1e9


class RssPeak(threading.Thread):
    """Peak of the summed RssAnon of some processes, sampled every 0.1 s."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids, self.peak_kb, self.done = pids, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak_kb = max(self.peak_kb, sum(rss_anon_kb(p) for p in self.pids))


# ---------------------------------------------------------------- Apache's benchmark clients

SEND_RE = re.compile(r"Send TPS: (\d+) Max RT\(ms\): (\d+) Average RT\(ms\):\s*([\d.]+) Send Failed: (\d+) Response Failed: (\d+)")
CONSUME_RE = re.compile(r"Current Time: \d+ TPS: (\d+) FAIL: (\d+)")


def client_cmd(cps: dict[str, str], tmp: Path, cls: str, extra_props: list[str], args: list[str]) -> list[str]:
    home = tmp / "client-home"
    return [java_bin(), *CLIENT_OPTS, f"-Duser.home={home}", f"-Drocketmq.client.logRoot={home / 'logs'}",
            *extra_props, "-cp", cps["example"], f"org.apache.rocketmq.example.benchmark.{cls}", *args]


def max_offsets(conn: Conn) -> int:
    total = 0
    for q in range(QUEUES):
        resp = conn.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q})
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"GET_MAX_OFFSET: {resp.code} {resp.remark}")
        total += int(resp.ext_fields["offset"])
    return total


def consumer_offsets(conn: Conn) -> int:
    total = 0
    for q in range(QUEUES):
        resp = conn.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": q})
        if resp.code == ResponseCode.SUCCESS:
            total += int(resp.ext_fields["offset"])
    return total


DRAIN_LO, DRAIN_HI = 0.1, 0.9


def crossing(samples: list[tuple[float, int]], level: float) -> float | None:
    """When the polled offsets first reached ``level``, interpolated between two polls."""
    for (t0, v0), (t1, v1) in zip(samples, samples[1:]):
        if v0 < level <= v1:
            return t0 + (t1 - t0) * (level - v0) / (v1 - v0)
    return None


def drain_rate(samples: list[tuple[float, int]], backlog: int) -> float:
    """Messages/s from 10% to 90% of ``backlog``: leaves out the consumer's start and rebalance, and
    the tail, whose offsets the client commits only with its next pull or every 5 s."""
    lo, hi = crossing(samples, DRAIN_LO * backlog), crossing(samples, DRAIN_HI * backlog)
    if lo is None or hi is None or hi <= lo:
        return float("nan")
    return (DRAIN_HI - DRAIN_LO) * backlog / (hi - lo)


def common_drain(results: list[dict]) -> None:
    """Both sides' drain rate over the same messages: 10-90% of the smaller backlog of each pair.

    The faster sender leaves a larger backlog, and a longer drain reaches a higher rate (the client
    ramps up), so comparing each over its own backlog would favour it."""
    stored = [r for r in results if r["impl"] != "answer"]
    for r in results:
        if r["impl"] == "answer":
            r["drain_over"] = r["drain_tps"] = float("nan")
            continue
        key = ("busy", "flush", "threads", "rep")
        pair = [o for o in stored if all(o[k] == r[k] for k in key)]
        r["drain_over"] = min(o["backlog"] for o in pair)
        r["drain_tps"] = drain_rate(r["samples"], r["drain_over"])


# ---------------------------------------------------------------- busy cells: a fixed background beside either server

CHURN = REPO / "benchmarks" / "busy" / "Churn.java"
SPIN = "while True: pass"
#: ``--busy`` names: a background of a fixed size, started the same way beside each server (after it is up,
#: before the Producer) and stopped after the Consumer. ``spinN``: N Python processes spinning (the
#: kernel shares the cores among them and the servers' threads); ``jvmN``: one JVM running
#: ``benchmarks/busy/Churn.java`` with N threads allocating and hashing 80 ms of every 100 ms, its
#: collector threads included (a build or JVM test suite beside the broker).
BUSY_HELP = "comma-separated busy cells beside the quiet ones: spinN (N spinning processes), jvmN (a JVM, N threads)"


def busy_cmds(kind: str) -> list[list[str]]:
    """The commands of one background, from its ``--busy`` name."""
    match = re.fullmatch(r"(spin|jvm)(\d+)", kind)
    if not match or int(match.group(2)) < 1:
        raise ValueError(f"unknown busy cell {kind!r}: spinN or jvmN, N >= 1")
    count = int(match.group(2))
    if match.group(1) == "spin":
        return [[sys.executable, "-c", SPIN] for _ in range(count)]
    return [[java_bin(), "-Xms256m", "-Xmx256m", "-XX:+UseParallelGC", str(CHURN), str(count), "80", "20"]]


def start_busy(kind: str, tmp: Path) -> list[subprocess.Popen]:
    if kind == "quiet":
        return []
    return [spawn(in_group("background", cmd), tmp / f"busy-{i}.out") for i, cmd in enumerate(busy_cmds(kind))]


def run_cell(impl: str, cps: dict[str, str], flush: str, threads: int, send_s: float, consume_s: float,
             busy: str = "quiet") -> dict:
    """One fresh server: start, produce for ``send_s``, drain with the Consumer, stop. Returns the figures."""
    tmp = Path(tempfile.mkdtemp(prefix=f"vsjava-{impl}-"))
    server = None
    producer = consumer = None
    sampler = None
    background: list[subprocess.Popen] = []
    try:
        for attempt in (1, 2):  # a port another job took between our check and the bind: once more, new ports
            try:
                server = START[impl](cps, flush, tmp / "s")
                break
            except RuntimeError as exc:
                log(f"  {impl} did not start (attempt {attempt}): {exc}")
                for proc in owned():
                    stop(proc)
                subprocess.run(["rm", "-rf", str(tmp / "s")], check=False)
                if attempt == 2:
                    raise
        sampler = RssPeak(server.pids())
        sampler.start()
        create_topic(server)
        conns = [Conn(addr) for addr in server.groups or [server.broker]]
        background = start_busy(busy, tmp)
        if background:
            time.sleep(2.0)  # the background at its steady level before the clock starts
        cpu0, wait0 = cpu_seconds(server.pids()), wait_seconds(server.pids())
        busy0 = machine_busy()
        out = tmp / "producer.out"
        producer_t0 = time.monotonic()
        producer = spawn(in_group("clients", client_cmd(
            cps, tmp, "Producer", ["-Dorg.apache.rocketmq.client.sendSmartMsg=true"],
            ["-n", server.namesrv, "-t", TOPIC, "-w", str(threads), "-s", str(MSG_SIZE)])), out)
        # it prints every 10 s of its own run: stop after the send_s/10-th line, however slowly its JVM
        # started on a busy machine (a wall-clock cut would leave a slow start fewer windows)
        wanted, deadline = max(2, int(send_s // 10)), time.monotonic() + send_s + 120
        while (time.monotonic() < deadline and producer.poll() is None and all(p.poll() is None for p in server.procs)
               and len(SEND_RE.findall(out.read_text(errors="replace"))) < wanted):
            time.sleep(0.2)
        if producer.poll() is not None:
            raise RuntimeError(f"Producer exited with {producer.returncode}: {out.read_text()[-2000:]}")
        client_cpu = cpu_seconds([producer.pid])
        send_wall = time.monotonic() - producer_t0
        client_pct = 100.0 * client_cpu / max(time.monotonic() - producer_t0, 1e-3)
        busy1 = machine_busy()
        stop(producer)
        time.sleep(0.5)  # the last answers reach the store
        cpu1, wait1 = cpu_seconds(server.pids()), wait_seconds(server.pids())
        send_wall += 0.5
        backlog = sum(max_offsets(c) for c in conns)
        sends = [tuple(map(float, m.groups())) for m in SEND_RE.finditer(out.read_text(errors="replace"))]
        if len(sends) < wanted:
            raise RuntimeError(f"Producer printed {len(sends)} of {wanted} stats lines:\n{out.read_text()[-2000:]}")
        kept = sends[1:]  # the first window holds JVM start, route lookup and connection warm-up
        figures = {
            "impl": impl, "flush": flush, "threads": threads, "busy": busy, "start_s": server.start_seconds,
            "send_tps": statistics.mean(s[0] for s in kept), "avg_rt_ms": statistics.mean(s[2] for s in kept),
            "best_send_tps": max(s[0] for s in kept),
            "client_cpu_us_per_msg": client_cpu / max(backlog, 1) * 1e6, "client_cpu_pct": client_pct,
            "machine_busy_pct": 100.0 * (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1),
            "max_rt_ms": sends[-1][1], "send_failed": sends[-1][3] + sends[-1][4], "backlog": backlog,
            "rss_mb": sampler.peak_kb / 1024, "cpu_us_per_msg": (cpu1 - cpu0) / max(backlog, 1) * 1e6,
            "server_core_pct": 100.0 * (cpu1 - cpu0) / max(send_wall, 1e-3),
            "msgs_per_core_s": backlog / max(cpu1 - cpu0, 1e-6),
            "server_wait_pct": 100.0 * (wait1 - wait0) / max(send_wall, 1e-3),
        }
        if impl == "answer":  # nothing stored, nothing to consume: the send figures only
            nan = float("nan")
            for c in conns:
                c.close()
            return {**figures, "consumed": 0, "samples": [], "apache_consume_tps": nan, "apache_lower_bound": False,
                    "consume_cpu_us_per_msg": nan, "consume_s": nan, "consumer_cpu_us_per_msg": nan,
                    "drain_busy_pct": nan}

        out = tmp / "consumer.out"
        began = time.monotonic()
        busy2 = machine_busy()
        consumer = spawn(in_group("clients", client_cmd(
            cps, tmp, "Consumer", [], ["-n", server.namesrv, "-t", TOPIC, "-w", str(threads), "-g", GROUP])), out)
        samples: list[tuple[float, int]] = []  # (time, committed offsets summed over the queues)
        deadline = began + consume_s
        while time.monotonic() < deadline and consumer.poll() is None:
            samples.append((time.monotonic(), sum(consumer_offsets(c) for c in conns)))
            if samples[-1][1] >= DRAIN_HI * backlog and samples[-1][0] - began > 11:
                break  # drained, and Apache's Consumer has printed one line
            time.sleep(0.05)
        drained = sum(consumer_offsets(c) for c in conns)
        consumer_cpu, busy3 = cpu_seconds([consumer.pid]), machine_busy()
        stop(consumer)
        cpu2 = cpu_seconds(server.pids())
        windows = [int(m.group(1)) for m in CONSUME_RE.finditer(out.read_text())]
        for c in conns:
            c.close()
        sampler.done.set()
        return {
            **figures, "consumed": drained, "samples": samples,
            "apache_consume_tps": max(windows) if windows else float("nan"),
            "apache_lower_bound": bool(windows) and max(windows) * 9 >= 0.9 * backlog,
            "consume_cpu_us_per_msg": (cpu2 - cpu1) / max(drained, 1) * 1e6,
            "consume_s": time.monotonic() - began,
            "consumer_cpu_us_per_msg": consumer_cpu / max(drained, 1) * 1e6,
            "drain_busy_pct": 100.0 * (busy3[0] - busy2[0]) / max(busy3[1] - busy2[1], 1),
        }
    finally:
        if sampler is not None:
            sampler.done.set()
        stop(producer)
        stop(consumer)
        for proc in background:
            stop(proc, grace=2.0)
        if server is not None:
            server.close()
        if KEEP:
            log(f"  kept {tmp}")
        else:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)


# ---------------------------------------------------------------- report

METRICS = [  # key, label, format
    ("send_tps", "send TPS (Apache Producer, mean of 9-s windows after the first)", "{:,.0f}"),
    ("best_send_tps", "send TPS, best 9-s window after the first", "{:,.0f}"),
    ("avg_rt_ms", "send average RT, ms", "{:.2f}"),
    ("send_failed", "send failures (Apache Producer's count)", "{:.0f}"),
    ("max_rt_ms", "send max RT since start, ms", "{:.0f}"),
    ("drain_tps", "consume TPS (drain of the same messages, broker offsets)", "{:,.0f}"),
    ("drain_over", "… measured over the first N messages of the backlog, N =", "{:,.0f}"),
    ("apache_consume_tps", "consume TPS (Apache Consumer printout, best 9-s window: bounded by the backlog)", "{:,.0f}"),
    ("rss_mb", "server peak RssAnon, MB (Java: broker+namesrv)", "{:,.0f}"),
    ("start_s", "start to listening + route served, s", "{:.2f}"),
    ("cpu_us_per_msg", "server CPU per sent message, µs", "{:.0f}"),
    ("server_core_pct", "server CPU during the sends, % of one core (all its processes and threads)", "{:.0f}"),
    ("server_wait_pct", "server threads runnable but waiting for a core during the sends, % of the wall time (summed over threads)",
     "{:.0f}"),
    ("msgs_per_core_s", "sends per second of server CPU: TPS one core would carry, projecting N cores", "{:,.0f}"),
    ("consume_cpu_us_per_msg", "server CPU per consumed message, µs", "{:.1f}"),
    ("client_cpu_us_per_msg", "Apache Producer's own CPU per sent message (same JVM both sides), µs", "{:.0f}"),
    ("client_cpu_pct", "Apache Producer's own CPU over its run (JVM start included), % of one core", "{:.0f}"),
    ("machine_busy_pct", "machine CPU busy during the sends (all processes, both cores), %", "{:.0f}"),
    ("consumer_cpu_us_per_msg", "Apache Consumer's own CPU per consumed message, its JVM start included, µs", "{:.1f}"),
    ("drain_busy_pct", "machine CPU busy during the drain (all processes, both cores), %", "{:.0f}"),
]


def median(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def ratio(ours: float, java: float) -> str:
    return f"{ours / java:.2f}" if java and java == java and ours == ours else "–"


def table(results: list[dict], plan: list[tuple[str, str, int]]) -> str:
    """rmqtx against Java per cell and metric; with --ceiling, the answer-only listener's columns too."""
    common_drain(results)
    ceiling = any(r["impl"] == "answer" for r in results)
    extra = " answer-only | answer-only/Java |" if ceiling else ""
    lines = ["| beside | flush | threads | metric | Java 4.9.8 | rmqtx | rmqtx/Java |" + extra,
             "|---|---|---|---|---|---|---|" + ("---|---|" if ceiling else "")]
    for busy, flush, threads in plan:
        cell = [r for r in results if r["busy"] == busy and r["flush"] == flush and r["threads"] == threads]
        for key, label, fmt in METRICS:
            java, ours, answer = (median([r[key] for r in cell if r["impl"] == impl]) for impl in ("java", "rmqtx", "answer"))
            marks = {impl: "≥" if key == "apache_consume_tps" and any(
                r["apache_lower_bound"] for r in cell if r["impl"] == impl) else "" for impl in ("java", "rmqtx")}
            same = key != "drain_over"
            line = (f"| {busy} | {flush} | {threads} | {label} | {marks['java']}{fmt.format(java)} | "
                    f"{marks['rmqtx']}{fmt.format(ours)} | {ratio(ours, java) if same else '–'} |")
            if ceiling:
                line += f" {fmt.format(answer) if answer == answer else '–'} | {ratio(answer, java) if same else '–'} |"
            lines.append(line)
    return "\n".join(lines)


def main() -> None:
    global KEEP, BROKER_HEAP, RMQTX_BROKERS, CPU_GROUPS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="ASYNC_FLUSH, 64 threads, 20 s sends: ~2 min")
    parser.add_argument("--threads", help="producer (and consumer) thread counts, default 8,64")
    parser.add_argument("--flush", help="flush modes, default ASYNC_FLUSH,SYNC_FLUSH")
    parser.add_argument("--seconds", type=float,
                        help="producer run per cell, in Apache's 10-s report periods: default 40 (20 with --quick)")
    parser.add_argument("--consume-seconds", type=float, default=60, help="cap of the consumer run per cell")
    parser.add_argument("--repeat", type=int, default=1, help="repeat every cell, alternating who goes first")
    parser.add_argument("--broker-heap", default=BROKER_HEAP, help="Java broker -Xms/-Xmx, default 2g")
    parser.add_argument("--keep", action="store_true", help="keep each run's temp dir (server logs, store)")
    parser.add_argument("--only", choices=["java", "rmqtx", "answer"], help="run one side only (no ratios)")
    parser.add_argument("--ceiling", action="store_true",
                        help="also run each cell against a listener that answers every send at once and stores "
                             "nothing (benchmarks/answer_only.py): the most a broker on Python and Twisted gets here")
    parser.add_argument("--rmqtx-brokers", type=int, default=1,
                        help="rmqtx as rmqstandalone --brokers N (the topic gets its queues on each group)")
    parser.add_argument("--busy", default="", help=BUSY_HELP + "; e.g. spin8,jvm8")
    parser.add_argument("--no-quiet", action="store_true", help="only the --busy cells")
    parser.add_argument("--cgroups", action="store_true",
                        help="servers, background and clients each in a CPU control group of equal weight (root)")
    args = parser.parse_args()
    threads = [int(t) for t in (args.threads or ("64" if args.quick else "8,64")).split(",")]
    flushes = (args.flush or ("ASYNC_FLUSH" if args.quick else "ASYNC_FLUSH,SYNC_FLUSH")).split(",")
    send_s = args.seconds or (20.0 if args.quick else 40.0)
    if send_s < 20:
        parser.error("--seconds must be at least 20: Apache's Producer prints every 10 s and the first is dropped")
    for flush in flushes:
        if flush not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            parser.error(f"unknown flush mode {flush}")
    KEEP, BROKER_HEAP = args.keep, args.broker_heap
    if args.rmqtx_brokers < 1:
        parser.error("--rmqtx-brokers must be 1 or more")
    RMQTX_BROKERS = args.rmqtx_brokers
    busy_cells = [b for b in args.busy.split(",") if b]
    for busy in busy_cells:
        try:
            busy_cmds(busy)
        except ValueError as exc:
            parser.error(str(exc))
    backgrounds = ([] if args.no_quiet else ["quiet"]) + busy_cells
    if not backgrounds:
        parser.error("--no-quiet needs --busy")
    if args.cgroups:
        try:
            CPU_GROUPS = CpuGroups.find()
        except RuntimeError as exc:
            parser.error(str(exc))
    signal.signal(signal.SIGTERM, _on_sigterm)
    if args.only != "java":
        compile_rmqtx()
    load = os.getloadavg()
    began = time.time()
    cmdline = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]])
    results: list[dict] = []
    failures: list[str] = []
    plan = [(b, f, t) for b in backgrounds for f in flushes for t in threads]
    try:
        if CPU_GROUPS is not None:
            CPU_GROUPS.create()  # inside the try: the finally below removes them whatever fails
        cps = java_classpaths()
        java_version = subprocess.run([java_bin(), "-version"], capture_output=True, text=True).stderr.splitlines()[0]
        for rep in range(args.repeat):
            for i, (busy, flush, nthreads) in enumerate(plan):
                # who goes first flips from cell to cell and from repeat to repeat (ABBA), so drift hits both
                order = ["java", "rmqtx"] if (i + rep) % 2 == 0 else ["rmqtx", "java"]
                if args.ceiling or args.only == "answer":
                    order.insert(1, "answer")  # between the two, so that drift hits it as it hits them
                for impl in order:
                    if args.only and impl != args.only:
                        continue
                    what = f"{impl} {flush} -w {nthreads} beside {busy}"
                    log(f"{what} (repeat {rep + 1}/{args.repeat}), load {os.getloadavg()[0]:.2f}")
                    try:
                        res = run_cell(impl, cps, flush, nthreads, send_s, args.consume_seconds, busy)
                    except Exception as exc:  # one failed run (a start timeout on a busy machine) loses that run only
                        log(f"  {what} failed: {exc}")
                        failures.append(f"{what} (repeat {rep + 1}): {str(exc).splitlines()[0]}")
                        continue
                    res["rep"] = rep
                    res["own_drain_tps"] = drain_rate(res["samples"], res["backlog"])
                    results.append(res)
                    log("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                         for k, v in res.items() if k != "samples"))
    finally:
        stop_all()
        if CPU_GROUPS is not None:
            CPU_GROUPS.remove()
    end_load = os.getloadavg()
    print(f"Command: `{cmdline}`  ")
    print(f"Machine: {os.cpu_count()} CPUs ({platform.machine()}), "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; load average at start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, at end {end_load[0]:.2f} {end_load[1]:.2f} {end_load[2]:.2f}; "
          f"{java_version}; Python {platform.python_version()}; {len(results)} runs in {(time.time() - began) / 60:.1f} min, "
          f"{send_s:.0f} s of sends each, 1 KB messages, {QUEUES} queues{f' on each of rmqtx broker groups: {RMQTX_BROKERS}' if RMQTX_BROKERS > 1 else ''}; "
          f"Java broker heap {BROKER_HEAP}"
          f"{'; servers, background and clients each in a CPU cgroup of equal weight' if CPU_GROUPS else ''}.  ")
    print("Medians over repeats; ≥: Apache's Consumer drained the whole backlog inside one 9-s window.\n")
    print(table(results, plan))
    for failure in failures:
        print(f"\nFAILED: {failure}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
