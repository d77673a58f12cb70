"""SYNC_FLUSH sends through the broker's send path: answered only once the group commit has synced them."""

from __future__ import annotations

import time

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from rmqtx.remoting.codes import ResponseCode
from rmqtx.store.record import decode_offset_msg_id
from testkit.hotpath import HotPath


class SyncFlushSend(unittest.TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.hot = HotPath(flushDiskType="SYNC_FLUSH")

    def tearDown(self):
        return self.hot.close()

    async def _acknowledged_means_synced(self) -> None:
        count = 96
        for data in self.hot.send_reads(count):
            self.hot.feed(data)
        self.assertEqual([r for r in self.hot.answers() if r.is_response], [])  # none before the sync
        queue = self.hot.broker.ctx.store.commitlog.queue
        got = []
        deadline = time.time() + 30
        while len(got) < count and time.time() < deadline:
            for resp in self.hot.answers():
                if resp.is_response:
                    got.append((resp, queue.flushed_where))  # what was synced when it was answered
            if len(got) < count:
                await task.deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(len(got), count)
        self.assertEqual(sorted(r.opaque for r, _ in got), list(range(count)))
        for resp, synced in got:
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
            phys = decode_offset_msg_id(resp.ext_fields["msgId"])[2]
            self.assertGreater(synced, phys)  # the record's start is below what was synced
        self.assertGreater(self.hot.broker.ctx.store.flush.sync_count, 0)

    def test_acknowledged_means_synced(self):
        return defer.ensureDeferred(self._acknowledged_means_synced())

    async def _answers_of_a_sync_leave_in_one_write(self) -> None:
        """The group commit releases its sends through FlushService.release_hook (batch_writes): the
        answers one sync releases leave in one write to the connection, not one write each."""
        writes = []
        transport = self.hot.transport
        real = transport.writeSequence

        def counted(parts) -> None:
            writes.append(len(parts))
            real(parts)
        transport.writeSequence = counted
        transport.write = lambda data: counted([data])
        flush = self.hot.broker.ctx.store.flush
        before = flush.sync_count
        count = 96
        for data in self.hot.send_reads(count):  # all in this reactor turn: one group commit
            self.hot.feed(data)
        self.assertEqual(writes, [])
        got = 0
        deadline = time.time() + 30
        while got < count and time.time() < deadline:
            got += sum(r.is_response for r in self.hot.answers())
            if got < count:
                await task.deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(got, count)
        self.assertEqual(sum(writes), count)
        self.assertLessEqual(len(writes), flush.sync_count - before)

    def test_answers_of_a_sync_leave_in_one_write(self):
        return defer.ensureDeferred(self._answers_of_a_sync_leave_in_one_write())
