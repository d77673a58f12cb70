"""``rmqstandalone --brokers N``: broker groups 2..N as child ``twistd rmqbroker`` processes.

One reactor thread caps one process near one core; N broker groups (each its own brokerName, store and
ports, all behind this process's NameServer) let a host's cores all serve. Topics created on the cluster
spread their queues over the groups, as clients expect of a multi-broker cluster.

Group 1 is the broker inside this process, exactly as with one broker. Group k >= 2 is named
``<brokerName>-k``, keeps its store in ``<store>/broker-k``, listens on listenPort + 10*(k-1) (its fast
port and HA port follow it) and reads ``<store>/broker-k/broker.conf``: the standalone's broker.conf
with those keys changed and the console, exporter and gRPC ports left to group 1.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from twisted.application import service
from twisted.internet import defer, protocol
from twisted.internet.error import ProcessExitedAlready
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqtx.startup import StartupError, fail_after_start

log = Logger(namespace="rmqtx.groups")

#: listenPort of group k is the standalone's listenPort + PORT_STEP * (k - 1): room for its fast port
#: (listenPort - 2) and HA port (listenPort + 1).
PORT_STEP = 10
#: Keys only group 1 serves (one console, one exporter, one gRPC endpoint per host by default).
GROUP_ONE_ONLY = ("consolePort", "grpcPort", "metricsPromExporterPort")
#: Keys that name one broker's files or role: N groups cannot share them.
REFUSED = ("storePathCommitLog", "brokerConfigPath", "haMasterAddress")
#: A child restarted after it died waits this long, doubled per death in a row, up to RESTART_MAX.
RESTART_DELAY, RESTART_MAX = 5.0, 60.0
STOP_TIMEOUT = 30.0
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} ")
_CANNOT = "rmqtx: cannot start: "


def group_name(broker_name: str, k: int) -> str:
    return broker_name if k == 1 else f"{broker_name}-{k}"


def group_props(props: dict[str, str], k: int, store: str) -> dict[str, str]:
    """Group k's broker settings from group 1's (``props``, as the standalone passes them to its broker).

    Refuses, in one line, settings N groups cannot share; group 1's own ports are dropped, the rest kept.
    """
    for key in REFUSED:
        if props.get(key):
            raise StartupError(f"--brokers: broker.conf sets {key}, which names one broker's files or master; "
                               "N groups cannot share it (leave it out, or run the groups as separate rmqbroker processes)")
    if props.get("brokerRole", "ASYNC_MASTER").strip().upper() == "SLAVE":
        raise StartupError("--brokers: brokerRole=SLAVE; the groups of rmqstandalone are masters")
    out = {key: value for key, value in props.items() if key not in GROUP_ONE_ONLY}
    if out.get("metricsExporterType", "").strip().upper() == "PROM":
        del out["metricsExporterType"]  # Apache's exporter port is group 1's
    base = props.get("brokerName", "broker-a")
    out["brokerName"] = group_name(base, k)
    out["brokerId"] = "0"
    out["storePathRootDir"] = os.path.join(store, f"broker-{k}")
    port = int(props.get("listenPort", "10911"))
    out["listenPort"] = str(port + PORT_STEP * (k - 1) if port else 0)  # 0 (tests): any free port
    if props.get("haListenPort") and int(props["haListenPort"]):
        out["haListenPort"] = str(int(props["haListenPort"]) + PORT_STEP * (k - 1))
    return out


def write_conf(path: str, props: dict[str, str]) -> None:
    """Group k's broker.conf, written when the standalone is made (before the reactor runs)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("# written by rmqstandalone --brokers at each start: edit the standalone's broker.conf instead\n")
        f.writelines(f"{key}={value}\n" for key, value in props.items())


_PARENT = "RMQTX_GROUP_PARENT"


def child_main() -> None:
    """A group's process: its own session, so a terminal's Ctrl-C reaches the standalone alone (which then
    stops each group once); and on Linux a SIGTERM when the standalone dies, however it dies, so no
    group outlives it."""
    os.setsid()
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.environ.get(_PARENT) and os.getppid() != int(os.environ[_PARENT]):
        sys.exit("rmqtx: cannot start: the standalone that started this broker group has gone")
    from twisted.scripts.twistd import run

    run()


class _ChildLog(protocol.ProcessProtocol):
    """One child's output, line by line into this process's log with the group's name in front."""

    def __init__(self, group: "BrokerGroup") -> None:
        self.group = group
        self.buffers: dict[int, bytes] = {1: b"", 2: b""}

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        lines = (self.buffers.get(childFD, b"") + data).split(b"\n")
        self.buffers[childFD] = lines.pop()
        for line in lines:
            self.group.line(line.decode("utf-8", "replace").rstrip("\r"))

    def processEnded(self, reason: Failure) -> None:
        for rest in self.buffers.values():
            if rest:
                self.group.line(rest.decode("utf-8", "replace"))
        self.group.ended(getattr(reason.value, "exitCode", None), getattr(reason.value, "signal", None))


