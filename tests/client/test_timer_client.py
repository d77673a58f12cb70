"""The Python client's timer setters (delivery time, delay in ms or s), sent plainly and in a committed transaction."""

from __future__ import annotations

import time

from twisted.internet import defer

from rmqtx.client.consumer import PullConsumer
from rmqtx.client.message import Message, MessageExt, PullStatus, TransactionState
from rmqtx.client.producer import Producer, TransactionProducer
from tests.client.support import ClusterTestCase, sleep

PRECISION_MS = 100
LATE_BOUND_MS = 1500


def now_ms() -> int:
    return int(time.time() * 1000)


class TimerClientTest(ClusterTestCase):
    broker_conf = {"timerPrecisionMs": str(PRECISION_MS), "mappedFileSizeTimerLog": str(52 * 100)}

    async def collect(self, topic: str, want: int) -> dict[str, MessageExt]:
        """Pull every queue from the start until ``want`` messages are there."""
        reader = PullConsumer(f"C_{topic}", config=self.config())
        await reader.start()
        got: dict[str, MessageExt] = {}
        try:
            async def pull_all() -> None:
                for mq in await reader.fetch_queues(topic):
                    result = await reader.pull(mq, 0, 32)
                    if result.status is PullStatus.FOUND:
                        got.update({m.body.decode(): m for m in result.messages})

            deadline = time.monotonic() + 20
            while len(got) < want and time.monotonic() < deadline:
                await pull_all()
                await sleep(0.05)
        finally:
            await reader.shutdown()
        return got

    def check(self, msg: MessageExt, earliest: int, latest: int) -> None:
        self.assertGreaterEqual(msg.store_timestamp, earliest, f"{msg.body!r} early by {earliest - msg.store_timestamp} ms")
        self.assertLessEqual(msg.store_timestamp - latest, PRECISION_MS + LATE_BOUND_MS, f"{msg.body!r} late")
        self.assertIn("TIMER_OUT_MS", msg.properties)
        self.assertNotIn("REAL_TOPIC", msg.properties)

    @defer.inlineCallbacks
    def test_setters_deliver_on_time(self):
        yield defer.ensureDeferred(self._setters())

    async def _setters(self) -> None:
        producer = Producer("P_timer_client", config=self.config())
        await producer.start()
        windows: dict[str, tuple[int, int]] = {}
        try:
            await producer.send(Message("T_timer_client", "creates the topic"))
            for name, setter, value in (("ms", "delay_time_ms", 700), ("sec", "delay_time_sec", 1), ("at", "deliver_time_ms", 1300)):
                msg = Message("T_timer_client", name)
                before = now_ms()
                setattr(msg, setter, before + value if setter == "deliver_time_ms" else value)
                self.assertEqual(getattr(msg, setter), before + value if setter == "deliver_time_ms" else value)
                await producer.send(msg)
                delay = value * 1000 if setter == "delay_time_sec" else value
                windows[name] = (before + delay, now_ms() + delay) if setter != "deliver_time_ms" else (before + value,) * 2
        finally:
            await producer.shutdown()
        got = await self.collect("T_timer_client", 4)
        self.assertEqual(sorted(got), ["at", "creates the topic", "ms", "sec"])
        for name, (earliest, latest) in windows.items():
            self.check(got[name], earliest, latest)

    @defer.inlineCallbacks
    def test_committed_transaction_goes_through_the_wheel(self):
        yield defer.ensureDeferred(self._transaction())

    async def _transaction(self) -> None:
        producer = TransactionProducer("P_timer_tx", config=self.config(),
                                       execute=lambda msg, arg: TransactionState.COMMIT_MESSAGE, check=lambda msg: None)
        await producer.start()
        try:
            plain = Producer("P_timer_tx_topic", config=self.config())
            await plain.start()
            await plain.send(Message("T_timer_tx", "creates the topic"))
            await plain.shutdown()
            msg = Message("T_timer_tx", "committed later")
            msg.delay_time_ms = 1200
            before = now_ms()
            await producer.send_in_transaction(msg)
            after = now_ms()
        finally:
            await producer.shutdown()
        got = await self.collect("T_timer_tx", 2)
        self.assertEqual(sorted(got), ["committed later", "creates the topic"])
        self.check(got["committed later"], before + 1200, after + 1200)
