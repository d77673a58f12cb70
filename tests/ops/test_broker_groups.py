"""``rmqstandalone --brokers N``: N broker groups behind one NameServer, as real processes.

Groups 2..N are child ``twistd rmqbroker`` processes (rmqtx.groups); these tests check what an operator
relies on: the cluster lists every group, a topic created by cluster has queues on each, messages land
on each and come back, SIGTERM leaves no process and no abort file, and a group that cannot start
fails the start in one line.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import unittest
from pathlib import Path

from rmqtx.common import fastjson
from rmqtx.groups import group_props
from rmqtx.startup import StartupError
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import REPO, Standalone, call, run_client, wait_for
from tests.ops.support import Scratch

NAMES = ["broker-a", "broker-a-2", "broker-a-3"]


def children(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (from /proc)."""
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.add(int(entry))
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cluster_info(namesrv: str) -> dict:
    resp = call(namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return fastjson.loads(resp.body)


def rmqadmin(*argv: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "rmqtx.tools.admin", *argv], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout


class GroupPropsTest(unittest.TestCase):
    """Group k's broker.conf from the standalone's: what changes, what is kept, what is refused."""

    BASE = {"brokerName": "b", "listenPort": "20911", "storePathRootDir": "/s", "consolePort": "8080", "grpcPort": "8081",
            "metricsExporterType": "PROM", "metricsPromExporterPort": "5557", "flushDiskType": "SYNC_FLUSH",
            "haListenPort": "20950", "namesrvAddr": "127.0.0.1:9876"}

    def test_group_three(self) -> None:
        props = group_props(self.BASE, 3, "/s")
        self.assertEqual(props, {"brokerName": "b-3", "brokerId": "0", "listenPort": "20931", "storePathRootDir": "/s/broker-3",
                                 "flushDiskType": "SYNC_FLUSH", "haListenPort": "20970", "namesrvAddr": "127.0.0.1:9876"})

    def test_defaults_and_port_zero(self) -> None:
        props = group_props({"listenPort": "0"}, 2, "st")
        self.assertEqual((props["brokerName"], props["listenPort"], props["storePathRootDir"]), ("broker-a-2", "0", os.path.join("st", "broker-2")))
        self.assertEqual(group_props({}, 2, "st")["listenPort"], "10921")

    def test_refused(self) -> None:
        for key, value in (("storePathCommitLog", "/cl"), ("brokerConfigPath", "/b.conf"), ("haMasterAddress", "h:1"), ("brokerRole", "SLAVE")):
            with self.subTest(key=key), self.assertRaises(StartupError):
                group_props({key: value}, 2, "st")


@unittest.skipUnless(sys.platform.startswith("linux"), "reads /proc")
class ThreeGroupsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = Standalone(brokers=3).start(timeout=40)
        self.addCleanup(self.server.close)

    def test_cluster_topic_send_consume_and_stop(self) -> None:
        server = self.server
        info = cluster_info(server.namesrv)
        self.assertEqual(sorted(info["clusterAddrTable"]["DefaultCluster"]), NAMES)
        addrs = {name: data["brokerAddrs"][0] for name, data in info["brokerAddrTable"].items()}
        self.assertEqual(addrs, dict(zip(NAMES, server.group_addrs)))

        out = rmqadmin("updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "GroupsTopic", "-r", "4", "-w", "4")
        for addr in server.group_addrs:  # mqadmin's way: one create per master of the cluster
            self.assertIn(f"create topic to {addr} success.", out)
        route = fastjson.loads(call(server.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "GroupsTopic"})).body)
        self.assertEqual(sorted((q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]), [(n, 4) for n in NAMES])

        events = run_client([sys.executable, str(REPO / "tests" / "ops" / "groups_client.py"), server.namesrv, "GroupsTopic", "60"],
                            timeout=120, env={"PYTHONPATH": str(REPO)})
        sent = {e["sent"]: e["broker"] for e in events if "sent" in e}
        pulled = {e["pulled"]: e["broker"] for e in events if "pulled" in e}
        self.assertEqual(len(sent), 60)
        self.assertEqual(set(sent.values()), set(NAMES))  # the producer spread its sends over the three groups
        self.assertEqual(pulled, sent)  # each came back, from the group it was stored on

        kids = children(server.proc.pid)
        self.assertEqual(len(kids), 2, kids)
        self.assertTrue(server.stop(), server.log())
        wait_for(lambda: not any(alive(pid) for pid in kids), 5, "the groups' processes to end")
        store = server.root / "store"
        for path in (store, store / "broker-2", store / "broker-3"):
            self.assertTrue((path / "checkpoint").exists(), path)
            self.assertFalse((path / "abort").exists(), path)  # every store closed cleanly
        log = server.log_path.read_text()
        self.assertIn("broker groups started: broker-a-2, broker-a-3", log)  # their start was seen
        for name in NAMES[1:]:
            self.assertIn(f"[{name}] ", log)  # the groups' lines in the standalone's log, named
            self.assertIn(f"broker group {name} stopped", log)

    def test_a_group_that_dies_is_restarted(self) -> None:
        kids = children(self.server.proc.pid)
        victim = max(kids)
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: "restarting it in 5 s" in self.server.log_path.read_text(), 10, "the death to be logged")
        wait_for(lambda: len(children(self.server.proc.pid) - {victim}) == 2, 20, "a new process for the group")
        wait_for(lambda: len(cluster_info(self.server.namesrv)["brokerAddrTable"]) == 3
                 and self.server.log_path.read_text().count("broker broker-a-") >= 3, 20, "the group to serve again")
        self.assertTrue(self.server.stop(), self.server.log())

    def test_groups_end_with_a_killed_standalone(self) -> None:
        kids = children(self.server.proc.pid)
        self.server.proc.kill()
        self.server.proc.wait()
        wait_for(lambda: not any(alive(pid) for pid in kids), 20, "the groups to end with their standalone (PR_SET_PDEATHSIG)")


def running_in(path: Path) -> list[int]:
    """Processes whose command line names ``path``."""
    out = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and str(path).encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                out.append(int(entry))
        except OSError:
            pass
    return out


class GroupStartFailureTest(unittest.TestCase):
    def setUp(self) -> None:
        self.scratch = Scratch()
        self.addCleanup(self.scratch.close)

    def test_group_whose_port_is_taken_fails_start_up_in_one_line(self) -> None:
        port = self.scratch.broker_port + 10
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", port))
            taken.listen()
            started = time.time()
            proc = self.scratch.run(self.scratch.standalone_args("--brokers", "2"))
        self.assertEqual(proc.returncode, 1, proc.stderr + proc.stdout)
        self.assertEqual(proc.stderr, f"rmqtx: cannot start: broker group broker-a-2: the broker cannot listen on 127.0.0.1:{port}: Address already in use\n")
        self.assertLess(time.time() - started, 30)
        store = self.scratch.dir / "store"
        self.assertFalse((store / "abort").exists())  # group 1 stopped cleanly
        self.assertFalse((store / "broker-2" / "abort").exists())
        self.assertEqual(running_in(store), [])  # no group left behind

    def test_settings_groups_cannot_share_are_refused(self) -> None:
        conf = self.scratch.dir / "broker.conf"
        conf.write_text(f"storePathCommitLog={self.scratch.dir / 'cl'}\n")
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf), "--brokers", "2"))
        self.assertEqual(proc.returncode, 1, proc.stderr + proc.stdout)
        self.assertTrue(proc.stderr.startswith("rmqtx: cannot start: --brokers: broker.conf sets storePathCommitLog"), proc.stderr)
        self.assertEqual(proc.stderr.count("\n"), 1)
