"""The cluster-consume check: a queue may change hands once in a rebalance, never be read by two members at once."""

from __future__ import annotations

import unittest

from interop.scenarios import cluster_check

MESSAGES = [{"body": f"cluster-{i}", "tags": "", "keys": []} for i in range(6)]
PARAMS = {"members": 2, "messages": MESSAGES}


def events(*reads: tuple[int, int, int]) -> list[dict]:
    """One recv event per (member, queue_id, queue_offset), for the messages in order."""
    return [{"kind": "recv", "body": m["body"], "tags": "", "keys": [], "member": member, "queue_id": qid,
             "queue_offset": off} for m, (member, qid, off) in zip(MESSAGES, reads)]


class ClusterCheckTest(unittest.TestCase):
    def test_disjoint_queues_pass(self) -> None:
        self.assertIsNone(cluster_check(events((0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 2, 0), (1, 3, 0), (1, 3, 1)), PARAMS, None))

    def test_a_queue_handed_over_once_passes(self) -> None:
        self.assertIsNone(cluster_check(events((0, 0, 0), (0, 0, 1), (1, 0, 2), (1, 0, 3), (1, 1, 0), (0, 2, 0)), PARAMS, None))

    def test_a_queue_read_by_both_at_once_fails(self) -> None:
        reason = cluster_check(events((0, 0, 0), (1, 0, 1), (0, 0, 2), (1, 1, 0), (1, 1, 1), (0, 2, 0)), PARAMS, None)
        self.assertEqual(reason, "both members consumed queue(s) [0]")

    def test_without_offsets_the_check_stays_strict(self) -> None:
        evs = events((0, 0, 0), (0, 0, 1), (1, 0, 2), (1, 0, 3), (1, 1, 0), (0, 2, 0))
        for e in evs:
            e["queue_offset"] = None
        self.assertEqual(cluster_check(evs, PARAMS, None), "both members consumed queue(s) [0]")

    def test_a_member_with_nothing_fails(self) -> None:
        self.assertIn("a member got nothing", cluster_check(events(*[(0, i % 4, i) for i in range(6)]), PARAMS, None))
