"""Timer messages (RocketMQ 5.x's TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS) against a real ``twistd rmqstandalone``.

Each message is checked against the time the test knew before sending it: delivered (stored on its
topic) not before its due time, and at most the wheel's precision plus a bound after it.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import time
import unittest

from rmqtx.common.message import parse_properties
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import Standalone, call, wait_for
from testkit.ha import Sender, pull

PRECISION_MS = 100
#: How late a delivery may be beyond the precision on a busy shared 2-core machine.
LATE_BOUND_MS = 1500
CONF = {"timerPrecisionMs": str(PRECISION_MS), "timerRollWindowSlot": "20", "timerMaxDelaySec": "60",
        "mappedFileSizeTimerLog": str(52 * 40), "timerFlushIntervalMs": "200", "recallMessageEnable": "true"}
TOPIC = "T_timer"
QUEUES = 4
ILLEGAL = ("timer message illegal, the delay time should not be bigger than the max delay 60000ms; "
           "or if set del msg, the delay time should be bigger than the current time")


def now_ms() -> int:
    return int(time.time() * 1000)


def recall(addr: str, topic: str, handle: str | None, group: str | None = "P_timer") -> RemotingCommand:
    """RECALL_MESSAGE (370) as Apache's 5.3 producer sends it."""
    fields = {"topic": topic, "recallHandle": handle, "producerGroup": group}
    return call(addr, RemotingCommand(RequestCode.RECALL_MESSAGE, ext_fields={k: v for k, v in fields.items() if v is not None}))


