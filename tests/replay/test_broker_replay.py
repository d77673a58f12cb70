"""Every captured client->broker exchange replayed to rmqtx in capture order, each answer compared with Java's.

One broker runs Java's ``broker-wire.conf`` (paths and ports replaced) through both capture sessions,
as Java's did. Differences allowed are exactly those of tests/replay/normalize.py.
"""

from __future__ import annotations

from collections import Counter

from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.common.topic_config import TopicConfig
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.serializer import decode_frame
from tests.broker.inprocess import InProcessCluster
from tests.client.support import wait_until
from tests.fixtures import FIXTURES, frame_files, records
from tests.namesrv.helpers import connect
from tests.replay.capture import SESSION_1, SESSION_2, between_sessions
from tests.replay.cli import compare_output, mqadmin_commands, rmqadmin, step_of
from tests.replay.normalize import NOT_REPLAYED
from tests.replay.runner import Replayer, broker_exchanges

#: broker-wire.conf keys the test replaces: where the store lives, which ports, which NameServer.
LOCAL = {"storePathRootDir", "storePathCommitLog", "listenPort", "namesrvAddr"}


def wire_conf() -> dict[str, str]:
    """Java's broker-wire.conf without the settings that name the capture machine's paths and ports."""
    conf = {}
    for line in (FIXTURES / "broker-wire.conf").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = (part.strip() for part in line.split("=", 1))
            if key not in LOCAL:
                conf[key] = value
    return conf


def captured_codes() -> Counter:
    """Every request code sent in any capture (client or broker side), with its file."""
    codes: Counter = Counter()
    for name in frame_files():
        for rec in records(name):
            decoded = rec.get("decoded")
            if isinstance(decoded, dict) and rec.get("hex") and decoded.get("rpc") in ("request", "oneway"):
                codes[decoded.get("code")] += 1
    return codes


class CoverageTest(unittest.TestCase):
    def test_every_captured_request_code_is_replayed_or_listed(self) -> None:
        replayed = {ex.code for name in SESSION_1 + SESSION_2 for ex in broker_exchanges(name)}
        missing = {code for code in captured_codes() if code is not None} - replayed - set(NOT_REPLAYED)
        self.assertEqual(missing, set(), "captured request codes neither replayed nor listed in NOT_REPLAYED")
        self.assertEqual(set(NOT_REPLAYED) & replayed, set(), "listed as not replayed, but replayed")


class BrokerReplayTest(unittest.TestCase):
    timeout = 180

    def setUp(self) -> None:
        self.pending_cli = mqadmin_commands()
        self.cli_compared: list[str] = []
        self.cli_diffs: list[str] = []
        self.cluster = InProcessCluster(**wire_conf())
        self.cluster.start()
        self.addCleanup(lambda: defer.ensureDeferred(self.cluster.stop()))

    def _delays_delivered(self) -> bool:
        ctx = self.cluster.broker.ctx
        return all(ctx.schedule.offsets.get(level, 0) >= ctx.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", level - 1)
                   for level in range(1, ctx.schedule.max_level + 1))

    async def _replay(self) -> Replayer:
        ctx = self.cluster.broker.ctx
        # what the Java broker held before session 1: T_fix, made by mqadmin with 2 queues
        ctx.topics.put(TopicConfig("T_fix", 2, 2))
        await ctx.registrar.register_all()
        replayer = Replayer(int(self.cluster.broker_addr.rsplit(":", 1)[1]))
        for name in SESSION_1 + ["between sessions"] + SESSION_2:
            # Java's scenarios were seconds apart: messages delayed by one had been delivered by the next
            await wait_until(self._delays_delivered, timeout=20)
            if name == "between sessions":
                await self._send_between_sessions()
                continue
            await replayer.replay(name, self._run_mqadmin_commands if name == "scenario-admin.jsonl" else None)
        return replayer

    async def _run_mqadmin_commands(self, step: str) -> None:
        """Once the frames of one mqadmin command are replayed: rmqadmin with the same command line, and
        any captured command without broker frames (topicList) that came before it."""
        while self.pending_cli:
            cmd = self.pending_cli.pop(0)
            code, out, err = await rmqadmin(cmd, self.cluster.namesrv_addr, self.cluster.broker_addr)
            self.cli_compared.append(cmd["argv"][1])
            self.cli_diffs += [f"rmqadmin {step_of(cmd)}: {d}" for d in compare_output(cmd, code, out, self.cluster.broker_addr)]
            if err:
                self.cli_diffs.append(f"rmqadmin {step_of(cmd)}: stderr {err!r}")
            if step_of(cmd) == step:
                return

    async def _send_between_sessions(self) -> None:
        conn = await connect(int(self.cluster.broker_addr.rsplit(":", 1)[1]))
        try:
            for frame in between_sessions():
                answer = decode_frame(await conn.call_raw(frame))
                self.assertEqual(answer.code, 0, answer.remark)
        finally:
            await conn.close()

    async def test_every_capture_replays_like_java(self) -> None:
        replayer = await self._replay()
        report = replayer.report
        self.assertEqual(report.diffs, [], "\n" + "\n".join(report.diffs))
        # nothing passes by comparing little: every broker code of the captures was answered and compared
        for pair in [(310, 0), (320, 0), (34, 0), (35, 0), (38, 0), (14, 0), (11, 0), (11, 19), (41, 0), (42, 0),
                     (36, 0), (12, 0), (33, 0), (29, 0), (30, 0), (31, 0), (32, 0), (17, 0), (202, 0), (208, 0),
                     (200, 0), (26, 0), (215, 0), (28, 0), (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, 40),
                     (RequestCode.CHECK_TRANSACTION_STATE, 39)]:
            self.assertIn(pair, report.compared)
        answered = sum(1 for name in SESSION_1 + SESSION_2 for ex in broker_exchanges(name)
                       if ex.pushed or (ex.answer is not None and not ex.cmd.is_oneway))
        self.assertEqual(sum(report.compared.values()) + len(report.races), answered)
        self.assertGreaterEqual(answered, 138)
        self.assertEqual(set(report.oneway), {15, 37, 310})
        self.assertEqual(len(report.races), 1)
        # rmqadmin printed what mqadmin printed, for every captured command
        self.assertEqual(self.cli_diffs, [], "\n" + "\n".join(self.cli_diffs))
        self.assertEqual(self.cli_compared, [cmd["argv"][1] for cmd in mqadmin_commands()])
