"""Delay levels, retry and DLQ, queue locks, query by id and key: a real broker over TCP."""

from __future__ import annotations

import time

import orjson
from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from rmqtx.broker.jsonfiles import loads_fastjson
from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.headers import ConsumerSendMsgBackRequestHeader, QueryMessageRequestHeader
from rmqtx.store.record import decode_offset_msg_id
from tests.broker.inprocess import InProcessCluster
from tests.broker.test_reput import java_store_records
from tests.broker.wire import decode_records, props_of, pull, send
from tests.client.support import wait_until

FAST_LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


def sleep(seconds: float):
    return task.deferLater(reactor, seconds, lambda: None)


class DeliveryTest(unittest.TestCase):
    timeout = 60

    def setUp(self):
        self.cluster = InProcessCluster(messageDelayLevel=FAST_LEVELS, brokerClusterName="DefaultCluster")
        self.cluster.start()
        self.client = RemotingClient()
        self.addr = self.cluster.broker_addr

    async def _down(self):
        await self.client.close()
        await self.cluster.stop()

    def tearDown(self):
        return defer.ensureDeferred(self._down())

    async def _drain(self, topic: str, queue_id: int = 0, group: str = "C_test") -> list:
        resp, records = await pull(self.client, self.addr, topic, queue_id, 0, group)
        return records if resp.code == ResponseCode.SUCCESS else []

    async def _delayed(self) -> None:
        sent_at = time.time()
        for level in (1, 2):
            resp = await send(self.client, self.addr, "T_delay", f"level-{level}".encode(), DELAY=str(level), TAGS="T")
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        self.assertEqual(await self._drain("T_delay"), [])
        arrived: dict[str, float] = {}
        while len(arrived) < 2 and time.time() - sent_at < 10:
            for rec in await self._drain("T_delay"):
                arrived.setdefault(rec.body.decode(), time.time() - sent_at)
            await sleep(0.05)
        self.assertGreaterEqual(arrived["level-1"], 1.0)
        self.assertGreaterEqual(arrived["level-2"], 2.0)
        records = await self._drain("T_delay")
        self.assertEqual(sorted(r.body for r in records), [b"level-1", b"level-2"])
        for rec in records:
            props = props_of(rec)
            self.assertEqual(props["REAL_TOPIC"], "T_delay")
            self.assertEqual(props["REAL_QID"], "0")
        resp = await self.client.invoke(self.addr, RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET))
        self.assertEqual(orjson.loads(resp.body.replace(b"1:", b'"1":').replace(b"2:", b'"2":'))["offsetTable"], {"1": 1, "2": 1})

    def test_delay_levels(self):
        return defer.ensureDeferred(self._delayed())

    async def _delayed_like_java(self) -> None:
        """The fixture store's level-1 message sent again: both copies' strings equal Java's (WAIT and DELAY kept)."""
        java = java_store_records()
        scheduled = next(r for r in java if r.topic == "SCHEDULE_TOPIC_XXXX" and "K-delay-1" in r.properties)
        delivered = next(r for r in java if r.topic == "S_B" and "K-delay-1" in r.properties)
        sent_props = {k: v for k, v in props_of(scheduled).items() if k not in ("REAL_TOPIC", "REAL_QID", "CLUSTER")}
        resp = await send(self.client, self.addr, "S_B", delivered.body, **sent_props)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        store = self.cluster.broker.ctx.store
        for _ in range(100):
            got = store.get_message("S_B", 0, 0, 1)
            if got.messages:
                break
            await sleep(0.05)
        mine = decode_records(store.get_message("SCHEDULE_TOPIC_XXXX", 0, 0, 1).messages[0])[0]
        self.assertEqual(mine.properties, scheduled.properties)
        self.assertEqual(decode_records(got.messages[0])[0].properties, delivered.properties)

    async def _capped(self) -> None:
        resp = await send(self.client, self.addr, "T_capped", b"too late", DELAY="99")
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        store = self.cluster.broker.ctx.store
        (copy,) = decode_records(store.get_message("SCHEDULE_TOPIC_XXXX", 17, 0, 1).messages[0])
        self.assertEqual(props_of(copy)["DELAY"], "18")

    def test_delay_level_past_the_last_is_capped_in_the_stored_copy(self):
        return defer.ensureDeferred(self._capped())

    def test_delayed_copies_match_java_store(self):
        return defer.ensureDeferred(self._delayed_like_java())

    async def _send_back(self, offset: int, max_times: int, delay: int = 0) -> RemotingCommand:
        header = ConsumerSendMsgBackRequestHeader(offset=offset, group="C_retry", delayLevel=delay, originTopic="T_retry",
                                                  maxReconsumeTimes=max_times)
        return await self.client.invoke(self.addr, header.apply_to(RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK)))

    async def _retry_then_dlq(self) -> None:
        sent = await send(self.client, self.addr, "T_retry", b"fails", KEYS="k1", TAGS="TagA", UNIQ_KEY="ABC")
        offset = decode_offset_msg_id(sent.ext_fields["msgId"])[2]
        resp = await self._send_back(offset, max_times=1)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        retried: list = []
        for _ in range(100):  # level 3 + 0 = 1 s here
            retried = await self._drain("%RETRY%C_retry", group="C_retry")
            if retried:
                break
            await sleep(0.05)
        self.assertEqual(len(retried), 1)
        again = retried[0]
        self.assertEqual(again.body, b"fails")
        self.assertEqual(again.reconsume_times, 1)
        props = props_of(again)
        self.assertEqual(props["RETRY_TOPIC"], "T_retry")
        self.assertEqual(props["ORIGIN_MESSAGE_ID"], sent.ext_fields["msgId"])
        self.assertEqual(props["DELAY"], "3")
        self.assertEqual((props["KEYS"], props["TAGS"], props["UNIQ_KEY"]), ("k1", "TagA", "ABC"))
        # fails again with maxReconsumeTimes=1: the DLQ copy is written at once (DELAY=0 replaces the stale 3)
        resp = await self._send_back(again.physical_offset, max_times=1)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        tc = self.cluster.broker.ctx.topics.get("%DLQ%C_retry")
        self.assertEqual((tc.perm, tc.readQueueNums, tc.writeQueueNums, tc.topicSysFlag), (6, 1, 1, 0))
        resp, dead = await pull(self.client, self.addr, "%DLQ%C_retry", 0, 0, "C_dlq_reader")
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        self.assertEqual(len(dead), 1)
        self.assertEqual(dead[0].reconsume_times, 2)
        self.assertEqual(props_of(dead[0]), dict(props, WAIT="false", DELAY="0"))
        self.assertEqual(self.cluster.broker.ctx.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2), 1)  # one trip only
        route = None
        for _ in range(100):  # the broker registers the new topic with the NameServer (oneway)
            route = await self.client.invoke(self.cluster.namesrv_addr, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%DLQ%C_retry"}))
            if route.code == ResponseCode.SUCCESS:
                break
            await sleep(0.05)
        self.assertEqual(route.code, ResponseCode.SUCCESS, route.remark)
        queues = loads_fastjson(route.body)["queueDatas"]
        self.assertEqual([(q["perm"], q["readQueueNums"], q["writeQueueNums"]) for q in queues], [(6, 1, 1)])
        header = QueryMessageRequestHeader(topic="%DLQ%C_retry", key="k1", maxNum=32, beginTimestamp=0, endTimestamp=2**63 - 1)
        found = await self.client.invoke(self.addr, header.apply_to(RemotingCommand(RequestCode.QUERY_MESSAGE)))
        self.assertEqual(found.code, ResponseCode.SUCCESS)
        self.assertEqual([r.body for r in decode_records(found.body)], [b"fails"])

    def test_retry_then_dlq(self):
        return defer.ensureDeferred(self._retry_then_dlq())

    async def _query(self) -> None:
        sent = await send(self.client, self.addr, "T_query", b"find me", KEYS="alpha beta", UNIQ_KEY="U1")
        offset = decode_offset_msg_id(sent.ext_fields["msgId"])[2]
        view = await self.client.invoke(self.addr, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}))
        self.assertEqual(view.code, ResponseCode.SUCCESS)
        self.assertEqual(decode_records(view.body)[0].body, b"find me")
        missing = await self.client.invoke(self.addr, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 99999999}))
        self.assertEqual(missing.code, ResponseCode.SYSTEM_ERROR)
        for key in ("alpha", "beta", "U1"):
            header = QueryMessageRequestHeader(topic="T_query", key=key, maxNum=32, beginTimestamp=0, endTimestamp=2**63 - 1)
            found = await self.client.invoke(self.addr, header.apply_to(RemotingCommand(RequestCode.QUERY_MESSAGE)))
            self.assertEqual(found.code, ResponseCode.SUCCESS, key)
            self.assertEqual([r.body for r in decode_records(found.body)], [b"find me"])
            self.assertEqual(list(found.ext_fields), ["indexLastUpdatePhyoffset", "indexLastUpdateTimestamp"])
        header = QueryMessageRequestHeader(topic="T_query", key="nope", maxNum=32, beginTimestamp=0, endTimestamp=2**63 - 1)
        none = await self.client.invoke(self.addr, header.apply_to(RemotingCommand(RequestCode.QUERY_MESSAGE)))
        self.assertEqual(none.code, ResponseCode.QUERY_NOT_FOUND)

    def test_query_by_id_and_key(self):
        return defer.ensureDeferred(self._query())

    async def _locks(self) -> None:
        def body(client_id: str, queues) -> bytes:
            return orjson.dumps({"clientId": client_id, "consumerGroup": "C_order",
                                 "mqSet": [{"brokerName": "broker-a", "queueId": q, "topic": "T_o"} for q in queues]})

        async def lock(client_id: str, queues) -> list[int]:
            resp = await self.client.invoke(self.addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body(client_id, queues)))
            return sorted(m["queueId"] for m in orjson.loads(resp.body)["lockOKMQSet"])

        self.assertEqual(await lock("c1", [0, 1]), [0, 1])
        self.assertEqual(await lock("c2", [0, 1, 2]), [2])
        self.assertEqual(await lock("c1", [0, 1, 2]), [0, 1])  # renewal; 2 belongs to c2
        await self.client.invoke(self.addr, RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body("c1", [0])))
        self.assertEqual(await lock("c2", [0]), [0])
        locks = self.cluster.broker.ctx.locks
        locks.clock = lambda: time.monotonic() + 61  # c1's lock on queue 1 expires
        self.assertEqual(await lock("c2", [1]), [1])

    def test_queue_locks(self):
        return defer.ensureDeferred(self._locks())


