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

    def request(self, code: int, fields: dict | None = None, body: bytes = b"", addr: str | None = None,
                timeout: float = 15.0) -> RemotingCommand:
        """To ``addr``, or to the leader again while the answer is CONTROLLER_NOT_LEADER (a leader can step
        down between our look-up and the request), as a broker retries against the leader it fetches anew."""
        deadline = time.monotonic() + timeout
        while True:
            resp = call(addr or self.wait_leader(), RemotingCommand.request(code, fields, body), 5)
            if addr or resp.code != ResponseCode.CONTROLLER_NOT_LEADER or time.monotonic() > deadline:
                return resp
            time.sleep(0.2)

    def replica_info(self, name: str = BROKER_NAME) -> tuple[dict[str, str], dict]:
        resp = self.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": name})
        if resp.code != ResponseCode.SUCCESS:
            return {}, {}
        return dict(resp.ext_fields or {}), loads(resp.body) if resp.body else {}

    def events(self) -> str:
        """The nodes' log lines about brokers and elections, for a failing test's message."""
        words = ("elected", "missed its heartbeats", "connection closed", "no new master", "boot success")
        return "\n".join(f"{node.name}: {line}" for node in self.nodes.values()
                         for line in node.log_path.read_text(errors="replace").splitlines()
                         if any(w in line for w in words)) if self.nodes else ""

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
        home = root / self.name
        store = home / "store"
        self.values: dict[str, object] = {
            "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerIP1": "127.0.0.1",
            "namesrvAddr": namesrv, "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog", "mappedFileSizeCommitLog": 16 * 1024 * 1024,
            "flushDiskType": "ASYNC_FLUSH", "enableControllerMode": "true", "controllerAddr": controllers,
            "fetchControllerAddrByDnsLookup": "false", "allAckInSyncStateSet": "true",
            "autoCreateTopicEnable": "true", "syncBrokerMetadataPeriod": 2000, "checkSyncStateSetPeriod": 2000,
            "syncControllerMetadataPeriod": 2000, **conf,
        }
        home.mkdir(parents=True, exist_ok=True)
        super().__init__(home, "org.apache.rocketmq.broker.BrokerStartup", ["-c", str(home / "broker.conf")], BROKER_JVM)
        self._new_ports()

    def _new_ports(self) -> None:
        self.port = apache5.broker_port()
        self.addr = f"127.0.0.1:{self.port}"
        values = {**self.values, "listenPort": self.port, "haListenPort": self.port + 1}
        (self.home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def serve(self, timeout: float = 120.0) -> "ApacheBroker":
        """Start it and wait until it answers. A port it binds (on every interface) may have been taken since
        it was picked, on a shared machine: then it starts again on new ports, its store kept."""
        return self.start().wait_serving(timeout)

    def start(self) -> "ApacheBroker":
        super().start()
        return self

    def wait_serving(self, timeout: float) -> "ApacheBroker":
        """Wait until the started broker answers; on a port taken meanwhile, start it again on new ones."""
        deadline = time.monotonic() + timeout
        for attempt in range(3):
            try:
                wait_until(lambda: self.answering(), max(deadline - time.monotonic(), 1), f"Apache {self.name}", step=0.5)
                return self
            except AssertionError:
                if self.alive() or "Address already in use" not in self.log() or attempt == 2:
                    raise
            self._new_ports()
            self.start()
        raise AssertionError("unreachable")

    def answering(self) -> bool:
        """Whether it answers GET_BROKER_RUNTIME_INFO; an AssertionError with its log if it has exited."""
        if not self.alive():
            raise AssertionError(f"Apache {self.name} exited:\n{self.log()}")
        try:
            return call(self.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 2).code == ResponseCode.SUCCESS
        except OSError:
            return False


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
        self.broker_conf = dict(broker_conf or {})
        self.brokers = [ApacheBroker(self.root, i, self.namesrv, self.controllers.addr_list, **self.broker_conf)
                        for i in range(brokers)]

    def start(self, timeout: float = 180.0) -> "ControllerModeGroup":
        apache5.classpath()  # resolved once, outside the timeouts
        try:
            self.controllers.start()
            self.namesrv_jvm.start()
            wait_until(lambda: self._ok(self.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO), 60, "Apache's NameServer", step=0.25)
            deadline = time.monotonic() + timeout
            for broker in self.brokers:
                broker.start()
            for broker in self.brokers:
                broker.wait_serving(max(deadline - time.monotonic(), 1))
            self.wait_master(max(deadline - time.monotonic(), 1))
        except BaseException:
            self.close()
            raise
        return self

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


def failover_run(group: ControllerModeGroup, topic: str, before: int = 200, after: int = 100,
                 resume_timeout: float = 60.0, client: str = "python", watch: bool = False) -> dict[str, object]:
    """SYNC sends from rmqtx's Python client (``client="python"``) or Apache's Java DefaultMQProducer
    (``client="java"``, testkit/javaproducer.py); ``kill -9`` of the master once ``before`` are acked; sends go
    on until ``after`` more are acked; then every acked message is read back from the new master at the queue
    and offset its ack named (with the Java client its msgId must match too). Returns the figures (seconds
    from the kill to the first acked send, acked, lost).

    ``watch``: a consumer pulls all along from whoever the route names master; every (queue, offset) it read
    must keep one content, also against the final read (``served_twice``, ``read_dropped``)."""
    from rmqtx.client.blocking import BlockingPullConsumer
    from rmqtx.client.config import ClientConfig
    from rmqtx.client.message import PullStatus

    config = ClientConfig(namesrv_addr=group.namesrv, poll_namesrv_interval=1.0, rpc_timeout=3.0)
    old_id, old_addr, old_epoch = group.wait_master(30)
    sender = JavaSender(group, topic) if client == "java" else PythonSender(group, topic, config)
    sender.start()
    watcher = MasterWatcher(group, topic)
    if watch:
        watcher.start()
    try:
        wait_until(lambda: sender.count() >= before, 60, f"{before} acked sends before the kill", step=0.05)
        acked_before = sender.count()
        group.broker_at(old_addr).kill9()
        killed_at = time.time()
        new_id, new_addr, new_epoch = group.wait_master(resume_timeout, other_than=old_addr)
        elected_in = time.time() - killed_at
        wait_until(lambda: sender.count() >= acked_before + after, resume_timeout,
                   f"{after} acked sends after the kill", step=0.05)
    finally:
        sender.stop()
        watcher.stop()
    acked = sender.acked()
    if not acked:
        raise AssertionError("no send was acked")
    resumed_in = min(done for began, done, _ in acked.values() if began > killed_at) - killed_at
    consumer = BlockingPullConsumer(group.namesrv, "rmqtx-failover-reader", config=config)
    consumer.start()
    found: dict[tuple[int, int], tuple[bytes, str]] = {}
    try:
        for mq in consumer.queues(topic):
            offset = 0
            while True:
                result = consumer.pull(mq, offset, 32)
                if result.status is not PullStatus.FOUND or not result.messages:
                    break
                for msg in result.messages:
                    found[(mq.queue_id, msg.queue_offset)] = (msg.body, msg.msg_id)
                offset = result.next_begin_offset
    finally:
        consumer.shutdown()
    lost = sorted(k for k in acked if k not in found)
    changed = sorted(k for k in acked if k in found and not sender.same(acked[k][2], found[k]))
    reused = sender.count() - len(acked)  # one queue offset acked for two sends: the first one is gone
    return {"client": client, "old_master": old_id, "new_master": new_id, "master_epoch": [old_epoch, new_epoch],
            "elected_s": round(elected_in, 2), "resumed_s": round(resumed_in, 2), "acked": len(acked),
            "lost": len(lost) + reused, "changed": len(changed), "failed_sends": len(sender.failures()), "read": len(found),
            "lost_keys": lost[:10], "new_master_addr": new_addr, **watcher.figures(found)}


class MasterWatcher:
    """A consumer pulling all along from whoever the NameServer's route names master (raw PULL_MESSAGE frames
    on a thread); it notes every (queue, offset) it read and whether one was ever served with two contents."""

    def __init__(self, group: ControllerModeGroup, topic: str, queues: int = 4) -> None:
        import threading

        self.group, self.topic, self.queues = group, topic, queues
        self.seen: dict[tuple[int, int], bytes] = {}
        self.twice: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        import threading

        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        from testkit.ha import pull

        nxt = [0] * self.queues
        addr, asked = None, 0.0
        while not self._stop.is_set():
            if addr is None or time.monotonic() - asked > 0.5:
                try:
                    addr, asked = self.group.namesrv_proc.broker_addrs().get(0), time.monotonic()  # type: ignore[attr-defined]
                except Exception:
                    addr = None
            if addr is None:
                time.sleep(0.1)
                continue
            got = 0
            for q in range(self.queues):
                try:
                    _, records = pull(addr, self.topic, q, nxt[q])
                except Exception:
                    addr = None
                    break
                for rec in records:
                    key = (q, rec.queue_offset)
                    if self.seen.setdefault(key, rec.body) != rec.body:
                        self.twice.append(key)
                    nxt[q] = rec.queue_offset + 1
                    got += 1
            if not got:
                time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(15)

    def figures(self, found: dict[tuple[int, int], tuple[bytes, str]]) -> dict[str, object]:
        """Against the final read: an offset read with another body, or read and then gone."""
        if self.thread is None:
            return {}
        twice = set(self.twice) | {k for k, body in self.seen.items() if k in found and found[k][0] != body}
        return {"watched": len(self.seen), "served_twice": sorted(twice)[:10],
                "read_dropped": sorted(k for k in self.seen if k not in found)[:10]}


class PythonSender:
    """SYNC sends from rmqtx's blocking Python producer on a thread (no retries: a failed send is not acked)."""

    def __init__(self, group: ControllerModeGroup, topic: str, config: object) -> None:
        import threading

        from rmqtx.client.blocking import BlockingProducer

        self.topic = topic
        self._acked: dict[tuple[int, int], tuple[float, float, bytes]] = {}
        self._failures: list[str] = []
        self._count = 0
        self._stop = threading.Event()
        self.producer = BlockingProducer(group.namesrv, "rmqtx-failover-producer", config=config, retry_times=0)
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.producer.start()
        self.thread.start()

    def _loop(self) -> None:
        from rmqtx.client.message import SendStatus

        i = 0
        while not self._stop.is_set():
            body = f"failover-{i}".encode()
            i += 1
            began = time.time()
            try:
                result = self.producer.send(self.topic, body)
            except Exception as e:  # a refused or timed out send is not acked: go on, as an application would
                self._failures.append(type(e).__name__)
                time.sleep(0.05)
                continue
            if result.send_status is not SendStatus.SEND_OK:
                self._failures.append(result.send_status.name)
                continue
            self._acked[(result.message_queue.queue_id, result.queue_offset)] = (began, time.time(), body)
            self._count += 1

    def count(self) -> int:
        """Acked sends, counting one queue offset acked twice (which would be a fault) twice."""
        return self._count

    def acked(self) -> dict[tuple[int, int], tuple[float, float, object]]:
        return dict(self._acked)

    def failures(self) -> list[str]:
        return list(self._failures)

    @staticmethod
    def same(sent: object, found: tuple[bytes, str]) -> bool:
        return sent == found[0]

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(15)
        self.producer.shutdown()


class JavaSender:
    """SYNC sends from Apache's DefaultMQProducer (default retries) in its own JVM."""

    def __init__(self, group: ControllerModeGroup, topic: str) -> None:
        from testkit.javaproducer import JavaSyncSender

        self.jvm = JavaSyncSender(group.namesrv, topic, Path(group.root) / "java-sender.log")

    def start(self) -> None:
        self.jvm.start()

    def count(self) -> int:
        return len(self.jvm.acks)

    def acked(self) -> dict[tuple[int, int], tuple[float, float, object]]:
        return {(a.queue_id, a.queue_offset): (a.began, a.done, a) for a in list(self.jvm.acks)}

    def failures(self) -> list[str]:
        return list(self.jvm.failures)

    @staticmethod
    def same(sent: object, found: tuple[bytes, str]) -> bool:
        return sent.body == found[0] and sent.msg_id == found[1]  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.jvm.stop()


def mqadmin(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Apache 5.4.0's mqadmin (rocketmq-tools, on the same classpath) in its own small JVM."""
    home = Path(tempfile.mkdtemp(prefix="rmqtx-mqadmin-"))
    try:
        cmd = ["java", "-Xms64m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Duser.home={home}",
               f"-Drocketmq.home.dir={home}", "-cp", apache5.classpath(), "org.apache.rocketmq.tools.command.MQAdminStartup", *args]
        return subprocess.run(cmd, cwd=home, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "ROCKETMQ_HOME": str(home)})
    finally:
        shutil.rmtree(home, ignore_errors=True)


class RmqtxControllerModeGroup(ControllerModeGroup):
    """The same group with rmqtx in every seat: rmqtx controllers, ``twistd rmqnamesrv``, rmqtx brokers in
    controller mode (``enableControllerMode=true``); no JVM."""

    def __init__(self, controllers: int = 3, brokers: int = 3, controller_conf: dict | None = None,
                 broker_conf: dict | None = None, apache_controller: bool = False) -> None:
        from testkit.ha import Broker, Namesrv

        self.tmp = tempfile.mkdtemp(prefix="rmqtx-ctl-")
        self.root = Path(self.tmp)
        self.controllers: Controllers = (ApacheController(self.root, **(controller_conf or {})) if apache_controller
                                         else Controllers(self.root, controllers, **(controller_conf or {})))
        self.namesrv_proc = Namesrv(self.root)
        self.namesrv = self.namesrv_proc.addr
        self.broker_conf = {
            "brokerClusterName": CLUSTER, "enableControllerMode": "true",
            "controllerAddr": self.controllers.addr_list, "allAckInSyncStateSet": "true",
            "syncBrokerMetadataPeriod": 2000, "checkSyncStateSetPeriod": 2000, "syncControllerMetadataPeriod": 2000,
            "haSendHeartbeatInterval": 1000, "mappedFileSizeCommitLog": 1024 * 1024, **(broker_conf or {})}
        self.brokers = [Broker(self.root, f"broker{i}", self.namesrv, {k: str(v) for k, v in self.broker_conf.items()})
                        for i in range(brokers)]

    def start(self, timeout: float = 60.0) -> "RmqtxControllerModeGroup":
        try:
            self.controllers.start()
            self.namesrv_proc.start()
            for broker in self.brokers:
                broker.start()
            self.wait_master(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """On the master only (an rmqtx slave refuses topic changes); the slaves copy it with their table sync."""
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        _, master_addr, _ = self.wait_master(30)
        resp = call(master_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"create topic {topic} on {master_addr}: {resp.code} {resp.remark}")

    def logs(self) -> str:
        return "\n".join(f"=== {b.name}\n{b.log()[-3000:]}" for b in self.brokers)

    def close(self) -> None:
        for broker in self.brokers:
            if broker.alive():
                broker.stop()
        if self.namesrv_proc.alive():
            self.namesrv_proc.stop()
        self.controllers.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class ApacheController(Controllers):
    """One Apache 5.4.0 controller JVM (``ControllerStartup``, DLedger, one peer) in place of rmqtx's nodes;
    brokers and mqadmin reach it on its DLedger peer address (its only port)."""

    def __init__(self, root: Path, **conf: object) -> None:
        peer = controller_port()
        self.addrs = {"n0": f"127.0.0.1:{peer}"}
        self.nodes = {}
        home = root / "apache-controller"
        home.mkdir(parents=True, exist_ok=True)
        values = {"controllerDLegerGroup": "apache-controllers", "controllerDLegerPeers": f"n0-127.0.0.1:{peer}",
                  "controllerDLegerSelfId": "n0", "controllerStorePath": home / "store",
                  "scanNotActiveBrokerInterval": 1000, "scanInactiveMasterInterval": 1000, **conf}
        (home / "controller.conf").write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        self.jvm = ApacheJvm(home, "org.apache.rocketmq.controller.ControllerStartup", ["-c", str(home / "controller.conf")],
                             BROKER_JVM)

    def start(self, timeout: float = 60.0) -> "ApacheController":
        apache5.classpath()
        self.jvm.start()
        self.wait_leader(timeout)
        return self

    def leader(self) -> str | None:
        addr = self.addrs["n0"]
        try:
            meta = self.metadata(addr)
        except OSError:
            return None
        return addr if meta.get("isLeader") == "true" else None

    def wait_leader(self, timeout: float = 30.0) -> str:
        def check() -> str | None:
            if not self.jvm.alive():
                raise AssertionError(f"Apache's controller exited:\n{self.jvm.log()}")
            return self.leader()
        return str(wait_until(check, timeout, "Apache's controller leading", step=0.3))

    def events(self) -> str:
        return self.jvm.log()

    def stop(self) -> None:
        self.jvm.stop()