class BrokerGroup:
    """One child ``twistd -n rmqbroker``: spawn, watch for its start, stop, restart after a later death."""

    def __init__(self, owner: "BrokerGroups", name: str, conf: str, namesrv: str, reactor: Any) -> None:
        self.owner, self.name, self.conf, self.namesrv, self.reactor = owner, name, conf, namesrv, reactor
        self.transport: Any = None
        self.started = False  # its broker logged that it listens
        self.deaths = 0  # in a row, since it last started
        self.reason = ""  # its "cannot start" line
        self.ended_d: defer.Deferred[None] | None = None
        self.restart_call: Any = None

    def argv(self) -> list[str]:
        return [sys.executable, "-c", "from rmqtx.groups import child_main; child_main()", "-n", "--pidfile=",
                "--logfile=-", "rmqbroker", "-c", self.conf, "-n", self.namesrv]

    def spawn(self) -> None:
        self.restart_call = None
        self.started, self.reason = False, ""
        self.ended_d = defer.Deferred()
        argv = self.argv()
        env = {**os.environ, _PARENT: str(os.getpid())}
        self.transport = self.reactor.spawnProcess(_ChildLog(self), argv[0], argv, env=env,
                                                   childFDs={0: "w", 1: "r", 2: "r"})
        log.info("broker group {name} starting, pid {pid}", name=self.name, pid=self.transport.pid)

    def line(self, text: str) -> None:
        if text.startswith(_CANNOT):
            self.reason = text[len(_CANNOT):]
            return  # the child's log has the same line
        log.info("[{name}] {line}", name=self.name, line=_STAMP.sub("", text))
        # BrokerService.startService logs this once every part listens (rmqtx/broker/service.py)
        if not self.started and f"broker {self.name} listening on " in text:
            self.started, self.deaths = True, 0
            self.owner.group_started(self)

    def ended(self, code: int | None, sig: int | None) -> None:
        how = f"exit status {code}" if sig is None else f"signal {sig}"
        self.transport = None
        ended, self.ended_d = self.ended_d, None
        if ended is not None:
            ended.callback(None)
        if not self.owner.running:
            log.info("broker group {name} stopped ({how})", name=self.name, how=how)
            return
        if not self.owner.all_started and not self.started:
            self.owner.start_failed(self, self.reason or f"exited with {how} before it started")
            return
        self.deaths += 1
        delay = min(RESTART_MAX, RESTART_DELAY * 2 ** (self.deaths - 1))
        log.critical("broker group {name} died ({how}{why}); restarting it in {delay:.0f} s", name=self.name, how=how,
                     why=f": {self.reason}" if self.reason else "", delay=delay)
        self.restart_call = self.reactor.callLater(delay, self.spawn)

    def stop(self) -> "defer.Deferred[None]":
        """SIGTERM, wait; SIGKILL after STOP_TIMEOUT."""
        if self.restart_call is not None and self.restart_call.active():
            self.restart_call.cancel()
        self.restart_call = None
        if self.transport is None or self.ended_d is None:
            return defer.succeed(None)
        ended = self.ended_d
        try:
            self.transport.signalProcess("TERM")
        except ProcessExitedAlready:  # its end is on its way to processEnded
            return ended
        killer = self.reactor.callLater(STOP_TIMEOUT, self._kill)
        ended.addBoth(lambda result: (killer.cancel() if killer.active() else None, result)[1])
        return ended

    def _kill(self) -> None:
        if self.transport is not None:
            log.warn("broker group {name} did not stop in {t:.0f} s: killing it", name=self.name, t=STOP_TIMEOUT)
            try:
                self.transport.signalProcess("KILL")
            except ProcessExitedAlready:
                pass


class BrokerGroups(service.Service):
    """Groups 2..N as child processes, spawned once the reactor runs (the NameServer is listening by then)."""

    def __init__(self, groups: list[tuple[str, str]], namesrv: str, reactor: Any = None) -> None:
        """``groups``: (brokerName, broker.conf path) of each child."""
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.groups = [BrokerGroup(self, name, conf, namesrv, reactor) for name, conf in groups]
        self.all_started = False
        self.failed = False

    def startService(self) -> None:
        super().startService()
        self.reactor.callWhenRunning(self._spawn_all)

    def _spawn_all(self) -> None:
        if self.running:
            for group in self.groups:
                group.spawn()

    def group_started(self, group: BrokerGroup) -> None:
        if not self.all_started and all(g.started for g in self.groups):
            self.all_started = True
            log.info("broker groups started: {names}", names=", ".join(g.name for g in self.groups))

    def start_failed(self, group: BrokerGroup, reason: str) -> None:
        """A child that died before it started fails the standalone's start: one line, exit status 1."""
        if self.failed:
            return
        self.failed = True
        fail_after_start(f"broker group {group.name}: {reason}", self.reactor)

    def stopService(self) -> "defer.Deferred[None]":
        if not self.running:
            return defer.succeed(None)
        super().stopService()
        stops = [group.stop() for group in self.groups]
        return defer.gatherResults(stops, consumeErrors=True).addCallback(lambda _: None)