class DelayRestartTest(unittest.TestCase):
    """Pending delayed messages survive a restart and are delivered once."""

    timeout = 60

    async def _scenario(self) -> None:
        cluster = InProcessCluster(messageDelayLevel="1s 2s")
        cluster.start()
        client = RemotingClient()
        for i in range(5):
            resp = await send(client, cluster.broker_addr, "T_dr", f"d{i}".encode(), DELAY="2")
            self.assertEqual(resp.code, ResponseCode.SUCCESS)
        store = cluster.broker.ctx.store
        await wait_until(lambda: store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 1) == 5, timeout=10)
        await client.close()
        await cluster.restart_broker()  # on the same store
        client = RemotingClient()
        try:
            ctx = cluster.broker.ctx
            await wait_until(lambda: ctx.schedule.offsets.get(2, 0) >= 5, timeout=15)
            resp, records = await pull(client, cluster.broker.config.broker_addr, "T_dr", 0, 0)
            self.assertEqual(sorted(r.body for r in records), [f"d{i}".encode() for i in range(5)])
            ctx.schedule.deliver_due()  # another round of the schedule finds nothing left to deliver
            self.assertEqual(ctx.store.get_max_offset_in_queue("T_dr", 0), 5)
            resp, again = await pull(client, cluster.broker.config.broker_addr, "T_dr", 0, 0)
            self.assertEqual(len(again), 5)
        finally:
            await client.close()
            await cluster.stop()

    def test_restart_with_pending_delays(self):
        return defer.ensureDeferred(self._scenario())
