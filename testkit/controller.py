"""Controller mode on loopback: ``twistd rmqcontroller`` nodes, and Apache 5.4.0's NameServer and brokers
(``BrokerStartup``, from the jars testkit/apache5/pom.xml resolves) pointed at them.

Every process is a real one on free ports, with its files in one temp dir; ``close()`` ends them all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from rmqtx.common.fastjson import dumps, loads
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit import apache5
from testkit.ha import Proc, wait_until
from testkit.ports import free_port, port_free
from testkit.standalone import call

CLUSTER = "DefaultCluster"
BROKER_NAME = "broker-a"
#: Each Apache broker JVM: small heaps, the serial collector (two cores, shared).
BROKER_JVM = ["-Xms128m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:MaxDirectMemorySize=256m", "-XX:-OmitStackTraceInFastThrow"]


def controller_port() -> int:
    """A port whose next one is free too: pysyncobj listens on peer port + 1 (controllerRaftPortOffset)."""
    for _ in range(50):
        port = free_port()
        if port_free(port + 1, "127.0.0.1"):
            return port
    raise RuntimeError("no free loopback port pair for a controller")


class RmqtxController(Proc):
    """One ``twistd rmqcontroller`` node; its store (pysyncobj's journal and dump) survives restarts."""

    def __init__(self, root: Path, node: str, peers: str, group: str = "rmqtx-controllers", **conf: object) -> None:
        super().__init__(root, f"controller-{node}")
        self.node = node
        self.conf_path = root / f"controller-{node}.conf"
        values = {"controllerDLegerGroup": group, "controllerDLegerPeers": peers, "controllerDLegerSelfId": node,
                  "controllerStorePath": root / f"controller-{node}-store", "scanNotActiveBrokerInterval": 1000,
                  "scanInactiveMasterInterval": 1000, **conf}
        self.conf_path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def start(self) -> "RmqtxController":
        self.spawn(["rmqcontroller", "-c", str(self.conf_path)])
        return self


class Controllers:
    """``count`` rmqtx controller nodes forming one Raft group."""

    def __init__(self, root: Path, count: int = 3, **conf: object) -> None:
        self.addrs = {f"n{i}": f"127.0.0.1:{controller_port()}" for i in range(count)}
        peers = ";".join(f"{n}-{a}" for n, a in self.addrs.items())
        self.nodes = {n: RmqtxController(root, n, peers, **conf) for n in self.addrs}

    @property
    def addr_list(self) -> str:
        return ";".join(self.addrs.values())

    def start(self, timeout: float = 30.0) -> "Controllers":
        for node in self.nodes.values():
            node.start()
        self.wait_leader(timeout)
        return self

    def metadata(self, addr: str) -> dict[str, str]:
        resp = call(addr, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), 2)
        return dict(resp.ext_fields or {}) if resp.code == ResponseCode.SUCCESS else {}

    def leader(self) -> str | None:
        """The broker-facing address of the node that says it leads, if any does."""
        for node, addr in self.addrs.items():
            if not self.nodes[node].alive():
                continue
            try:
                if self.metadata(addr).get("isLeader") == "true":
                    return addr
            except OSError:
                continue
        return None

    def wait_leader(self, timeout: float = 30.0) -> str:
        def check() -> str | None:
            for node in self.nodes.values():
                if node.proc is not None and node.proc.poll() is not None and node.proc.returncode not in (0, -9, -15):
                    raise AssertionError(f"{node.name} exited:\n{node.log()}")
            return self.leader()
        return str(wait_until(check, timeout, "a controller leader", step=0.2))

    def request(self, code: int, fields: dict | None = None, body: bytes = b"", addr: str | None = None) -> RemotingCommand:
        return call(addr or self.wait_leader(), RemotingCommand.request(code, fields, body), 5)

    def replica_info(self, name: str = BROKER_NAME) -> tuple[dict[str, str], dict]:
        resp = self.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": name})
        if resp.code != ResponseCode.SUCCESS:
            return {}, {}
        return dict(resp.ext_fields or {}), loads(resp.body) if resp.body else {}

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()


class ApacheJvm:
    """One Apache 5.4.0 JVM (NameServer or broker), its home and logs under ``home``."""

    def __init__(self, home: Path, main: str, args: list[str], jvm_opts: list[str]) -> None:
        self.home, self.main, self.args, self.jvm_opts = home, main, args, jvm_opts
        self.proc: subprocess.Popen | None = None

    def start(self) -> "ApacheJvm":
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = ["java", *self.jvm_opts, f"-Duser.home={self.home}", f"-Drocketmq.home.dir={self.home}", "-cp",
               apache5.classpath(), self.main, *self.args]
        with open(self.home / "console.out", "ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=self.home, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, "ROCKETMQ_HOME": str(self.home)},
                                         preexec_fn=apache5._die_with_parent)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        parts = []
        for path in [self.home / "console.out", *sorted((self.home / "logs").rglob("*.log"))]:
            if path.name in ("console.out", "broker.log", "broker_default.log", "namesrv.log", "store.log"):
                try:
                    parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-2500:]}")
                except OSError:
                    pass
        return "\n".join(parts)[-8000:]


