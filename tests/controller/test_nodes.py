"""Three ``twistd rmqcontroller`` processes driven with raw frames, as an Apache 5.x broker and mqadmin send them:
broker ids, registration, heartbeats over kept-open connections, elections, NOTIFY_BROKER_ROLE_CHANGED to a
listening stand-in broker, CONTROLLER_NOT_LEADER from followers, a leader killed, and every node restarted."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

from rmqtx.common.fastjson import dumps, loads
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import decode_frame, encode_frame
from testkit.controller import Controllers
from testkit.ha import wait_until
from testkit.standalone import REPO, call


def _read_frame(sock: socket.socket) -> RemotingCommand | None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    total, data = int.from_bytes(head, "big"), b""
    while len(data) < total:
        chunk = sock.recv(total - len(data))
        if not chunk:
            return None
        data += chunk
    return decode_frame(head + data)


class Link:
    """One kept-open connection, as a broker's heartbeats use."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)

    def ask(self, cmd: RemotingCommand) -> RemotingCommand:
        self.sock.sendall(encode_frame(cmd))
        resp = _read_frame(self.sock)
        assert resp is not None, "connection closed"
        return resp

    def close(self) -> None:
        self.sock.close()


class StandInBroker:
    """A listening socket at a broker's address that records the frames the controller sends it."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.frames: list[RemotingCommand] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with conn:
            while (frame := _read_frame(conn)) is not None:
                self.frames.append(frame)

    def close(self) -> None:
        self.server.close()


def heartbeat(bid: int, addr: str, timeout_ms: int = 1500, max_offset: int = 0) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, {
        "clusterName": "c", "brokerAddr": addr, "brokerName": "b", "brokerId": bid, "epoch": 0,
        "maxOffset": max_offset, "confirmOffset": 0, "heartbeatTimeoutMills": timeout_ms, "electionPriority": 0})


class ControllerNodesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-ctl-test-")
        self.addCleanup(self.tmp.cleanup)
        self.group = Controllers(Path(self.tmp.name), 3, scanNotActiveBrokerInterval=300, scanInactiveMasterInterval=300)
        self.addCleanup(self.group.stop)
        self.group.start()

    def ask(self, code: int, fields: dict | None = None, body: bytes = b"") -> RemotingCommand:
        return self.group.request(code, fields, body)

    def join(self, bid: int, addr: str) -> Link:
        """A broker's register sequence (ReplicasManager.register) and its first heartbeat, on one link."""
        nxt = self.ask(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": "c", "brokerName": "b"})
        self.assertEqual((nxt.code, nxt.ext_fields["nextBrokerId"]), (ResponseCode.SUCCESS, str(bid)))
        applied = self.ask(RequestCode.CONTROLLER_APPLY_BROKER_ID, {"clusterName": "c", "brokerName": "b",
                                                                    "appliedBrokerId": bid, "registerCheckCode": f"{addr};1"})
        self.assertEqual(applied.code, ResponseCode.SUCCESS, applied.remark)
        link = Link(self.group.wait_leader())
        self.addCleanup(link.close)
        beat = link.ask(heartbeat(bid, addr))
        self.assertEqual((beat.code, beat.remark), (ResponseCode.SUCCESS, "Heart beat success"))
        for other in self.group.addrs.values():  # brokers beat every controller
            if other != self.group.wait_leader():
                extra = Link(other)
                self.addCleanup(extra.close)
                extra.ask(heartbeat(bid, addr, timeout_ms=600_000))
        reg = self.ask(RequestCode.CONTROLLER_REGISTER_BROKER, {"clusterName": "c", "brokerName": "b", "brokerId": bid,
                                                                "brokerAddress": addr})
        self.assertEqual(reg.code, ResponseCode.SUCCESS, reg.remark)
        return link

    def test_register_elect_failover_and_restart(self) -> None:
        def settled() -> str | None:  # one leader, and every node names it
            leader = self.group.leader()
            metas = [self.group.metadata(a) for a in self.group.addrs.values()]
            return leader if leader and all(m.get("controllerLeaderAddress") == leader for m in metas) else None
        leader = str(wait_until(settled, 20, "every node to name one leader", step=0.2))
        for addr in self.group.addrs.values():
            if addr != leader:
                resp = call(addr, RemotingCommand.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": "c", "brokerName": "b"}))
                self.assertEqual((resp.code, resp.remark), (ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state"))
                self.assertEqual(self.group.metadata(addr)["isLeader"], "false")
        broker1, broker2 = StandInBroker(), StandInBroker()
        self.addCleanup(broker1.close)
        self.addCleanup(broker2.close)
        link1 = self.join(1, broker1.addr)
        self.join(2, broker2.addr)
        elected = self.ask(RequestCode.CONTROLLER_ELECT_MASTER, {"clusterName": "c", "brokerName": "b", "brokerId": 1,
                                                                 "designateElect": False})
        self.assertEqual((elected.code, elected.ext_fields["masterBrokerId"], elected.ext_fields["masterEpoch"]),
                         (ResponseCode.SUCCESS, "1", "1"))
        grown = self.ask(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {"brokerName": "b", "masterBrokerId": 1, "masterEpoch": 1},
                         b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
        self.assertEqual((grown.code, grown.ext_fields["newSyncStateSetEpoch"]), (ResponseCode.SUCCESS, "2"))
        data = loads(self.ask(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, dumps(["b"])).body)
        self.assertEqual([r["brokerId"] for r in data["replicasInfoTable"]["b"]["inSyncReplicas"]], [1, 2])

        link1.close()  # the master's connection drops: the leader elects broker 2 from the sync-state set
        def new_master() -> bool:
            head, body = self.group.replica_info("b")
            return head.get("masterBrokerId") == "2" and body.get("syncStateSet") == [2]
        wait_until(new_master, 10, "broker 2 elected")
        head, body = self.group.replica_info("b")
        self.assertEqual((head["masterAddress"], head["masterEpoch"], body["syncStateSetEpoch"]), (broker2.addr, "2", 3))
        def told() -> list[RemotingCommand]:  # the first election was told to both too; this is the second
            return [f for f in broker2.frames if f.code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED
                    and (f.ext_fields or {}).get("masterBrokerId") == "2"]
        note = wait_until(told, 10, "NOTIFY_BROKER_ROLE_CHANGED naming broker 2")[0]  # type: ignore[index]
        self.assertEqual(note.ext_fields, {"masterAddress": broker2.addr, "masterEpoch": "2", "syncStateSetEpoch": "3",
                                           "masterBrokerId": "2"})
        self.assertEqual(note.body, b'{"syncStateSet":[2],"syncStateSetEpoch":3}')
        self.assertFalse([f for f in broker1.frames if (f.ext_fields or {}).get("masterBrokerId") == "2"])  # gone: not told

        old_leader = self.group.wait_leader()
        node = next(n for n, a in self.group.addrs.items() if a == old_leader)
        self.group.nodes[node].kill9()
        wait_until(lambda: self.group.leader() not in (None, old_leader), 15, "a new controller leader")
        self.assertEqual(self.group.replica_info("b")[0]["masterBrokerId"], "2")

        self.group.stop()  # every node down, then up again from its journal and dump
        for n in self.group.nodes.values():
            n.start()
        self.group.wait_leader(30)
        head, body = self.group.replica_info("b")
        self.assertEqual((head["masterBrokerId"], head["masterEpoch"], body), ("2", "2", {"syncStateSet": [2], "syncStateSetEpoch": 3}))
        nxt = self.ask(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": "c", "brokerName": "b"})
        self.assertEqual(nxt.ext_fields["nextBrokerId"], "3")
        config = self.ask(RequestCode.GET_CONTROLLER_CONFIG).body.decode()
        self.assertIn("controllerDLegerGroup=rmqtx-controllers\n", config)
        refused = self.ask(RequestCode.UPDATE_CONTROLLER_CONFIG, None, b"controllerStorePath=/tmp/x\n")
        self.assertEqual(refused.code, ResponseCode.NO_PERMISSION)

        # heartbeats that stop on an open connection expire (heartbeatTimeoutMills); with no other replica in
        # the sync-state set the leader records that the set has no master, as Apache's does
        for addr in self.group.addrs.values():  # to every node, as brokers beat: whichever leads then acts
            quiet = Link(addr)
            self.addCleanup(quiet.close)
            self.assertEqual(quiet.ask(heartbeat(2, broker2.addr, timeout_ms=800)).code, ResponseCode.SUCCESS)
        wait_until(lambda: "masterBrokerId" not in self.group.replica_info("b")[0], 10, "the silent master dropped")
        # each of the electMasterMaxRetryCount tries that elects no one records it again, as Apache's does
        self.assertGreaterEqual(int(self.group.replica_info("b")[0]["masterEpoch"]), 3)


class StartupTest(unittest.TestCase):
    def run_twistd(self, conf: str, prelude: str = "") -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "controller.conf"
            path.write_text(conf)
            code = f"{prelude}from twisted.scripts.twistd import run; run()"
            return subprocess.run([sys.executable, "-c", code, "-n", "--pidfile=", "rmqcontroller", "-c", str(path)],
                                  cwd=REPO, capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "PYTHONPATH": str(REPO)})

    def test_refusals_are_one_line(self) -> None:
        base = "controllerDLegerPeers=n0-127.0.0.1:1;n1-127.0.0.1:3\ncontrollerDLegerSelfId=n0\n"
        proc = self.run_twistd(base + "controllerType=jRaft\n")
        self.assertEqual(proc.returncode, 1, proc.stderr + proc.stdout)
        self.assertEqual(proc.stderr, "rmqtx: cannot start: controller.conf: controllerType=jRaft asks for a JRaft controller "
                                      "(rmqtx replicates with pysyncobj, peers given as controllerDLegerPeers), which rmqtx does not implement\n")
        proc = self.run_twistd(base, prelude="import sys; sys.modules['pysyncobj'] = None; ")
        self.assertEqual(proc.returncode, 1, proc.stderr + proc.stdout)
        self.assertTrue(proc.stderr.startswith("rmqtx: cannot start: the controller needs the 'controller' extra: "
                                               "pip install 'rmqtx[controller]'"), proc.stderr)
        self.assertEqual(proc.stderr.count("\n"), 1)


class EmbeddedInNamesrvTest(unittest.TestCase):
    def test_namesrv_with_enable_controller_in_namesrv(self) -> None:
        from testkit.controller import controller_port
        from testkit.ha import Proc
        from testkit.ports import free_port

        tmp = tempfile.TemporaryDirectory(prefix="rmqtx-ctl-ns-")
        self.addCleanup(tmp.cleanup)
        root = Path(tmp.name)
        ns_port, ctl_port = free_port(), controller_port()
        conf = root / "namesrv.conf"
        conf.write_text(f"listenPort={ns_port}\nlistenAddress=127.0.0.1\nkvConfigPath={root / 'kv.json'}\n"
                        f"enableControllerInNamesrv=true\ncontrollerDLegerGroup=ns-group\n"
                        f"controllerDLegerPeers=n0-127.0.0.1:{ctl_port}\ncontrollerDLegerSelfId=n0\n"
                        f"controllerStorePath={root / 'controller'}\n")
        proc = Proc(root, "namesrv")
        proc.spawn(["rmqnamesrv", "-c", str(conf)])
        self.addCleanup(proc.stop)
        ctl = f"127.0.0.1:{ctl_port}"

        def leads() -> bool:
            if not proc.alive():
                raise AssertionError(proc.log())
            resp = call(ctl, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), 2)
            return (resp.ext_fields or {}).get("isLeader") == "true"
        wait_until(leads, 20, "the embedded controller to lead its one-node group")
        ns = call(f"127.0.0.1:{ns_port}", RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 2)
        self.assertEqual(ns.code, ResponseCode.SUCCESS)
        nxt = call(ctl, RemotingCommand.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": "c", "brokerName": "b"}))
        self.assertEqual((nxt.code, nxt.ext_fields["nextBrokerId"]), (ResponseCode.SUCCESS, "1"))
        self.assertNotIn("unknown name server property", proc.log())
