"""Apache RocketMQ 5.4.0's NameServer and gRPC Proxy in Local mode (the broker inside the proxy's JVM), on
free loopback ports with everything in a temp dir: the reference rmqtx's gRPC endpoint is measured against.

The jars come from Maven Central only, through ``testkit/apache5/pom.xml``; the resolved classpath is
cached under ``$XDG_CACHE_HOME/rmqtx-apache5/`` (or ``~/.cache/rmqtx-apache5/``) and used only while every
jar in it still exists.

``python -m testkit.apache5`` starts the pair for a benchmark, prints the proxy's gRPC address and the
JVMs' pids as one JSON line, and runs until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testkit.ports import free_port
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.buildlock import one_build_at_a_time
from testkit.standalone import call

POM = Path(__file__).resolve().parent / "apache5" / "pom.xml"
VERSION = "5.4.0"
#: A small heap and the serial collector: the machine has two cores shared with other work.
JVM_OPTS = ["-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:MaxDirectMemorySize=512m", "-XX:-OmitStackTraceInFastThrow"]
CLUSTER = "DefaultCluster"
BROKER_NAME = "broker-a"
#: The RocketMQ logs worth showing when a JVM fails (not the once-a-second watermark and stats logs).
LOGS = {"namesrv.log", "proxy.log", "broker.log", "broker_default.log", "store.log"}


class PortTaken(RuntimeError):
    """A JVM exited because a port it binds on every interface was taken after we picked it."""


class ApacheUnavailable(RuntimeError):
    """No java or no mvn on PATH, or Maven could not resolve the jars."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rmqtx-apache5"


