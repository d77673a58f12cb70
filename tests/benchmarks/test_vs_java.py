"""benchmarks/vs_java.py's parsing of Apache's benchmark printouts, its drain-rate arithmetic, its busy-cell
backgrounds, and the answer-only listener of its ceiling row (benchmarks/answer_only.py) over the wire.

The lines below follow the printf formats of rocketmq-example 4.9.8's benchmark Producer/Consumer.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import tempfile
import time
import sys
import unittest
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "vs_java.py"
_spec = importlib.util.spec_from_file_location("vs_java", _PATH)
vs_java = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("vs_java", vs_java)  # dataclasses look their module up there
_spec.loader.exec_module(vs_java)

PRODUCER_OUT = """topic: VsJavaBench threadCount: 64 messageSize: 1024 keyEnable: false propertySize: 0 tagCount: 0 traceEnable: false aclEnable: false messageQuantity: 0
delayEnable: false delayLevel: 1
asyncEnable: false
Current Time: 2026-11-22 22:55:41,090 Send TPS: 12000 Max RT(ms): 1551 Average RT(ms):   5.334 Send Failed: 0 Response Failed: 0
Current Time: 2026-11-22 22:55:51,090 Send TPS: 20061 Max RT(ms): 1551 Average RT(ms):   3.208 Send Failed: 2 Response Failed: 1
"""

CONSUMER_OUT = """topic: VsJavaBench, threadCount 64, group: benchmark_consumer, suffix: false, filterType: null, expression: null, msgTraceEnable: false, aclEnable: false
Consumer Started.
Current Time: 1795388080499 TPS: 27659 FAIL: 0 AVG(B2C) RT(ms): 13534.514 AVG(S2C) RT(ms): 13532.464 MAX(B2C) RT(ms): 21635 MAX(S2C) RT(ms): 21499
"""


class ParseTest(unittest.TestCase):
    def test_producer_lines(self) -> None:
        lines = [m.groups() for m in vs_java.SEND_RE.finditer(PRODUCER_OUT)]
        self.assertEqual(lines, [("12000", "1551", "5.334", "0", "0"), ("20061", "1551", "3.208", "2", "1")])

    def test_consumer_lines(self) -> None:
        self.assertEqual([m.group(1) for m in vs_java.CONSUME_RE.finditer(CONSUMER_OUT)], ["27659"])


class DrainTest(unittest.TestCase):
    def test_rate_between_10_and_90_percent(self) -> None:
        # nothing for 2 s (client start), then 1000 msgs/s, then a tail committed late
        samples = [(t / 10, max(0, int((t / 10 - 2) * 1000))) for t in range(0, 120)]
        self.assertAlmostEqual(vs_java.drain_rate(samples, 5000), 1000, delta=1)

    def test_not_reached(self) -> None:
        self.assertTrue(math.isnan(vs_java.drain_rate([(0.0, 0), (1.0, 100)], 5000)))

    def test_pairs_use_the_smaller_backlog(self) -> None:
        fast = [(t / 10, int(t / 10 * 4000)) for t in range(0, 200)]  # 4000/s throughout
        slow = [(t / 10, int(t / 10 * 1000)) for t in range(0, 200)]
        results = [
            {"impl": "java", "busy": "quiet", "flush": "ASYNC_FLUSH", "threads": 64, "rep": 0, "backlog": 60000, "samples": fast},
            {"impl": "rmqtx", "busy": "quiet", "flush": "ASYNC_FLUSH", "threads": 64, "rep": 0, "backlog": 10000, "samples": slow},
            {"impl": "rmqtx", "busy": "spin8", "flush": "ASYNC_FLUSH", "threads": 64, "rep": 0, "backlog": 500, "samples": slow},
        ]
        vs_java.common_drain(results)
        self.assertEqual([r["drain_over"] for r in results], [10000, 10000, 500])  # a busy cell pairs only with its own
        self.assertAlmostEqual(results[0]["drain_tps"], 4000, delta=5)
        self.assertAlmostEqual(results[1]["drain_tps"], 1000, delta=5)


class TableTest(unittest.TestCase):
    def test_ratio_and_missing_side(self) -> None:
        row = {"busy": "quiet", "flush": "SYNC_FLUSH", "threads": 8, "rep": 0, "backlog": 1000, "samples": [], "apache_lower_bound": False}
        figures = {k: 2.0 for k, _, _ in vs_java.METRICS}
        results = [{**row, **figures, "impl": "java"}, {**row, **figures, "impl": "rmqtx", "send_tps": 1.0}]
        out = vs_java.table(results, [("quiet", "SYNC_FLUSH", 8)])
        self.assertIn("| quiet | SYNC_FLUSH | 8 | send TPS", out)
        send_row = next(line for line in out.splitlines() if "send TPS" in line)
        self.assertTrue(send_row.endswith("| 0.50 |"), send_row)
        only_java = vs_java.table(results[:1], [("quiet", "SYNC_FLUSH", 8)])
        self.assertTrue(next(line for line in only_java.splitlines() if "send TPS" in line).endswith("| – |"))

    def test_ceiling_columns(self) -> None:
        """An answer-only run adds its own columns and takes no part in the drain pairing."""
        row = {"busy": "quiet", "flush": "ASYNC_FLUSH", "threads": 64, "rep": 0, "apache_lower_bound": False}
        figures = {k: 2.0 for k, _, _ in vs_java.METRICS}
        ramp = [(t / 10, t * 100) for t in range(200)]
        results = [{**row, **figures, "impl": "java", "backlog": 4000, "samples": ramp},
                   {**row, **figures, "impl": "rmqtx", "backlog": 8000, "samples": ramp, "send_tps": 3.0},
                   {**row, **figures, "impl": "answer", "backlog": 1000, "samples": [], "send_tps": 5.0}]
        out = vs_java.table(results, [("quiet", "ASYNC_FLUSH", 64)])
        self.assertIn("| rmqtx/Java | answer-only | answer-only/Java |", out)
        send_row = next(line for line in out.splitlines() if "send TPS (" in line)
        self.assertTrue(send_row.endswith("| 3 | 1.50 | 5 | 2.50 |"), send_row)
        self.assertEqual([r["drain_over"] for r in results[:2]], [4000, 4000])  # not the answer-only run's 1000
        self.assertTrue(math.isnan(results[2]["drain_tps"]))


class BusyTest(unittest.TestCase):
    def test_names(self) -> None:
        self.assertEqual(len(vs_java.busy_cmds("spin8")), 8)
        self.assertEqual(len(vs_java.busy_cmds("jvm4")), 1)
        for bad in ("spin0", "jvm", "cpu4", "spin-1"):
            with self.assertRaises(ValueError):
                vs_java.busy_cmds(bad)

    def test_backgrounds_burn_cpu(self) -> None:
        """Each kind of background really loads the machine, and stops with its cell."""
        with tempfile.TemporaryDirectory() as tmp:
            for kind in ("spin1", "jvm2"):
                procs = vs_java.start_busy(kind, Path(tmp))
                try:
                    deadline = time.monotonic() + 60
                    while vs_java.cpu_seconds([p.pid for p in procs]) < 0.5 and time.monotonic() < deadline:
                        self.assertTrue(all(p.poll() is None for p in procs), (Path(tmp) / "busy-0.out").read_text())
                        time.sleep(0.2)
                    self.assertGreaterEqual(vs_java.cpu_seconds([p.pid for p in procs]), 0.5, kind)
                finally:
                    for proc in procs:
                        vs_java.stop(proc, grace=2.0)
                self.assertTrue(all(p.poll() is not None for p in procs))
        self.assertEqual(vs_java.start_busy("quiet", Path(".")), [])

    def test_waiting_for_a_core_is_counted(self) -> None:
        """More spinning processes than cores: each spends part of its time runnable but not running,
        and the run delay summed over their threads says so (an ended process adds nothing)."""
        with tempfile.TemporaryDirectory() as tmp:
            procs = vs_java.start_busy(f"spin{2 * (os.cpu_count() or 1) + 1}", Path(tmp))
            try:
                pids = [p.pid for p in procs]
                before = vs_java.wait_seconds(pids)
                deadline = time.monotonic() + 30
                while vs_java.wait_seconds(pids) - before < 0.5 and time.monotonic() < deadline:
                    time.sleep(0.2)
                self.assertGreaterEqual(vs_java.wait_seconds(pids) - before, 0.5)
            finally:
                for proc in procs:
                    vs_java.stop(proc, grace=2.0)
            self.assertEqual(vs_java.wait_seconds(pids), 0.0)


class CpuGroupsTest(unittest.TestCase):
    """``--cgroups``: which hierarchy it takes, and that a started command runs inside its group.

    The trees are plain directories laid out as cgroupfs lays them out, so this runs without root;
    the kernel's side (a pid written to ``cgroup.procs`` moves that process) is the kernel's.
    """

    def test_v2_when_the_unified_root_lists_cpu(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            (base / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
            groups = vs_java.CpuGroups.find(base)
            self.assertEqual((groups.root, groups.v2), (base, True))
            groups.create()
            self.assertEqual((base / "cgroup.subtree_control").read_text(), "+cpu")
            self.assertTrue(all(path.is_dir() and path.parent == base for path in groups.dirs.values()))

    def test_v1_cpu_hierarchy_otherwise(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            (base / "cgroup.controllers").write_text("memory pids\n")  # a unified root without cpu
            (base / "cpu").mkdir()
            (base / "cpu" / "cgroup.procs").write_text("")
            groups = vs_java.CpuGroups.find(base)
            self.assertEqual((groups.root, groups.v2), (base / "cpu", False))
            groups.create()
            self.assertFalse((base / "cpu" / "cgroup.subtree_control").exists())
            self.assertEqual(sorted(p.name.rsplit("-", 1)[1] for p in (base / "cpu").iterdir() if p.is_dir()),
                             ["background", "clients", "server"])
            groups.remove()
            self.assertFalse(any(p.is_dir() for p in (base / "cpu").iterdir()))

    def test_no_cpu_controller_is_refused(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "cgroup.controllers").write_text("memory pids\n")
            with self.assertRaisesRegex(RuntimeError, "^--cgroups: no cpu controller under "):
                vs_java.CpuGroups.find(Path(tmp))

    def test_a_command_writes_its_own_pid_to_its_group_then_runs(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            (base / "cpu").mkdir()
            (base / "cpu" / "cgroup.procs").write_text("")
            groups = vs_java.CpuGroups.find(base)
            groups.create()
            proc = subprocess.Popen(groups.wrap("clients", [sys.executable, "-c", "import os; print(os.getpid())"]),
                                    stdout=subprocess.PIPE, text=True)
            out, _ = proc.communicate(timeout=30)
            self.assertEqual(proc.returncode, 0)
            self.assertEqual(int(out), proc.pid)  # the shell became the command: the pid the benchmark watches
            self.assertEqual((groups.dirs["clients"] / "cgroup.procs").read_text().strip(), str(proc.pid))
            self.assertFalse((groups.dirs["server"] / "cgroup.procs").exists())


class AnswerOnlyTest(unittest.TestCase):
    """The ceiling's listener, a real process: registered with its NameServer, sends answered at once."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.server = vs_java.start_answer_only(Path(self.tmp.name))
        self.addCleanup(self.server.close)

    def test_route_sends_and_count(self) -> None:
        from rmqtx.remoting.codes import ONEWAY_FLAG, RequestCode, ResponseCode, SerializeType
        from rmqtx.remoting.command import RemotingCommand

        self.assertTrue(vs_java.route_served(self.server.namesrv, vs_java.TOPIC))
        conn = vs_java.Conn(self.server.broker)
        self.addCleanup(conn.close)
        fields = {"a": "P", "b": vs_java.TOPIC, "c": "TBW102", "d": "8", "e": "3", "f": "0", "g": "0", "h": "0",
                  "i": "", "j": "0", "k": "false", "m": "false"}
        for kind in (SerializeType.ROCKETMQ, SerializeType.JSON):
            request = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=b"x" * 64,
                                      serialize_type=kind, opaque=4242 + int(kind))
            conn.sock.sendall(vs_java.encode_frame(request))
            answer = vs_java.decode_frame_payload(conn._read(int.from_bytes(conn._read(4), "big")))
            self.assertEqual((answer.code, answer.opaque, answer.is_response), (ResponseCode.SUCCESS, request.opaque, True))
            self.assertEqual(answer.ext_fields["queueId"], "0")
        oneway = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, flag=ONEWAY_FLAG,
                                 serialize_type=SerializeType.ROCKETMQ, opaque=7)
        conn.sock.sendall(vs_java.encode_frame(oneway))  # no answer; the GET_MAX_OFFSET below is answered next
        self.assertEqual(vs_java.max_offsets(conn), 3)
        self.assertEqual(conn.call(RequestCode.HEART_BEAT, {}).code, ResponseCode.SUCCESS)
