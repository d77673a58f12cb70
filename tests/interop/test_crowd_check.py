"""The crowd scenario's check: every failure it names fails a cell, and a good crowd passes."""

from __future__ import annotations

import unittest

from interop.scenarios import Context, crowd_build, crowd_check

PARAMS = crowd_build(Context(run="t", namesrv="127.0.0.1:9876", levels=[1.0]))


def good() -> list[dict]:
    """Every spec sent by its producer, received once (member = index % members) and acked by that member."""
    out: list[dict] = []
    for i, m in enumerate(PARAMS["messages"]):
        member = i % PARAMS["members"]
        out.append({"kind": "sent", "body": m["body"], "status": "SEND_OK", "producer": m["producer"], "at": 100.0 + i / 100})
        out.append({"kind": "recv", "body": m["body"], "tags": m["tags"], "keys": m["keys"], "member": member, "at": 100.1 + i / 100})
        out.append({"kind": "acked", "body": m["body"], "member": member, "at": 100.2 + i / 100})
    return out


class CrowdCheckTest(unittest.TestCase):
    def test_shape(self) -> None:
        self.assertEqual(len(PARAMS["messages"]), PARAMS["producers"] * 25)
        self.assertEqual(len({m["body"] for m in PARAMS["messages"]}), len(PARAMS["messages"]))
        self.assertGreaterEqual(PARAMS["invisible"], 10)  # Apache's minimum invisible duration for a receive

    def test_good_crowd_passes(self) -> None:
        self.assertIsNone(crowd_check(good(), PARAMS, None))

    def test_a_redelivery_to_another_member_passes(self) -> None:
        events = good()
        first = events[1]
        events.append(dict(first, member=(first["member"] + 1) % PARAMS["members"], at=130.0))
        events.append({"kind": "acked", "body": first["body"], "member": (first["member"] + 1) % PARAMS["members"], "at": 130.1})
        self.assertIsNone(crowd_check(events, PARAMS, None))

    def test_one_member_only_fails(self) -> None:
        events = [dict(e, member=0) if "member" in e else e for e in good()]
        self.assertIn("only one member", crowd_check(events, PARAMS, None))

    def test_a_missing_send_fails(self) -> None:
        body = PARAMS["messages"][7]["body"]
        events = [e for e in good() if not (e["kind"] == "sent" and e["body"] == body)]
        self.assertIn("sends reported", crowd_check(events, PARAMS, None))

    def test_a_send_reported_by_the_wrong_producer_fails(self) -> None:
        events = good()
        events[0] = dict(events[0], producer=3)
        self.assertIn("reported sent by producer 3", crowd_check(events, PARAMS, None))

    def test_an_undelivered_message_fails(self) -> None:
        body = PARAMS["messages"][30]["body"]
        events = [e for e in good() if not (e["kind"] in ("recv", "acked") and e["body"] == body)]
        self.assertIn("not received", crowd_check(events, PARAMS, None))

    def test_an_unacked_delivery_fails(self) -> None:
        body = PARAMS["messages"][42]["body"]
        events = [e for e in good() if not (e["kind"] == "acked" and e["body"] == body)]
        self.assertIn(f"{body} delivered but never acked", crowd_check(events, PARAMS, None))

    def test_a_body_nobody_sent_fails(self) -> None:
        events = good() + [{"kind": "recv", "body": "stranger", "tags": "TagA", "keys": [], "member": 1, "at": 101.0}]
        self.assertIn("received stranger, which no producer sent", crowd_check(events, PARAMS, None))

    def test_an_error_fails(self) -> None:
        events = good() + [{"kind": "error", "error": "producer 2: boom"}]
        self.assertEqual(crowd_check(events, PARAMS, None), "producer 2: boom")


if __name__ == "__main__":
    unittest.main()
