"""Controller mode's visibility gate on a real store: puts reach consume queues only once the confirm offset
passes them, a crash takes back what recovery dispatched past the persisted confirm offset, a clean stop does not."""
from __future__ import annotations

import os

from twisted.trial import unittest

from rmqtx.store.replica import ReplicaAppender

from .helpers import TempStore, msg, put_sync


class ConfirmGate(unittest.TestCase):
    def setUp(self) -> None:
        self.ts = TempStore()
        self.addCleanup(self.ts.tmp.cleanup)
        self.confirm = [0]

    def _gate(self, store) -> None:  # type: ignore[no-untyped-def]
        store.set_confirm_gate(lambda: self.confirm[0])

    def _bodies(self, store) -> list[bytes]:  # type: ignore[no-untyped-def]
        from rmqtx.store.record import decode_record

        return [decode_record(raw, 0).body for raw in store.get_message("T", 0, 0, 32).messages]

    def _put(self, store, n: int) -> list:  # type: ignore[no-untyped-def]
        return [put_sync(store, msg(body=f"m{i}".encode())) for i in range(n)]

    def test_puts_wait_for_the_confirm_offset(self) -> None:
        store = self.ts.store
        self._gate(store)
        arrived: list[tuple[str, int, int]] = []
        store.add_arrival_listener(lambda t, q, m: arrived.append((t, q, m)))
        results = self._put(store, 3)
        self.assertEqual([r.queue_offset for r in results], [0, 1, 2])  # offsets are still taken at write time
        self.assertEqual(store.get_max_offset_in_queue("T", 0), 0)
        self.assertEqual(arrived, [])
        self.confirm[0] = results[0].wrote_offset + results[0].wrote_bytes
        store.release_confirmed()
        self.assertEqual(store.get_max_offset_in_queue("T", 0), 1)
        self.assertEqual(arrived, [("T", 0, 1)])
        self.confirm[0] = store.max_phy_offset
        store.release_confirmed()
        self.assertEqual(store.get_max_offset_in_queue("T", 0), 3)
        self.assertEqual(self._bodies(store), [b"m0", b"m1", b"m2"])
        store.shutdown()

    def test_crash_takes_back_what_was_not_confirmed(self) -> None:
        store = self.ts.store
        self._gate(store)
        results = self._put(store, 3)
        self.confirm[0] = results[0].wrote_offset + results[0].wrote_bytes
        store.release_confirmed()
        store.shutdown()
        open(store.abort_path, "wb").close()  # as if killed: recovery dispatches the whole log again
        again = self.ts.open()
        self.addCleanup(again.shutdown)
        self.confirm[0] = 0
        self._gate(again)
        self.assertEqual(again.recover_confirm_offset(), results[0].wrote_offset + results[0].wrote_bytes)
        self.assertEqual(again.get_max_offset_in_queue("T", 0), 1)
        self.assertEqual(self._bodies(again), [b"m0"])
        self.confirm[0] = again.max_phy_offset  # alone in its sync-state set: everything is confirmed
        again.gate.to_master(lambda: ReplicaAppender(again))
        self.assertEqual(self._bodies(again), [b"m0", b"m1", b"m2"])
        more = self._put(again, 1)
        self.assertEqual(more[0].queue_offset, 3)
        self.confirm[0] = again.max_phy_offset
        again.release_confirmed()
        self.assertEqual(again.get_max_offset_in_queue("T", 0), 4)

    def test_clean_stop_keeps_everything(self) -> None:
        store = self.ts.store
        self._gate(store)
        self._put(store, 2)
        store.shutdown()
        self.assertFalse(os.path.exists(store.abort_path))
        again = self.ts.open()
        self.addCleanup(again.shutdown)
        self._gate(again)
        self.assertIsNone(again.recover_confirm_offset())
        self.assertEqual(self._bodies(again), [b"m0", b"m1"])

    def test_no_gate_dispatches_at_once(self) -> None:
        store = self.ts.store
        self._put(store, 2)
        self.assertEqual(store.get_max_offset_in_queue("T", 0), 2)
        self.assertIsNone(store.recover_confirm_offset())
        store.shutdown()

    def test_a_torn_replicated_tail_does_not_block_a_new_master(self) -> None:
        from rmqtx.store.replica import read_for_transfer

        source = TempStore()
        self.addCleanup(source.close)
        sent = self._put(source.store, 2)
        data = bytes(read_for_transfer(source.store, 0, 1 << 20) or b"")
        store = self.ts.store
        self.addCleanup(store.shutdown)
        self._gate(store)
        store.set_slave(True)
        appender = ReplicaAppender(store)
        self.assertIsNone(appender.append(0, data[:sent[1].wrote_offset + 10]))  # the second record cut short
        self.confirm[0] = store.max_phy_offset
        store.release_confirmed()
        self.assertEqual(self._bodies(store), [b"m0"])
        store.set_slave(False)
        store.gate.to_master(lambda: ReplicaAppender(store))  # the reader cannot pass the torn record
        self.assertIsNone(store.gate.reader)
        put_sync(store, msg(body=b"new"))
        self.confirm[0] = store.max_phy_offset
        store.release_confirmed()
        self.assertEqual(store.get_max_offset_in_queue("T", 0), 2)
