"""POP consumption against a real standalone: pop, ack, batch ack, change invisible time, revive to the
pop retry topic, long polling, orderly pop, DLQ, restart, request modes (wire requests as 5.x sends them)."""

from __future__ import annotations

import threading
import time
import unittest

import orjson

from rmqtx.client.message import decode_messages
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import Standalone, call, wait_for
from tests.security.test_hostile_bodies import Conn
from tests.pop.wire import ack, batch_ack, change_invisible, pop, pop_until


def max_offset(server: Standalone, topic: str, queue_id: int = 0) -> int:
    r = call(server.broker, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}))
    return int((r.ext_fields or {}).get("offset", -1)) if r.code == 0 else -1


class PopTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = Standalone({"reviveInterval": "100"}).start()
        self.addCleanup(self.server.close)

    def send(self, topic: str, bodies: list[str], queues: int = 1) -> None:
        for i, body in enumerate(bodies):
            self.server.send_to_queue(topic, i % queues, body)

    def test_pop_all_queues_ack_and_revive(self) -> None:
        s = self.server
        s.create_topic("PopT", 2)
        self.send("PopT", [f"m{i}" for i in range(6)], queues=2)
        r, msgs = pop(s, "G1", "PopT", invisible_ms=1500)
        self.assertEqual(r.code, ResponseCode.SUCCESS)
        self.assertEqual(sorted(m.body for m in msgs), [f"m{i}".encode() for i in range(6)])
        ext = r.ext_fields
        self.assertEqual(sorted(ext["startOffsetInfo"].split(";")), ["0 0 0", "0 1 0"])
        self.assertEqual(sorted(ext["msgOffsetInfo"].split(";")), ["0 0 0,1,2", "0 1 0,1,2"])
        self.assertEqual(ext["invisibleTime"], "1500")
        self.assertIn(int(ext["reviveQid"]), range(8))
        kept = {b"m1", b"m4"}
        for m in msgs:
            if m.body not in kept:
                self.assertEqual(ack(s, "G1", m).code, ResponseCode.SUCCESS)
        r, again = pop(s, "G1", "PopT")
        self.assertEqual((r.code, again), (ResponseCode.POLLING_TIMEOUT, []))  # the offsets moved on at pop time
        back = pop_until(s, "G1", "PopT", 2, timeout=20, invisible_ms=1500)
        self.assertEqual({m.body for m in back}, kept)
        for m in back:
            self.assertEqual((m.topic, m.reconsume_times), ("PopT", 1))
            self.assertEqual(m.properties["POP_CK"].split(" ")[4], "1")  # popped from %RETRY%G1_PopT
            self.assertIn("1ST_POP_TIME", m.properties)
            self.assertEqual(ack(s, "G1", m).code, ResponseCode.SUCCESS)
        r, late = pop(s, "G1", "PopT", poll_ms=3000)
        self.assertEqual(late, [], "acked messages came back")

    def test_batch_ack_and_change_invisible_time(self) -> None:
        s = self.server
        s.create_topic("PopB", 1)
        self.send("PopB", ["a", "b", "c", "d"])
        _, msgs = pop(s, "GB", "PopB", invisible_ms=60000)
        self.assertEqual([m.body for m in msgs], [b"a", b"b", b"c", b"d"])
        self.assertEqual(batch_ack(s, "GB", msgs[:2]).code, ResponseCode.SUCCESS)
        changed = change_invisible(s, "GB", msgs[2], 1000)
        self.assertEqual(changed.code, ResponseCode.SUCCESS)
        self.assertEqual(changed.ext_fields["invisibleTime"], "1000")
        self.assertGreaterEqual(int(changed.ext_fields["popTime"]), int(msgs[2].properties["POP_CK"].split(" ")[1]))
        back = pop_until(s, "GB", "PopB", 1, timeout=15, invisible_ms=60000)
        self.assertEqual([(m.body, m.reconsume_times) for m in back], [(b"c", 1)])
        _, more = pop(s, "GB", "PopB", poll_ms=2000)
        self.assertEqual(more, [], "d is still invisible for a minute; a and b were acked")

    def test_long_polling_answers_on_arrival(self) -> None:
        s = self.server
        s.create_topic("PopL", 2)
        timer = threading.Timer(0.5, s.send_to_queue, ("PopL", 1, "late"))
        timer.start()
        self.addCleanup(timer.cancel)
        started = time.time()
        r, msgs = pop(s, "GL", "PopL", poll_ms=15000)
        self.assertEqual([m.body for m in msgs], [b"late"])
        self.assertLess(time.time() - started, 10, "the held pop was not woken by the arrival")
        r, none = pop(s, "GL", "PopL", poll_ms=500)
        self.assertEqual((r.code, none), (ResponseCode.POLLING_TIMEOUT, []))

    def test_orderly_pop_locks_the_queue_until_acked(self) -> None:
        s = self.server
        s.create_topic("PopO", 1)
        self.send("PopO", ["o0", "o1", "o2"])
        r, first = pop(s, "GO", "PopO", queue_id=0, order=True, max_nums=2, invisible_ms=1500)
        self.assertEqual([m.body for m in first], [b"o0", b"o1"])
        self.assertEqual(r.ext_fields["reviveQid"], "999")
        self.assertEqual(r.ext_fields["orderCountInfo"], "0 0 0")
        r, blocked = pop(s, "GO", "PopO", queue_id=0, order=True, max_nums=2)
        self.assertEqual(blocked, [], "a locked queue gave out more")
        deadline = time.time() + 15
        again: list = []
        while not again and time.time() < deadline:  # same messages once the invisible time is over
            r, again = pop(s, "GO", "PopO", queue_id=0, order=True, max_nums=2, invisible_ms=60000, poll_ms=1000)
        self.assertEqual([m.body for m in again], [b"o0", b"o1"])
        self.assertIn("0 qo0%0 1", r.ext_fields["orderCountInfo"].split(";"))
        # a shorter invisible time for o0 alone: o1 is still invisible for its 60 s, so the queue stays locked
        self.assertEqual(change_invisible(s, "GO", again[0], 300).code, ResponseCode.SUCCESS)
        r, held = pop(s, "GO", "PopO", queue_id=0, order=True, max_nums=2, poll_ms=800)
        self.assertEqual(held, [], "unlocked while o1 was still invisible")
        for m in again:
            self.assertEqual(ack(s, "GO", m).code, ResponseCode.SUCCESS)
        r, last = pop(s, "GO", "PopO", queue_id=0, order=True, poll_ms=3000)
        self.assertEqual([m.body for m in last], [b"o2"])

    def test_dead_letter_after_the_groups_retry_max_times(self) -> None:
        s = self.server
        s.create_topic("PopD", 1)
        body = orjson.dumps({"groupName": "GD", "retryMaxTimes": 1, "consumeEnable": True})
        r = call(s.broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body=body))
        self.assertEqual(r.code, ResponseCode.SUCCESS)
        self.send("PopD", ["doomed"])
        _, msgs = pop(s, "GD", "PopD", invisible_ms=1000)
        self.assertEqual(len(msgs), 1)
        back = pop_until(s, "GD", "PopD", 1, timeout=15, invisible_ms=1000)
        self.assertEqual(back[0].reconsume_times, 1)
        wait_for(lambda: max_offset(s, "%DLQ%GD") == 1, 15, "the message in %DLQ%GD")
        _, none = pop(s, "GD", "PopD", poll_ms=1500)
        self.assertEqual(none, [])

    def test_restart_keeps_pending_checkpoints(self) -> None:
        s = self.server
        s.create_topic("PopR", 1)
        self.send("PopR", ["acked", "pending"])
        _, msgs = pop(s, "GR", "PopR", invisible_ms=4000)
        self.assertEqual(ack(s, "GR", msgs[0]).code, ResponseCode.SUCCESS)
        self.assertTrue(s.stop(), s.log())
        s.start()
        back = pop_until(s, "GR", "PopR", 1, timeout=25, invisible_ms=60000)
        self.assertEqual([(m.body, m.reconsume_times) for m in back], [(b"pending", 1)])
        _, none = pop(s, "GR", "PopR", poll_ms=1500)
        self.assertEqual(none, [], "the acked message came back after the restart")

    def test_restart_does_not_revive_twice(self) -> None:
        """A checkpoint revived behind an older pending one (which holds the revive offset back) stays revived."""
        s = Standalone({"reviveInterval": "100", "reviveQueueNum": "1"}).start()  # both checkpoints in one revive queue
        self.addCleanup(s.close)
        s.create_topic("PopR2", 1)
        for body in ("slow", "quick"):
            s.send_to_queue("PopR2", 0, body)
        _, slow = pop(s, "GR2", "PopR2", max_nums=1, invisible_ms=120000)
        _, quick = pop(s, "GR2", "PopR2", max_nums=1, invisible_ms=500)
        self.assertEqual([m.body for m in slow + quick], [b"slow", b"quick"])
        back = pop_until(s, "GR2", "PopR2", 1, timeout=15, invisible_ms=120000)
        self.assertEqual([(m.body, m.reconsume_times) for m in back], [(b"quick", 1)])
        self.assertEqual(ack(s, "GR2", back[0]).code, ResponseCode.SUCCESS)
        self.assertTrue(s.stop(), s.log())
        s.start()
        _, again = pop(s, "GR2", "PopR2", poll_ms=2500)
        self.assertEqual(again, [], "a checkpoint was revived again after the restart")

    def test_peek_notification_and_polling_info(self) -> None:
        s = self.server
        s.create_topic("PopN", 2)

        def ask(code: int, **fields) -> RemotingCommand:
            base = {"consumerGroup": "GN", "topic": "PopN", "queueId": -1}
            return call(s.broker, RemotingCommand.request(code, {**base, **fields}), timeout=15)

        note = ask(RequestCode.NOTIFICATION, pollTime=0, bornTime=int(time.time() * 1000))
        self.assertEqual((note.code, note.ext_fields["hasMsg"]), (ResponseCode.SUCCESS, "false"))
        s.send_to_queue("PopN", 1, "seen")
        note = ask(RequestCode.NOTIFICATION, pollTime=0, bornTime=int(time.time() * 1000))
        self.assertEqual(note.ext_fields["hasMsg"], "true")
        for _ in range(2):  # a peek moves nothing
            peeked = ask(RequestCode.PEEK_MESSAGE, maxMsgNums=32)
            self.assertEqual(peeked.code, ResponseCode.SUCCESS)
            self.assertEqual([m.body for m in decode_messages(peeked.body)], [b"seen"])
        _, msgs = pop(s, "GN", "PopN")
        self.assertEqual([m.body for m in msgs], [b"seen"])
        self.assertEqual(ask(RequestCode.PEEK_MESSAGE, maxMsgNums=32).code, ResponseCode.PULL_NOT_FOUND)
        held: list = []
        waiter = threading.Thread(target=lambda: held.append(pop(s, "GN", "PopN", queue_id=0, poll_ms=10000)))
        waiter.start()
        self.addCleanup(waiter.join, 15)
        polling = lambda: ask(RequestCode.POLLING_INFO, queueId=0).ext_fields["pollingNum"]  # noqa: E731
        wait_for(lambda: polling() == "1", 5, "the held pop counted by POLLING_INFO")
        s.send_to_queue("PopN", 0, "wakes")
        waiter.join(10)
        self.assertEqual([m.body for m in held[0][1]], [b"wakes"])
        self.assertEqual(polling(), "0")

    def test_query_assignment_balances_the_group(self) -> None:
        """PULL: the group's members split the queues (AVG); POP with popShareQueueNum 0: each pops all (queueId -1)."""
        s = self.server
        s.create_topic("PopQ", 4)
        members = []
        for cid in ("127.0.0.1@a", "127.0.0.1@b"):
            conn = Conn(s.broker)
            self.addCleanup(conn.close)
            data = {"clientID": cid, "producerDataSet": [], "consumerDataSet": [{
                "groupName": "GQ", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False, "subscriptionDataSet": [
                    {"topic": "PopQ", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1, "expressionType": "TAG",
                     "classFilterMode": False}]}]}
            self.assertEqual(conn.call(RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(data))).code, 0)
            members.append((cid, conn))

        def assigned(cid: str, conn: Conn) -> list[tuple[int, str]]:
            body = orjson.dumps({"topic": "PopQ", "consumerGroup": "GQ", "clientId": cid, "messageModel": "CLUSTERING",
                                 "strategyName": "AVG"})
            r = conn.call(RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, None, body=body))
            return sorted((a["messageQueue"]["queueId"], a["mode"]) for a in orjson.loads(r.body)["messageQueueAssignments"])

        self.assertEqual([assigned(*m) for m in members], [[(0, "PULL"), (1, "PULL")], [(2, "PULL"), (3, "PULL")]])
        body = orjson.dumps({"topic": "PopQ", "consumerGroup": "GQ", "mode": "POP", "popShareQueueNum": 0})
        self.assertEqual(call(s.broker, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, None, body=body)).code, 0)
        self.assertEqual([assigned(*m) for m in members], [[(-1, "POP")], [(-1, "POP")]])

    def test_request_mode_is_set_and_persisted(self) -> None:
        s = self.server
        s.create_topic("PopM", 2)

        def set_mode(topic: str, mode: str = "POP") -> RemotingCommand:
            body = orjson.dumps({"topic": topic, "consumerGroup": "GM", "mode": mode, "popShareQueueNum": 0})
            return call(s.broker, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, None, body=body))

        def all_modes() -> dict:
            r = call(s.broker, RemotingCommand.request(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE))
            self.assertEqual((r.code, r.remark), (ResponseCode.SUCCESS, None))
            return orjson.loads(r.body)

        self.assertEqual(all_modes(), {"messageRequestModeMap": {}})
        # POP_ROLLBACK (mqadmin exportPopRecord): nothing in a RocksDB POP store to move, as Java with it off
        r = call(s.broker, RemotingCommand.request(RequestCode.POP_ROLLBACK))
        self.assertEqual((r.code, r.remark, r.ext_fields, r.body), (ResponseCode.SUCCESS, None, None, b""))
        self.assertEqual(set_mode("%RETRY%GM").code, ResponseCode.NO_PERMISSION)
        self.assertEqual(set_mode("NoSuchTopic").code, ResponseCode.TOPIC_NOT_EXIST)
        self.assertEqual(set_mode("PopM").code, ResponseCode.SUCCESS)
        path = s.root / "store" / "config" / "messageRequestMode.json"
        wait_for(lambda: path.exists() and b'"POP"' in path.read_bytes(), 5, "messageRequestMode.json written")
        query = orjson.dumps({"topic": "PopM", "consumerGroup": "GM", "clientId": "c1", "messageModel": "BROADCASTING",
                              "strategyName": "AVG"})
        r = call(s.broker, RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, None, body=query))
        assigned = orjson.loads(r.body)["messageQueueAssignments"]
        self.assertEqual(sorted((a["messageQueue"]["queueId"], a["mode"]) for a in assigned), [(0, "POP"), (1, "POP")])
        self.assertTrue(s.stop(), s.log())
        s.start()
        r = call(s.broker, RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, None, body=query))
        self.assertEqual({a["mode"] for a in orjson.loads(r.body)["messageQueueAssignments"]}, {"POP"})
        self.assertEqual(all_modes(), {"messageRequestModeMap": {"PopM": {"GM": {
            "consumerGroup": "GM", "mode": "POP", "popShareQueueNum": 0, "topic": "PopM"}}}})


if __name__ == "__main__":
    unittest.main()