def runtime_table(addr: str) -> dict[str, str]:
    resp = call(addr, RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
    return json.loads(resp.body)["table"]


TIMER_RUNTIME_KEYS = {"timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps"}


class TimerCase(unittest.TestCase):
    conf = CONF

    def setUp(self) -> None:
        self.server = Standalone(self.conf).start()
        self.addCleanup(self.server.close)
        self.server.create_topic(TOPIC, QUEUES)
        self.sender = Sender(self.server.broker, "P_timer")
        self.addCleanup(self.sender.close)
        self.offsets = [0] * QUEUES
        self.received: dict[str, list] = {}
        self.expected: dict[str, tuple[int, int, int]] = {}  # body -> (earliest due, latest due, queue)

    def send(self, body: str, queue_id: int, **props: str) -> None:
        """Send one timer message; remember the window its due time lies in (the broker reads its clock in between)."""
        before = now_ms()
        resp = self.sender.send(TOPIC, body.encode(), queue_id, WAIT="true", **props)
        after = now_ms()
        self.assertEqual(resp.code, 0, resp.remark)
        if "TIMER_DELIVER_MS" in props and "TIMER_DELAY_MS" not in props and "TIMER_DELAY_SEC" not in props:
            due = int(props["TIMER_DELIVER_MS"])
            self.expected[body] = (due, due, queue_id)
        else:
            delay = int(props["TIMER_DELAY_SEC"]) * 1000 if "TIMER_DELAY_SEC" in props else int(props["TIMER_DELAY_MS"])
            self.expected[body] = (before + delay, after + delay, queue_id)

    def drain(self) -> int:
        for q in range(QUEUES):
            while True:
                _, records = pull(self.server.broker, TOPIC, q, self.offsets[q])
                if not records:
                    break
                for rec in records:
                    self.received.setdefault(rec.body.decode(), []).append(rec)
                self.offsets[q] = records[-1].queue_offset + 1
        return len(self.received)

    def wait_all(self, timeout: float) -> None:
        wait_for(lambda: self.drain() >= len(self.expected), timeout, f"{len(self.expected)} timer messages delivered",
                 step=0.05)
        self.drain()

    def check_delivered(self, late_allowance_ms: int = 0) -> None:
        """Every expected message exactly once, on its queue, not early, not later than precision + bound."""
        self.assertEqual(set(self.received), set(self.expected))
        for body, (earliest, latest, queue_id) in self.expected.items():
            copies = self.received[body]
            self.assertEqual(len(copies), 1, f"{body} delivered {len(copies)} times")
            rec = copies[0]
            props = parse_properties(rec.properties)
            self.assertEqual(rec.queue_id, queue_id, body)
            self.assertGreaterEqual(rec.store_timestamp, earliest, f"{body} delivered {earliest - rec.store_timestamp} ms early")
            self.assertLessEqual(rec.store_timestamp - latest, PRECISION_MS + LATE_BOUND_MS + late_allowance_ms,
                                 f"{body} delivered {rec.store_timestamp - latest} ms late")
            self.assertNotIn("REAL_TOPIC", props)
            self.assertNotIn("REAL_QID", props)
            self.assertIn("TIMER_OUT_MS", props)
            self.assertLessEqual(int(props["TIMER_OUT_MS"]), latest)
            self.assertGreaterEqual(int(props["TIMER_DEQUEUE_MS"]), earliest)
            self.assertIn("TIMER_ENQUEUE_MS", props)


class TimerDeliveryTest(TimerCase):
    def test_many_timers_across_slots_and_timer_log_files(self) -> None:
        start = now_ms()
        for i in range(60):
            self.send(f"ms-{i}", i % QUEUES, TIMER_DELAY_MS=str(300 + i * 47))
        for i in range(6):
            self.send(f"at-{i}", i % QUEUES, TIMER_DELIVER_MS=str(start + 1000 + i * 333))
        self.send("at-exact-second", 1, TIMER_DELIVER_MS=str((start // 1000 + 3) * 1000))
        for i in range(1, 3):
            self.send(f"sec-{i}", i, TIMER_DELAY_SEC=str(i))
        self.send("same-slot-a", 2, TIMER_DELAY_MS="1500")
        self.send("same-slot-b", 2, TIMER_DELAY_MS="1500")
        self.wait_all(30)
        self.check_delivered()
        a, b = self.received["same-slot-a"][0], self.received["same-slot-b"][0]
        self.assertLess(a.queue_offset, b.queue_offset)  # one slot delivers in the order it was filled
        store = self.server.root / "store"
        self.assertEqual(os.path.getsize(store / "timerwheel"), 2 * 7 * 86400 * 32)
        self.assertEqual(os.path.getsize(store / "timercheck"), 4096)
        self.assertGreater(len(os.listdir(store / "timerlog")), 1)  # 40 units a file: the log rolled over files
        # every message linked and delivered: the topic's waiting count is back to 0 once the files are synced
        wait_for(lambda: '"T_timer":{"count":0,' in (store / "timermetrics").read_text(), 10, "timermetrics at 0 for T_timer")
        # 5.x's runtime figures: nothing behind, nothing left in the wheel, read time at the clock, rates as Java floats
        table = runtime_table(self.server.broker)
        self.assertLessEqual(TIMER_RUNTIME_KEYS, set(table))
        self.assertEqual((table["timerOffsetBehind"], table["timerCongestNum"]), ("0", "0"))
        self.assertIn(table["timerReadBehind"], ("0", "1"))
        for key in ("timerEnqueueTps", "timerDequeueTps"):
            self.assertRegex(table[key], r"^[0-9]+\.[0-9]+$")
        # what a 5.x slave reads from its master: the checkpoint (seven longs) and the waiting counts
        check = call(self.server.broker, RemotingCommand(RequestCode.GET_TIMER_CHECK_POINT))
        self.assertEqual((check.code, len(check.body)), (0, 56))
        read_ms, _, queue_offset, master_offset, _, _, _ = struct.unpack(">7q", check.body)
        top = call(self.server.broker, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "rmq_sys_wheel_timer", "queueId": 0}))
        top_offset = int(top.ext_fields["offset"])
        self.assertGreaterEqual(top_offset, 71)  # 71 sent, and those that went round again
        self.assertEqual((queue_offset, master_offset), (top_offset, top_offset))  # every one of them read
        self.assertLessEqual(read_ms, now_ms())
        metrics = call(self.server.broker, RemotingCommand(RequestCode.GET_TIMER_METRICS))
        self.assertEqual(metrics.code, 0)
        self.assertEqual(json.loads(metrics.body)["timingCount"]["T_timer"]["count"], 0)

    def test_delays_beyond_the_roll_window_go_round_again(self) -> None:
        # the window is 20 slots of 100 ms: these wait in a nearer slot, come back through the timer topic, then deliver
        self.send("roll-3s", 0, TIMER_DELAY_MS="3000")
        self.send("roll-5s", 1, TIMER_DELAY_SEC="5")
        self.send("roll-6.5s", 2, TIMER_DELAY_MS="6500")
        self.send("no-roll", 3, TIMER_DELAY_MS="1000")
        self.wait_all(30)
        self.check_delivered()
        rolls = {body: int(parse_properties(recs[0].properties).get("TIMER_ROLL_TIMES", "0")) for body, recs in self.received.items()}
        self.assertEqual(rolls["no-roll"], 0)
        self.assertGreaterEqual(rolls["roll-3s"], 1)
        self.assertGreaterEqual(rolls["roll-6.5s"], 2)

    def test_refusals_and_what_is_not_a_timer(self) -> None:
        for props in ({"TIMER_DELAY_SEC": "61"}, {"TIMER_DELIVER_MS": str(now_ms() + 61_000)}, {"TIMER_DELAY_MS": "12a"},
                      {"TIMER_DELAY_MS": " 100"}):
            resp = self.sender.send(TOPIC, b"refused", 0, **props)
            self.assertEqual((resp.code, resp.remark), (13, ILLEGAL), props)
        resp = self.sender.send(TOPIC, b"at-max", 0, TIMER_DELAY_SEC="60")
        self.assertEqual(resp.code, 0, resp.remark)
        # a delivery time already past: stored on the topic at once, as sent
        past = str(now_ms() - 5000)
        resp = self.sender.send(TOPIC, b"past", 3, TIMER_DELIVER_MS=past)
        self.assertEqual(resp.code, 0, resp.remark)
        _, records = pull(self.server.broker, TOPIC, 3, 0)
        self.assertEqual([r.body for r in records], [b"past"])
        self.assertEqual(parse_properties(records[0].properties).get("TIMER_DELIVER_MS"), past)
        # clients may not send to the timer topic itself
        resp = self.sender.send("rmq_sys_wheel_timer", b"direct", 0)
        self.assertEqual(resp.code, 16, resp.remark)
        # a delay level wins over timer keys, which are dropped
        resp = self.sender.send(TOPIC, b"level", 1, DELAY="1", TIMER_DELAY_SEC="30")
        self.assertEqual(resp.code, 0, resp.remark)
        got: list = []

        def level_delivered() -> bool:
            got[:] = pull(self.server.broker, TOPIC, 1, 0)[1]
            return bool(got)

        wait_for(level_delivered, 10, "the delay-level message")
        self.assertNotIn("TIMER_DELAY_SEC", parse_properties(got[0].properties))
        # a timer message's answer carries a recall handle; a plain one's does not
        self.assertNotIn("recallHandle", self.sender.send(TOPIC, b"plain", 0).ext_fields)
        resp = self.sender.send(TOPIC, b"recallable", 0, UNIQ_KEY="U1", TIMER_DELAY_SEC="30")
        handle = resp.ext_fields["recallHandle"]
        self.assertEqual(resp.code, 0, resp.remark)
        # RECALL_MESSAGE's refusals, each as Java 5.3 words it
        handle_of = lambda text: base64.urlsafe_b64encode(text.encode()).decode()  # noqa: E731
        at = str(now_ms() + 20_000)
        for topic, sent, answer in (
            ("T_none", handle, (17, "recall failed, the topic[T_none] not exist")),
            (TOPIC, "%%%", (604, "recall handle is invalid")),
            (TOPIC, handle_of(f"v2 {TOPIC} broker-a {at} U1"), (604, "recall handle is invalid")),
            (TOPIC, handle_of(f"v1 {TOPIC} broker-a {at}"), (604, "recall handle is invalid")),
            (TOPIC, handle_of(f"v1 T_other broker-a {at} U1"), (604, "recall failed, topic not match")),
            (TOPIC, handle_of(f"v1 {TOPIC} broker-b {at} U1"), (604, "recall failed, broker service not available")),
            (TOPIC, handle_of(f"v1 {TOPIC} broker-a {now_ms() - 1} U1"), (604, "recall failed, timestamp invalid")),
            (TOPIC, handle_of(f"v1 {TOPIC} broker-a x{at} U1"), (604, "recall failed, timestamp invalid")),
            (TOPIC, handle_of(f"v1 {TOPIC} broker-a {'9' * 5000} U1"), (604, "recall failed, timestamp invalid")),
            (TOPIC, handle_of(f"v1 {TOPIC} broker-a {now_ms() + 61_000} U1"), (604, "recall failed, timestamp invalid")),
        ):
            got_answer = recall(self.server.broker, topic, sent)
            self.assertEqual((got_answer.code, got_answer.remark), answer, sent)
            self.assertEqual(got_answer.ext_fields, {"MSG_REGION": "DefaultRegion"})
        missing = recall(self.server.broker, TOPIC, None)
        self.assertEqual((missing.code, missing.remark), (
            1, "org.apache.rocketmq.remoting.exception.RemotingCommandException: the custom field <recallHandle> is null"))
        done = recall(self.server.broker, TOPIC, handle)
        self.assertEqual((done.code, done.remark, done.ext_fields), (0, None, {"MSG_REGION": "DefaultRegion", "msgId": "U1"}))
        # in the wheel now: at-max, and recallable with its cancel counted as one less (Java's slot count)
        wait_for(lambda: runtime_table(self.server.broker)["timerOffsetBehind"] == "0", 10, "the timer topic read")
        self.assertEqual(runtime_table(self.server.broker)["timerCongestNum"], "1")


class TimerCrowdedSlotTest(TimerCase):
    conf = {**CONF, "timerRollWindowSlot": "600"}  # no rolls here: they may reorder a slot's messages, in Java too

    def test_a_crowded_slot_delivers_in_order_over_several_turns(self) -> None:
        due = now_ms() + 8000
        for i in range(600):  # more than one dequeue turn takes (512)
            self.send(f"crowd-{i:03d}", 0, TIMER_DELIVER_MS=str(due))
        # all of them must wait in the slot (one sent after its time would be put on the topic at once)
        self.assertLess(now_ms(), due - 2 * PRECISION_MS, "sending took too long for the test to mean anything")
        self.wait_all(40)
        self.check_delivered()
        order = sorted(self.expected, key=lambda body: self.received[body][0].queue_offset)
        self.assertEqual(order, sorted(self.expected))


class TimerDisabledTest(unittest.TestCase):
    def test_wheel_off_refuses_timer_messages(self) -> None:
        server = Standalone({"timerWheelEnable": "false"}).start()
        self.addCleanup(server.close)
        server.create_topic(TOPIC, 1)
        sender = Sender(server.broker)
        self.addCleanup(sender.close)
        resp = sender.send(TOPIC, b"x", 0, TIMER_DELAY_SEC="3")
        self.assertEqual((resp.code, resp.remark), (1, "accurate timer message is not enabled, timerWheelEnable is false"))
        self.assertEqual(sender.send(TOPIC, b"plain", 0).code, 0)
        self.assertFalse(TIMER_RUNTIME_KEYS & set(runtime_table(server.broker)))  # 4.9.8's table without the wheel
        for code, remark in ((RequestCode.GET_TIMER_CHECK_POINT, "The checkpoint is null"),
                             (RequestCode.GET_TIMER_METRICS, "The timer message store is null")):
            resp = call(server.broker, RemotingCommand(code))
            self.assertEqual((resp.code, resp.remark), (1, remark))
        # recall is off unless recallMessageEnable=true (Java 5.3's default)
        resp = recall(server.broker, TOPIC, "anything")
        self.assertEqual((resp.code, resp.remark, resp.ext_fields), (16, "recall failed, operation is forbidden",
                                                                      {"MSG_REGION": "DefaultRegion"}))


class TimerRestartTest(TimerCase):
    def _send_and_cancel(self) -> set[str]:
        """Timer messages cancelled before their time, half by RECALL_MESSAGE, half by a TIMER_DEL_UNIQKEY message."""
        cancelled = set()
        for i in range(6):
            body, uniq = f"cancel-{i}", f"UNIQ-cancel-{i}-{now_ms()}"
            resp = self.sender.send(TOPIC, body.encode(), i % QUEUES, UNIQ_KEY=uniq, TIMER_DELAY_MS=str(1500 + i * 400))
            self.assertEqual(resp.code, 0, resp.remark)
            handle = resp.ext_fields["recallHandle"]
            version, topic, broker, at, key = base64.urlsafe_b64decode(handle).decode().split(" ")
            self.assertEqual((version, topic, broker, key), ("v1", TOPIC, "broker-a", uniq))
            if i % 2:
                answer = recall(self.server.broker, TOPIC, handle)
                self.assertEqual((answer.code, answer.ext_fields.get("msgId")), (0, uniq), answer.remark)
            else:
                answer = self.sender.send(TOPIC, b"0", 0, TIMER_DEL_UNIQKEY=f"{TOPIC}+{uniq}", TIMER_DELIVER_MS=at, UNIQ_KEY=uniq)
                self.assertEqual(answer.code, 0, answer.remark)
            cancelled.add(body)
        return cancelled

    def _restart_in_the_middle(self, kill: bool) -> None:
        for i in range(40):
            self.send(f"r-{i}", i % QUEUES, TIMER_DELAY_MS=str(800 + i * 100))
        cancelled = self._send_and_cancel()
        wait_for(lambda: self.drain() >= 8, 20, "the first timer messages")
        down = now_ms()
        if kill:
            self.server.proc.kill()
            self.server.proc.wait()
        else:
            self.assertTrue(self.server.stop(), self.server.log())
        self.assertLess(len(self.received), 40, "every message came before the restart; the test proves nothing")
        self.sender.close()
        self.server.start()
        downtime = now_ms() - down
        self.sender = Sender(self.server.broker, "P_timer")
        self.wait_all(40)  # r-39 is due after every cancelled one: their slots are read by then
        self.assertFalse(cancelled & set(self.received), "a cancelled timer message was delivered")
        self.check_delivered(late_allowance_ms=downtime)

    def test_kill_9_in_the_middle(self) -> None:
        self._restart_in_the_middle(kill=True)

    def test_clean_stop_in_the_middle(self) -> None:
        self._restart_in_the_middle(kill=False)
