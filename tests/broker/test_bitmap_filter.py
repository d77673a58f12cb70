"""enableCalcFilterBitMap on a real broker: groups registered by HEART_BEAT, pulls skip units whose bits say no."""

from __future__ import annotations

import os
import time

import orjson
from twisted.internet import defer

from rmqtx.broker.jsonfiles import loads_fastjson
from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rmqtx.filter import consumer_bloom_key
from rmqtx.store.tools import verify
from tests.broker.wire import decode_records, send
from tests.client.support import ClusterTestCase, wait_until

TOPIC = "T_bitmap"
GROUPS = {"G_high": "a > 94", "G_low": "a < 5 AND region = 'eu'"}


def matches(group: str, a: int, region: str) -> bool:
    return a > 94 if group == "G_high" else a < 5 and region == "eu"


class BitmapFilterTest(ClusterTestCase):
    broker_conf = {"enablePropertyFilter": "true", "enableCalcFilterBitMap": "true",
                   "mappedFileSizeConsumeQueueExt": str(64 * 1024)}

    def setUp(self):
        super().setUp()
        self.client = RemotingClient()
        self.addCleanup(lambda: defer.ensureDeferred(self.client.close()))
        self.sent: list[tuple[str, int, str]] = []

    @property
    def ctx(self):
        return self.cluster.broker.ctx

    async def _heartbeat(self) -> None:
        consumers = [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": TOPIC, "subString": expr, "expressionType": "SQL92", "subVersion": 1,
                                     "tagsSet": [], "codeSet": [], "classFilterMode": False}],
        } for group, expr in GROUPS.items()]
        body = orjson.dumps({"clientID": "127.0.0.1@bitmap", "consumerDataSet": consumers, "producerDataSet": []})
        resp = await self.client.invoke(self.cluster.broker_addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        # messages stored in the registration's millisecond are not trusted to carry its bits: let the clock move on
        registered_ms = int(time.time() * 1000)
        await wait_until(lambda: int(time.time() * 1000) > registered_ms, timeout=1, step=0.001)

    async def _send(self, n: int) -> None:
        for _ in range(n):
            i = len(self.sent)
            body, a, region = f"m{i}", i % 100, ("eu", "us")[i // 100 % 2]
            resp = await send(self.client, self.cluster.broker_addr, TOPIC, body.encode(), a=str(a), region=region)
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
            self.sent.append((body, a, region))

    async def _pull_all(self, group: str) -> list[str]:
        """Pull queue 0 by the registered subscription (no subscription flag), as a push consumer does."""
        bodies, offset = [], 0
        while True:
            header = PullMessageRequestHeader(
                consumerGroup=group, topic=TOPIC, queueId=0, queueOffset=offset, maxMsgNums=32, sysFlag=0,
                commitOffset=0, suspendTimeoutMillis=0, subscription=GROUPS[group], subVersion=1, expressionType="SQL92",
            )
            resp = await self.client.invoke(self.cluster.broker_addr, header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE)))
            if resp.code == ResponseCode.PULL_NOT_FOUND:
                return bodies
            self.assertIn(resp.code, (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY), resp.remark)
            bodies += [r.body.decode() for r in decode_records(resp.body or b"")]
            offset = PullMessageResponseHeader.from_command(resp).nextBeginOffset

    def _expected(self, group: str) -> list[str]:
        return [body for body, a, region in self.sent if matches(group, a, region)]

    def _bounds(self, group: str, trusted_from: int) -> tuple[int, int]:
        """Fewest and most evaluations: untrusted units, true hits, plus bloom false positives at most."""
        later = self.sent[trusted_from:]
        hits = sum(matches(group, a, r) for _, a, r in later)
        others = sum(not matches(group, a, r) and any(matches(g, a, r) for g in GROUPS) for _, a, r in later)
        return trusted_from + hits, trusted_from + hits + others

    def _counters(self) -> tuple[int, int]:
        filters = self.ctx.filters
        return filters.evaluations, filters.skipped

    async def _scenario(self) -> None:
        await self._send(20)  # stored before any group registered: no bits, always evaluated
        await self._heartbeat()
        await self._send(380)
        cq = self.ctx.store.consume_queues[(TOPIC, 0)]
        self.assertTrue(all(cq.unit_at(i)[2] < -(1 << 31) for i in range(cq.max_offset)))  # tag fields hold ext addresses

        for group in GROUPS:
            before_eval, before_skip = self._counters()
            self.assertEqual(await self._pull_all(group), self._expected(group))
            evaluated = self._counters()[0] - before_eval
            skipped = self._counters()[1] - before_skip
            self.assertEqual(evaluated + skipped, 400)  # every unit is either ruled out by bits or evaluated
            low, high = self._bounds(group, 20)
            self.assertTrue(low <= evaluated <= high, (group, low, evaluated, high))
            self.assertGreater(skipped, 300)

        ext_end = self._ext_end()
        born = {group: self.ctx.filters.get(TOPIC, group).born_time for group in GROUPS}
        await self._restart()
        self.assertEqual(self._ext_end(), ext_end)  # ext files recovered to their last unit
        self._check_saved_filters(born)
        for group in GROUPS:  # loaded, dead until a heartbeat of the same subscription version revives it
            self.assertTrue(self.ctx.filters.get(TOPIC, group).dead)
        await self._heartbeat()
        self.assertEqual({group: self.ctx.filters.get(TOPIC, group).born_time for group in GROUPS}, born)
        self.assertFalse(any(self.ctx.filters.get(TOPIC, group).dead for group in GROUPS))
        await self._send(100)
        self.assertGreater(self._ext_end(), ext_end)
        evaluations, skipped = self._counters()
        self.assertEqual(await self._pull_all("G_high"), self._expected("G_high"))
        evaluated = self._counters()[0] - evaluations
        self.assertEqual(evaluated + self._counters()[1] - skipped, 500)
        low, high = self._bounds("G_high", 20)  # the bits stored before the restart are still trusted
        self.assertTrue(low <= evaluated <= high, (low, evaluated, high))

        root = self.cluster.broker_conf["storePathRootDir"]
        await self.cluster.stop_broker()
        summary = verify(root)
        self.assertTrue(summary["ok"], summary)
        self.assertEqual(summary["consumeQueueExtUnits"], summary["consumeQueueUnits"])

    def _check_saved_filters(self, born: dict[str, int]) -> None:
        """config/consumerFilter.json as Java's ConsumerFilterManager writes it."""
        path = os.path.join(self.cluster.broker_conf["storePathRootDir"], "config", "consumerFilter.json")
        with open(path, "rb") as fh:
            saved = loads_fastjson(fh.read())
        by_topic = saved["filterDataByTopic"][TOPIC]
        self.assertEqual(list(by_topic), ["groupFilterData", "topic"])
        self.assertEqual(by_topic["topic"], TOPIC)
        for group, expression in GROUPS.items():
            data = by_topic["groupFilterData"][group]
            self.assertEqual(list(data), ["bloomFilterData", "bornTime", "clientVersion", "consumerGroup", "dead",
                                          "deadTime", "expression", "expressionType", "topic"])
            self.assertEqual((data["consumerGroup"], data["topic"], data["expression"], data["expressionType"]),
                             (group, TOPIC, expression, "SQL92"))
            self.assertEqual((data["bornTime"], data["clientVersion"], data["dead"]), (born[group], 1, True))
            self.assertGreaterEqual(data["deadTime"], data["bornTime"])
            bloom = self.ctx.filters.bloom.generate(consumer_bloom_key(group, TOPIC))
            self.assertEqual(data["bloomFilterData"], {"bitNum": bloom.bit_num, "bitPos": list(bloom.bit_pos)})

    def _ext_end(self) -> int:
        return self.ctx.store.consume_queues[(TOPIC, 0)].ext.queue.max_offset

    async def _restart(self) -> None:
        await self.cluster.restart_broker()

    def test_bitmap_skips_without_evaluating(self):
        return defer.ensureDeferred(self._scenario())