class ApacheBroker(ApacheJvm):
    def __init__(self, root: Path, index: int, namesrv: str, controllers: str, **conf: object) -> None:
        self.name = f"broker{index}"
        self.port = apache5.broker_port()
        self.addr = f"127.0.0.1:{self.port}"
        home = root / self.name
        store = home / "store"
        values = {
            "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerIP1": "127.0.0.1", "listenPort": self.port,
            "haListenPort": self.port + 1, "namesrvAddr": namesrv, "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog", "mappedFileSizeCommitLog": 16 * 1024 * 1024,
            "flushDiskType": "ASYNC_FLUSH", "enableControllerMode": "true", "controllerAddr": controllers,
            "fetchControllerAddrByDnsLookup": "false", "allAckInSyncStateSet": "true",
            "autoCreateTopicEnable": "true", "syncBrokerMetadataPeriod": 2000, "checkSyncStateSetPeriod": 2000,
            "syncControllerMetadataPeriod": 2000, **conf,
        }
        home.mkdir(parents=True, exist_ok=True)
        (home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        super().__init__(home, "org.apache.rocketmq.broker.BrokerStartup", ["-c", str(home / "broker.conf")], BROKER_JVM)


class ControllerModeGroup:
    """rmqtx controllers + Apache 5.4.0's NameServer + ``brokers`` Apache brokers of one broker set."""

    def __init__(self, controllers: int = 3, brokers: int = 3, controller_conf: dict | None = None,
                 broker_conf: dict | None = None) -> None:
        self.tmp = tempfile.mkdtemp(prefix="rmqtx-ctl-")
        self.root = Path(self.tmp)
        self.controllers = Controllers(self.root, controllers, **(controller_conf or {}))
        self.namesrv_port = free_port()
        self.namesrv = f"127.0.0.1:{self.namesrv_port}"
        (self.root / "namesrv.properties").write_text(f"listenPort={self.namesrv_port}\nbindAddress=127.0.0.1\n")
        self.namesrv_jvm = ApacheJvm(self.root / "namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup",
                                     ["-c", str(self.root / "namesrv.properties")], BROKER_JVM)
        self.brokers = [ApacheBroker(self.root, i, self.namesrv, self.controllers.addr_list, **(broker_conf or {}))
                        for i in range(brokers)]

    def start(self, timeout: float = 180.0) -> "ControllerModeGroup":
        apache5.classpath()  # resolved once, outside the timeouts
        try:
            self.controllers.start()
            self.namesrv_jvm.start()
            wait_until(lambda: self._ok(self.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO), 60, "Apache's NameServer", step=0.25)
            for broker in self.brokers:
                broker.start()
            deadline = time.monotonic() + timeout
            for broker in self.brokers:
                wait_until(lambda b=broker: self._check_alive(b) and self._ok(b.addr, RequestCode.GET_BROKER_RUNTIME_INFO),
                           max(deadline - time.monotonic(), 1), f"Apache {broker.name}", step=0.5)
            self.wait_master(max(deadline - time.monotonic(), 1))
        except BaseException:
            self.close()
            raise
        return self

    def _check_alive(self, jvm: ApacheJvm) -> bool:
        if not jvm.alive():
            raise AssertionError(f"{jvm.home.name} exited:\n{jvm.log()}")
        return True

    @staticmethod
    def _ok(addr: str, code: int) -> bool:
        try:
            return call(addr, RemotingCommand.request(code), 2).code == ResponseCode.SUCCESS
        except OSError:
            return False

    def master(self) -> tuple[int, str, int] | None:
        """(brokerId, address, masterEpoch) as the controller leader has it."""
        try:
            head, _ = self.controllers.replica_info()
        except (OSError, AssertionError):
            return None
        if head.get("masterBrokerId") and head.get("masterAddress"):
            return int(head["masterBrokerId"]), head["masterAddress"], int(head.get("masterEpoch") or 0)
        return None

    def wait_master(self, timeout: float, other_than: str | None = None) -> tuple[int, str, int]:
        def check() -> tuple[int, str, int] | None:
            m = self.master()
            return m if m is not None and m[1] != other_than else None
        return wait_until(check, timeout, "a master elected by the controller", step=0.2)  # type: ignore[return-value]

    def sync_state_set(self) -> list[int]:
        _, body = self.controllers.replica_info()
        return sorted(int(x) for x in (body or {}).get("syncStateSet") or [])

    def broker_at(self, addr: str) -> ApacheBroker:
        return next(b for b in self.brokers if b.addr == addr)

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """UPDATE_AND_CREATE_TOPIC on every broker (a slave keeps it for when it becomes master)."""
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        for broker in self.brokers:
            if broker.alive():
                resp = call(broker.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10)
                if resp.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"create topic {topic} on {broker.name}: {resp.code} {resp.remark}")

    def sync_state_data(self) -> dict:
        resp = self.controllers.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, dumps([BROKER_NAME]))
        return loads(resp.body) if resp.body else {}

    def close(self) -> None:
        for broker in self.brokers:
            broker.stop()
        self.namesrv_jvm.stop()
        self.controllers.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
