"""Separate ``twistd rmqnamesrv`` / ``rmqbroker`` processes on loopback for master/slave tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.ports import free_port
from testkit.standalone import REPO, call

TWISTD = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "-n", "--pidfile="]


def wait_until(check: Callable[[], object], timeout: float, what: str, step: float = 0.05) -> object:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as e:
            last = e
        else:
            if last:
                return last
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


class Proc:
    """A twistd child with its own log file."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name
        self.log_path = root / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def spawn(self, args: list[str]) -> None:
        self.proc = subprocess.Popen([*TWISTD, "--logfile", str(self.log_path), *args], cwd=REPO,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-6000:]
        except FileNotFoundError:
            return ""

    def log_count(self, text: str) -> int:
        """How often text occurs in the whole log (restarts append to it)."""
        try:
            return self.log_path.read_text().count(text)
        except FileNotFoundError:
            return 0

    def kill9(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> bool:
        """SIGTERM and wait; True on a clean shutdown."""
        if self.proc is None:
            return True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return False
            return "Server Shut Down." in self.log()
        return self.proc.returncode in (0, -signal.SIGTERM)


class Namesrv(Proc):
    def __init__(self, root: Path) -> None:
        super().__init__(root, "namesrv")
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"

    def start(self) -> "Namesrv":
        self.spawn(["rmqnamesrv", "--listen-port", str(self.port), "--listen-address", "127.0.0.1",
                    "--kv-config-path", str(self.root / "kvConfig.json")])
        wait_until(lambda: call(self.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 1).code
                   == ResponseCode.SUCCESS, 20, "the NameServer")
        return self

    def broker_addrs(self, broker_name: str = "broker-a") -> dict[int, str]:
        import json
        from rmqtx.broker.jsonfiles import loads_fastjson

        resp = call(self.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 2)
        data = loads_fastjson(resp.body) if resp.body else {}
        addrs = (data.get("brokerAddrTable") or {}).get(broker_name, {}).get("brokerAddrs") or {}
        return {int(k): v for k, v in json.loads(json.dumps(addrs)).items()}


class Broker(Proc):
    """An rmqtx broker process of a given role; its store survives restarts (same directory)."""

    def __init__(self, root: Path, name: str, namesrv: str, conf: dict[str, str]) -> None:
        super().__init__(root, name)
        self.port = free_port()
        self.ha_port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.store = root / name / "store"
        self.conf = {"brokerName": "broker-a", "brokerClusterName": "HaCluster", "listenAddress": "127.0.0.1",
                     "brokerIP1": "127.0.0.1", "namesrvAddr": namesrv, "haListenPort": str(self.ha_port),
                     "mappedFileSizeCommitLog": str(1024 * 1024), "mappedFileSizeConsumeQueue": str(20 * 1000),
                     "flushDiskType": "ASYNC_FLUSH", "storePathRootDir": str(self.store), **conf}

    @property
    def ha_addr(self) -> str:
        return f"127.0.0.1:{self.ha_port}"

    def start(self, timeout: float = 30) -> "Broker":
        conf_path = self.root / f"{self.name}.conf"
        conf_path.write_text("".join(f"{k}={v}\n" for k, v in self.conf.items()))
        self.spawn(["rmqbroker", "-c", str(conf_path), "--listen-port", str(self.port)])

        def up() -> bool:
            if not self.alive():
                raise AssertionError(f"{self.name} exited:\n{self.log()}")
            return call(self.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 1).code == ResponseCode.SUCCESS
        wait_until(up, timeout, f"broker {self.name}")
        return self

    def runtime(self) -> dict[str, str]:
        from rmqtx.broker.jsonfiles import loads_fastjson

        resp = call(self.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 2)
        return (loads_fastjson(resp.body) or {}).get("table", {})

    def commit_log_bytes(self, upto: int | None = None) -> bytes:
        """The commit log files' bytes concatenated (files are named by their start offset)."""
        d = self.store / "commitlog"
        out = b"".join((d / n).read_bytes() for n in sorted(os.listdir(d)) if n.isdigit())
        return out if upto is None else out[:upto]


class Cluster:
    """A temp dir with a NameServer; brokers are added by the test."""

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-ha-")
        self.root = Path(self.tmp.name)
        self.namesrv = Namesrv(self.root).start()
        self.procs: list[Proc] = [self.namesrv]

    def broker(self, name: str, **conf: str) -> Broker:
        b = Broker(self.root, name, self.namesrv.addr, {k: str(v) for k, v in conf.items()})
        self.procs.append(b)
        return b

    def close(self) -> list[str]:
        """Stop everything; the names of processes that did not shut down cleanly."""
        bad = [p.name for p in reversed(self.procs) if p.alive() and not p.stop()]
        self.tmp.cleanup()
        return bad


class Sender:
    """A producer connection speaking SEND_MESSAGE_V2 frames directly (what a Java producer sends), blocking."""

    def __init__(self, addr: str, group: str = "P_ha", timeout: float = 10.0) -> None:
        import socket

        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.group = group

    def send(self, topic: str, body: bytes, queue_id: int = 0, **props: str) -> RemotingCommand:
        from rmqtx.common.message import properties_to_string
        from rmqtx.remoting.headers import SendMessageRequestHeader, send_header_to_v2
        from rmqtx.remoting.serializer import decode_frame, encode_frame

        header = SendMessageRequestHeader(
            producerGroup=self.group, topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=queue_id,
            sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0, properties=properties_to_string(dict(props)),
            reconsumeTimes=0, unitMode=False, batch=False,
        )
        fields, order = send_header_to_v2(header)
        self.sock.sendall(encode_frame(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=body, fast_keys=order)))
        head = self._read(4)
        return decode_frame(head + self._read(int.from_bytes(head, "big")))

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def pull(addr: str, topic: str, queue_id: int, offset: int, group: str = "C_ha", max_nums: int = 32) -> tuple[RemotingCommand, list]:
    """A PULL_MESSAGE with its own subscription ("*"), as a pull consumer sends it; answer and records."""
    from rmqtx.remoting.headers import PullMessageRequestHeader
    from rmqtx.store.record import decode_record

    header = PullMessageRequestHeader(
        consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset, maxMsgNums=max_nums,
        sysFlag=0x4, commitOffset=0, suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG",
    )
    resp = call(addr, header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE)), 5)
    out, pos, body = [], 0, resp.body or b""
    while pos < len(body):
        rec = decode_record(body, pos)
        out.append(rec)
        pos += rec.total_size
    return resp, out


def pull_held(addr: str, topic: str, queue_id: int, offset: int, suspend_ms: int, group: str = "C_ha") -> tuple[RemotingCommand, list]:
    """A long poll (the suspend flag, held up to suspend_ms by the broker); answer and records."""
    from rmqtx.remoting.headers import PullMessageRequestHeader
    from rmqtx.store.record import decode_record

    header = PullMessageRequestHeader(
        consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset, maxMsgNums=32,
        sysFlag=0x2 | 0x4, commitOffset=0, suspendTimeoutMillis=suspend_ms, subscription="*", subVersion=0,
        expressionType="TAG",
    )
    resp = call(addr, header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE)), suspend_ms / 1000.0 + 5)
    out, pos, body = [], 0, resp.body or b""
    while pos < len(body):
        rec = decode_record(body, pos)
        out.append(rec)
        pos += rec.total_size
    return resp, out


def stored_offset(response: RemotingCommand) -> int:
    """The commit log offset a send answer's msgId (an offsetMsgId) names."""
    return int(response.ext_fields["msgId"][-16:], 16)