@one_build_at_a_time
def classpath() -> str:
    """The pom's classpath; resolved again whenever the pom changed or a cached jar is gone (a stamp alone
    would not notice a cleaned ~/.m2)."""
    if shutil.which("java") is None:
        raise ApacheUnavailable("no java on PATH")
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    cached = cache_dir() / f"classpath-{digest}.txt"
    if cached.exists():
        text = cached.read_text().strip()
        jars = [j for j in text.split(os.pathsep) if j]
        if jars and all(os.path.isfile(j) for j in jars):
            return text
    if shutil.which("mvn") is None:
        raise ApacheUnavailable(f"no mvn on PATH to resolve {POM}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    out = cached.with_suffix(f".{os.getpid()}.tmp")
    proc = subprocess.run(["mvn", "-q", "-B", "-f", str(POM), "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not out.exists():
        raise ApacheUnavailable(f"mvn could not resolve {POM}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    os.replace(out, cached)
    return cached.read_text().strip()


def _bindable(port: int) -> bool:
    """Free on every interface (Apache's broker binds its HA port on 0.0.0.0 whatever bindAddress says)."""
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def broker_port() -> int:
    """A listenPort whose neighbours are free too: Apache's broker also binds listenPort - 2 (its fast port)
    and listenPort + 1 (its HA port, named in broker.conf as well)."""
    for _ in range(50):
        port = free_port()
        if all(_bindable(p) for p in (port - 2, port - 1, port + 1)):
            return port
    raise RuntimeError("no free loopback port with free neighbours")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies, so a killed test run leaves
    no JVM behind holding half a gigabyte (Linux only; elsewhere a no-op)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _properties(path: Path, values: dict[str, object]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))


class ApacheProxy:
    """``NamesrvStartup`` and ``ProxyStartup -pm local`` as two JVMs; ``grpc`` is the proxy's gRPC address,
    ``broker`` the in-process broker's remoting address (topics are created there), ``namesrv`` the NameServer's."""

    def __init__(self, broker_conf: dict[str, object] | None = None, proxy_conf: dict[str, object] | None = None,
                 jvm_opts: list[str] | None = None) -> None:
        self.jvm_opts = list(JVM_OPTS if jvm_opts is None else jvm_opts)
        self.broker_conf, self.proxy_conf = dict(broker_conf or {}), dict(proxy_conf or {})
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-apache5-")
        self.root = Path(self.tmp.name)
        self.procs: dict[str, subprocess.Popen] = {}
        self.started_in: float | None = None
        self._configure()

    def _configure(self) -> None:
        """Pick the ports and write the three config files, over whatever an earlier attempt left."""
        for leftover in ("store", "namesrv", "proxy"):
            shutil.rmtree(self.root / leftover, ignore_errors=True)
        self.namesrv_port, self.grpc_port, self.remoting_port = (free_port() for _ in range(3))
        self.broker_port = broker_port()
        self.namesrv = f"127.0.0.1:{self.namesrv_port}"
        self.broker = f"127.0.0.1:{self.broker_port}"
        self.grpc = f"127.0.0.1:{self.grpc_port}"
        self.remoting = f"127.0.0.1:{self.remoting_port}"  # the proxy's own remoting endpoint
        _properties(self.root / "namesrv.properties", {"listenPort": self.namesrv_port, "bindAddress": "127.0.0.1"})
        store = self.root / "store"
        _properties(self.root / "broker.conf", {
            "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerId": 0, "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1", "listenPort": self.broker_port, "haListenPort": self.broker_port + 1, "namesrvAddr": self.namesrv,
            "storePathRootDir": store, "storePathCommitLog": store / "commitlog",
            "mappedFileSizeCommitLog": 64 * 1024 * 1024, "flushDiskType": "ASYNC_FLUSH", "brokerRole": "ASYNC_MASTER",
            **self.broker_conf,
        })
        (self.root / "rmq-proxy.json").write_text(json.dumps({
            "rocketMQClusterName": CLUSTER, "namesrvAddr": self.namesrv, "grpcServerPort": self.grpc_port,
            "remotingListenPort": self.remoting_port, "proxyMode": "local", "localServeAddr": "127.0.0.1",
            "grpcShutdownTimeSeconds": 3,  # not the 30 s grace a production proxy gives its streams
            **self.proxy_conf,
        }, indent=2))

    def _java(self, name: str, main: str, *args: str) -> subprocess.Popen:
        home = self.root / name
        home.mkdir(exist_ok=True)
        env = {**os.environ, "ROCKETMQ_HOME": str(home), "RMQ_PROXY_HOME": str(home)}
        cmd = ["java", *self.jvm_opts, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}", "-cp", classpath(), main, *args]
        log = open(self.root / f"{name}.out", "wb")
        try:
            return subprocess.Popen(cmd, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    preexec_fn=_die_with_parent)
        finally:
            log.close()

    def start(self, timeout: float = 180.0, attempts: int = 3) -> "ApacheProxy":
        """Both JVMs, then wait until the broker answers over remoting and the proxy over gRPC; again on
        other ports when one of the ports bound on every interface was taken meanwhile (a shared machine)."""
        classpath()  # resolved once, outside the JVMs' timeout
        began = time.monotonic()
        for attempt in range(attempts):
            try:
                self._start(began + timeout)
            except PortTaken:
                if attempt == attempts - 1:
                    raise
                self.procs.clear()
                self._configure()
            else:
                self.started_in = time.monotonic() - began
                return self
        raise AssertionError("unreachable")

    def _start(self, deadline: float) -> None:
        try:
            self.procs["namesrv"] = self._java("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup",
                                               "-c", str(self.root / "namesrv.properties"))
            self._wait(deadline, "the NameServer", lambda: self._remoting_ok(self.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO))
            self.procs["proxy"] = self._java("proxy", "org.apache.rocketmq.proxy.ProxyStartup", "-pm", "local",
                                             "-pc", str(self.root / "rmq-proxy.json"), "-bc", str(self.root / "broker.conf"))
            self._wait(deadline, "the broker inside the proxy", lambda: self._remoting_ok(self.broker, RequestCode.GET_BROKER_RUNTIME_INFO))
            self._wait(deadline, "the proxy's gRPC endpoint", self._grpc_answers)
        except BaseException:
            self.stop()
            raise

    def _wait(self, deadline: float, what: str, ready) -> None:
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    kind = PortTaken if self._mentions(name, "Address already in use") else RuntimeError
                    raise kind(f"Apache {name} exited with {proc.returncode}:\n{self.log(name)}")
            try:
                if ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not come up in time:\n{self.log('proxy')}")
            time.sleep(0.25)

    @staticmethod
    def _remoting_ok(addr: str, code: int) -> bool:
        return call(addr, RemotingCommand.request(code, None), 2).code == ResponseCode.SUCCESS

    def _grpc_answers(self) -> bool:
        """Any QueryRoute status (TOPIC_NOT_FOUND included) means the gRPC service is up; without grpcio or
        the SDK's generated classes, an accepted connection has to do."""
        try:
            import grpc

            from rmqtx.grpc import stubs

            d, s, service = stubs.load()
        except (ImportError, RuntimeError):  # StubsMissing is a RuntimeError
            host, port = self.grpc.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=2):
                return True
        with grpc.insecure_channel(self.grpc) as channel:
            try:
                service.MessagingServiceStub(channel).QueryRoute(
                    s.QueryRouteRequest(topic=d.Resource(name="RMQTX_READY_PROBE")),
                    metadata=(("x-mq-client-id", "rmqtx-apache-probe"),), timeout=2)
            except grpc.RpcError:
                return False
        return True

    def create_topic(self, topic: str, queues: int = 4, message_type: str = "", timeout: float = 20.0) -> None:
        """UPDATE_AND_CREATE_TOPIC on the broker (as ``mqadmin updateTopic``, with ``-a +message.type=X`` when a
        message type is named), then wait until the NameServer routes it (the proxy reads routes from there)."""
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        if message_type:
            fields["attributes"] = f"+message.type={message_type}"
        resp = call(self.broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"create topic {topic} on Apache: {resp.code} {resp.remark}")
        deadline = time.monotonic() + timeout
        while True:
            route = call(self.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
            if route.code == ResponseCode.SUCCESS:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} never reached Apache's NameServer")
            time.sleep(0.1)

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.procs.items()}

    def _log_files(self, name: str) -> list[Path]:
        return [self.root / f"{name}.out", *sorted(p for p in (self.root / name / "logs").rglob("*.log") if p.name in LOGS)]

    def _mentions(self, name: str, text: str) -> bool:
        return any(path.exists() and text in path.read_text(errors="replace") for path in self._log_files(name))

    def log(self, name: str) -> str:
        """The JVM's console and the tail of its RocketMQ log (under user.home/logs)."""
        parts = []
        for path in self._log_files(name):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            if text.strip():
                parts.append(f"--- {path.name}\n{text[-3000:]}")
        return "\n".join(parts)[-8000:]

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM the proxy, then the NameServer (their shutdown hooks flush and close); True when both
        exited by themselves in ``timeout``."""
        clean = True
        for name in ("proxy", "namesrv"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                clean = False
                proc.kill()
                proc.wait()
        return clean

    def close(self) -> None:
        self.stop()
        self.tmp.cleanup()


def _half(size: str) -> str:
    """Half a JVM size such as 512m or 2g, in megabytes."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024}
    number, unit = (size[:-1], size[-1].lower()) if size[-1].lower() in units else (size, "m")
    return f"{max(1, int(float(number) * units[unit] / 2))}m"


def main(argv: list[str] | None = None) -> int:
    """Start the pair, print where it is, and stay up until SIGINT or SIGTERM (for benchmarks/grpc_load.py)."""
    parser = argparse.ArgumentParser(prog="python -m testkit.apache5", description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", action="append", default=[], metavar="NAME[:QUEUES]",
                        help="create this topic (4 queues unless :QUEUES), repeatable")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the JVMs to come up")
    parser.add_argument("--heap", default="512m", metavar="SIZE", help="each JVM's -Xmx (default 512m; -Xms is half)")
    parser.add_argument("--broker-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker.conf setting, repeatable")
    parser.add_argument("--proxy-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="an rmq-proxy.json setting (a number when it is one), repeatable")
    parser.add_argument("--interop", action="store_true",
                        help="the interop matrix's standalone settings (testkit/matrix.py): short delay "
                             "levels, quick transaction checks, 1 s minimum invisible time")
    args = parser.parse_args(argv)
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    opts = [o for o in JVM_OPTS if not o.startswith(("-Xms", "-Xmx"))]
    broker_conf: dict[str, object] = {}
    proxy_conf: dict[str, object] = {}
    if args.interop:
        from testkit.matrix import MATRIX_CONF

        broker_conf.update((k, v) for k, v in MATRIX_CONF.items() if k != "minInvisibleTimeMillsForRecv")
        proxy_conf["minInvisibleTimeMillsForRecv"] = int(MATRIX_CONF["minInvisibleTimeMillsForRecv"])
    for setting in args.broker_conf:
        key, _, value = setting.partition("=")
        broker_conf[key] = value
    for setting in args.proxy_conf:
        key, _, value = setting.partition("=")
        proxy_conf[key] = int(value) if value.lstrip("-").isdigit() else value
    pair = ApacheProxy(jvm_opts=[f"-Xmx{args.heap}", f"-Xms{_half(args.heap)}", *opts], broker_conf=broker_conf,
                       proxy_conf=proxy_conf)
    try:
        pair.start(args.timeout)
        for spec in args.topic:
            name, _, queues = spec.partition(":")
            pair.create_topic(name, int(queues or 4))
        print(json.dumps({"grpc": pair.grpc, "namesrv": pair.namesrv, "broker": pair.broker, "proxy_remoting": pair.remoting,
                          "pids": pair.pids(), "started_in_s": round(pair.started_in or 0, 1), "dir": str(pair.root),
                          "version": VERSION}), flush=True)
        while not stopping:
            for name, proc in pair.procs.items():
                if proc.poll() is not None:
                    print(f"Apache {name} exited with {proc.returncode}:\n{pair.log(name)}", file=sys.stderr)
                    return 1
            time.sleep(0.5)
        return 0
    finally:
        clean = pair.stop()
        pair.tmp.cleanup()
        print(json.dumps({"stopped": True, "clean": clean}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
