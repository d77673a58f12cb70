"""Many queues on a real broker process: consume queue files are made lazily, off the reactor, after
the first message has been answered; a kill -9 while they are still being made loses nothing; the
files mapped (a descriptor and a map area each) stay under mappedConsumeQueueFilesMax."""

from __future__ import annotations

import os

from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.store.consume_queue import UNIT, UNIT_SIZE
from rmqtx.store.mapped_file import file_name
from testkit.standalone import Standalone
from tests.broker.wire import pull, send

TOPICS = 40
QUEUES = 8
CQ_FILE_SIZE = 300000 * UNIT_SIZE  # the 4.x default, as Apache's tools expect it
MAPPED_MAX = 64  # well under the TOPICS * QUEUES files


def topics() -> list[str]:
    return [f"ManyQ_{i:03d}" for i in range(TOPICS)]


def body_of(topic: str, queue_id: int) -> bytes:
    return f"{topic}/{queue_id}".encode()


class ManyQueuesKillTest(unittest.TestCase):
    """Topics made, one message to each queue, kill -9 at once, restart: every message reads back."""

    timeout = 180

    def setUp(self) -> None:
        self.server = Standalone({"mappedConsumeQueueFilesMax": str(MAPPED_MAX)})
        self.addCleanup(self.server.close)
        self.server.start(timeout=60)
        self.client = RemotingClient()

    async def _send_all(self) -> None:
        for topic in topics():
            self.server.create_topic(topic, QUEUES)
        sends = [defer.ensureDeferred(send(self.client, self.server.broker, topic, body_of(topic, q), queue_id=q))
                 for topic in topics() for q in range(QUEUES)]
        answers = await defer.gatherResults(sends, consumeErrors=True)
        self.assertEqual({a.code for a in answers}, {ResponseCode.SUCCESS})
        self.assertEqual(sorted(int(a.ext_fields["queueOffset"]) for a in answers), [0] * (TOPICS * QUEUES))

    async def _read_back(self) -> None:
        client = RemotingClient()
        try:
            for topic in topics():
                for q in range(QUEUES):
                    resp, records = await pull(client, self.server.broker, topic, q, 0)
                    self.assertEqual(resp.code, ResponseCode.SUCCESS, f"{topic}/{q}: {resp.remark}")
                    self.assertEqual([r.body for r in records], [body_of(topic, q)], f"{topic}/{q}")
                    got = await client.invoke(self.server.broker, RemotingCommand.request(
                        RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": q}))
                    self.assertEqual(got.ext_fields["offset"], "1", f"{topic}/{q}")
        finally:
            await client.close()

    def _open_fds(self) -> int:
        assert self.server.proc is not None
        return len(os.listdir(f"/proc/{self.server.proc.pid}/fd"))

    def _mapped_cq_files(self) -> int:
        assert self.server.proc is not None
        with open(f"/proc/{self.server.proc.pid}/maps") as fh:
            return sum(1 for line in fh if f"{os.sep}consumequeue{os.sep}" in line)

    async def _mapped_settled(self) -> int:
        """Mapped queue files once the broker's file thread has closed what the bound evicted
        (it closes evicted mappings off the reactor, soon after): polled for up to 5 s."""
        from twisted.internet import reactor, task

        for _ in range(50):
            mapped = self._mapped_cq_files()
            if mapped <= MAPPED_MAX:
                return mapped
            await task.deferLater(reactor, 0.1, lambda: None)
        return mapped

    def _check_layout(self) -> None:
        """Apache's layout: consumequeue/TOPIC/QUEUE/00000000000000000000 of the configured size, one unit."""
        root = self.server.root / "store" / "consumequeue"
        for topic in topics():
            for q in range(QUEUES):
                path = root / topic / str(q) / file_name(0)
                self.assertEqual(path.stat().st_size, CQ_FILE_SIZE, str(path))
                with open(path, "rb") as fh:
                    first, second = fh.read(UNIT_SIZE), fh.read(UNIT_SIZE)
                offset, size, _ = UNIT.unpack(first)
                self.assertTrue(offset >= 0 and size > 0, f"{path}: first unit {UNIT.unpack(first)}")
                self.assertEqual(second, bytes(UNIT_SIZE), f"{path}: a second unit")

    async def _scenario(self) -> None:
        fds_before = self._open_fds()
        await self._send_all()
        await self.client.close()
        assert self.server.proc is not None
        self.server.proc.kill()  # at once: many queue files are still being made
        self.server.proc.wait()
        self.server.start(timeout=60)
        self.assertLessEqual(await self._mapped_settled(), MAPPED_MAX)  # recovery dispatched again: bounded
        await self._read_back()
        # every queue was read: at most MAPPED_MAX files stay mapped, each with one descriptor
        self.assertLessEqual(await self._mapped_settled(), MAPPED_MAX)
        self.assertLessEqual(self._open_fds() - fds_before, MAPPED_MAX + 16)
        self.assertTrue(self.server.stop(), self.server.log())
        self._check_layout()
        self.server.start(timeout=60)  # and once more after the clean stop
        self.assertEqual(self._mapped_cq_files(), 0)  # recovery read the files' ends, mapped none
        await self._read_back()
        self.assertLessEqual(await self._mapped_settled(), MAPPED_MAX)

    def test_kill_while_queue_files_are_made(self):
        return defer.ensureDeferred(self._scenario())
