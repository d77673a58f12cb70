"""Admin request codes straight on the wire: bodies, refusals, unsupported codes, forwarded client calls."""

from __future__ import annotations

import time

import orjson
from twisted.internet import defer

from rmqtx.common import fastjson
from rmqtx.common.topic_config import TopicConfig
from rmqtx.remoting import Dispatcher, RemotingClient, RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.store.times import LABELS, WINDOW_MS
from tests.admin.support import AdminTestCase
from tests.broker.wire import pull, send
from tests.client.support import wait_until
from tests.fixtures import records


def heartbeat(client_id: str, group: str, topic: str) -> bytes:
    """A Java-style consumer heartbeat body subscribing ``group`` to ``topic``."""
    sub = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*", "subVersion": 1,
           "tagsSet": [], "topic": topic}
    consumer = {"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY", "groupName": group,
                "messageModel": "CLUSTERING", "subscriptionDataSet": [sub], "unitMode": False}
    return orjson.dumps({"clientID": client_id, "consumerDataSet": [consumer], "producerDataSet": [{"groupName": "P_raw"}]})


class BrokerCodesTest(AdminTestCase):
    broker_conf = {"enableUpdateBrokerConfig": "true", "sendThreadPoolQueueCapacity": "2500"}

    async def call(self, code: int, fields: dict | None = None, body: bytes = b"") -> RemotingCommand:
        return await self.broker_call(code, fields, body)

    @defer.inlineCallbacks
    def test_tables_and_stats(self):
        yield defer.ensureDeferred(self._tables())

    async def _tables(self) -> None:
        ctx = self.cluster.broker.ctx
        ctx.topics.put(TopicConfig("T_codes", 2, 2))
        client = RemotingClient()
        try:
            for i in range(4):
                await send(client, self.cluster.broker_addr, "T_codes", b"x", queue_id=i % 2)
            got, records = await pull(client, self.cluster.broker_addr, "T_codes", 0, 0, group="G_reader")
            missed, _ = await pull(client, self.cluster.broker_addr, "T_codes", 0, 2, group="G_reader")
            self.assertEqual(len(records), 2)
            self.assertEqual((got.code, missed.code), (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND))
        finally:
            await client.close()
        ctx.offsets.commit("G1", "T_codes", 0, 2)
        ctx.offsets.commit("G2", "T_codes", 0, 1)

        topics = fastjson.loads((await self.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body)
        self.assertEqual(sorted(topics), ["dataVersion", "topicConfigTable"])
        self.assertEqual(topics["topicConfigTable"]["T_codes"]["writeQueueNums"], 2)

        raw = (await self.call(RequestCode.GET_ALL_CONSUMER_OFFSET)).body
        self.assertIn(b'"T_codes@G1":{0:2}', raw)  # bare integer keys, as Java writes them

        groups = fastjson.loads((await self.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
        self.assertIn("TOOLS_CONSUMER", groups["subscriptionGroupTable"])

        who = fastjson.loads((await self.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T_codes"})).body)
        self.assertEqual(sorted(who["groupList"]), ["G1", "G2"])

        span = fastjson.loads((await self.call(RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "T_codes", "group": "G1"})).body)
        first = span["consumeTimeSpanSet"][0]
        self.assertEqual(sorted(first), ["consumeTimeStamp", "delayTime", "maxTimeStamp", "messageQueue", "minTimeStamp"])
        self.assertGreater(first["maxTimeStamp"], 0)

        corr = fastjson.loads((await self.call(RequestCode.QUERY_CORRECTION_OFFSET, {"topic": "T_codes", "compareGroup": "G1"})).body)
        self.assertEqual(corr["correctionOffsets"], {0: 1})

        self.assertEqual((await self.call(RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": "G1", "destGroup": "G3", "offline": "true"})).code, 0)
        self.assertEqual(ctx.offsets.query("G3", "T_codes", 0), 2)
        bad = await self.call(RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": "G1", "destGroup": "../x"})
        self.assertEqual(bad.code, ResponseCode.SYSTEM_ERROR)

        stats = fastjson.loads((await self.call(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})).body)
        self.assertEqual(sorted(stats), ["brokerAddr", "consumeStatsList", "totalDiff"])

        cq = fastjson.loads((await self.call(RequestCode.QUERY_CONSUME_QUEUE, {"topic": "T_codes", "queueId": 0, "index": 0, "count": 5})).body)
        self.assertEqual((cq["minQueueIndex"], cq["maxQueueIndex"], len(cq["queueData"])), (0, 2, 2))
        missing = await self.call(RequestCode.QUERY_CONSUME_QUEUE, {"topic": "T_none", "queueId": 0, "index": 0, "count": 1})
        self.assertEqual((missing.code, missing.remark), (ResponseCode.SYSTEM_ERROR, "0@T_none is not exist!"))

        config = await self.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "T_codes"})
        self.assertEqual(fastjson.loads(config.body)["topicName"], "T_codes")
        self.assertEqual((await self.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "T_none"})).code, ResponseCode.TOPIC_NOT_EXIST)
        self.assertEqual((await self.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "TOOLS_CONSUMER"})).code, 0)

        system = fastjson.loads((await self.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)).body)
        self.assertIn("TBW102", system["topicList"])

        view = await self.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T_codes"})
        self.assertEqual(fastjson.loads(view.body)["statsMinute"]["sum"], 4)
        unknown = await self.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_NUMS", "statsKey": "x"})
        self.assertEqual((unknown.code, unknown.remark), (ResponseCode.SYSTEM_ERROR, "The stats <GROUP_GET_NUMS> <x> not exist"))
        gets = await self.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_NUMS", "statsKey": "T_codes@G_reader"})
        self.assertEqual(fastjson.loads(gets.body)["statsDay"]["sum"], 2)
        size = await self.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_SIZE", "statsKey": "T_codes@G_reader"})
        self.assertEqual(fastjson.loads(size.body)["statsMinute"]["sum"], len(got.body))
        # the four sends stored records of one size; the pull carried two of them, byte for byte
        put_size = await self.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_SIZE", "statsKey": "T_codes"})
        self.assertEqual(fastjson.loads(put_size.body)["statsHour"]["sum"], 2 * len(got.body))
        fresh = fastjson.loads((await self.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
        histogram = [part.split("]:") for part in fresh["putMessageDistributeTime"].split(" ")[:-1]]
        self.assertEqual([label for label, _ in histogram], [f"[{label}" for label in LABELS])
        if ctx.store.clock() * 1000 - ctx.store.times.boot_ms < WINDOW_MS:  # still the store's first window
            self.assertEqual(sum(int(n) for _, n in histogram), 4)  # the four sends
        self.assertEqual(fresh["putMessageFailedTimes"], "0")
        # a pool's capacity is the setting (Java reports its BrokerConfig's), the others Java's defaults
        self.assertEqual((fresh["sendThreadPoolQueueCapacity"], fresh["pullThreadPoolQueueCapacity"]), ("2500", "100000"))
        self.assertTrue(fresh["putMessageEntireTimeMax"].isdigit() and fresh["getMessageEntireTimeMax"].isdigit())
        if ctx.store.clock() * 1000 - ctx.store.times.boot_ms < WINDOW_MS:  # 5.x's percentiles: no whole window yet
            self.assertEqual((fresh["putLatency99"], fresh["putLatency999"]), ("0.00", "0.00"))
        if ctx.stats.uptime() < 10:  # as in Java, a window longer than the uptime has no figure yet
            self.assertEqual((fresh["putTps"], fresh["getTotalTps"]), ("  ", "0.0 0.0 0.0"))
        ctx.stats.boot_ms -= 700_000  # every window has its samples from here on
        runtime = fastjson.loads((await self.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
        self.assertEqual((runtime["msgPutTotalTodayNow"], runtime["msgGetTotalTodayNow"]), ("4", "2"))
        self.assertEqual(runtime["getTransferedTps"].split(), [str(2 / s) for s in (10.0, 60.0, 600.0)])
        self.assertEqual(runtime["getFoundTps"].split()[0], "0.1")
        self.assertEqual(runtime["getMissTps"].split()[0], "0.1")
        self.assertEqual(runtime["getTotalTps"].split()[0], "0.2")

        self.assertEqual((await self.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G1", "removeOffset": "true"})).code, 0)
        self.assertEqual(ctx.offsets.query("G1", "T_codes", 0), -1)
        self.assertEqual((await self.call(RequestCode.CLEAN_UNUSED_TOPIC)).code, 0)
        self.assertEqual((await self.call(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)).code, 0)
        self.assertEqual(ctx.store.get_max_offset_in_queue("T_codes", 0), 2)

    @defer.inlineCallbacks
    def test_topic_names_are_checked_before_any_path(self):
        for name, remark in (("../etc", "illegal characters"), ("x" * 200, "longer than"), ("TBW102", "conflict with system topic")):
            for code in (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER):
                fields = {"topic": name, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                          "topicFilterType": "SINGLE_TAG"}
                response = yield defer.ensureDeferred(self.call(code, fields))
                self.assertEqual(response.code, ResponseCode.SYSTEM_ERROR)
                self.assertIn(remark, response.remark)
        group = yield defer.ensureDeferred(self.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, b'{"groupName":"a/b"}'))
        self.assertEqual(group.code, ResponseCode.SYSTEM_ERROR)

    @defer.inlineCallbacks
    def test_update_broker_config_takes_only_harmless_keys(self):
        for key in ("storePathRootDir", "brokerConfigPath", "rocketmqHome", "configBlackList", "namesrvAddr", "listenPort"):
            response = yield defer.ensureDeferred(self.call(RequestCode.UPDATE_BROKER_CONFIG, None, f"{key}=/tmp/x\n".encode()))
            self.assertEqual(response.code, ResponseCode.NO_PERMISSION, key)
        self.assertNotEqual(self.cluster.broker.config.storePathRootDir, "/tmp/x")
        response = yield defer.ensureDeferred(self.call(RequestCode.UPDATE_BROKER_CONFIG, None, b"autoCreateTopicEnable=false\n"))
        self.assertEqual(response.code, ResponseCode.SUCCESS)
        self.assertFalse(self.cluster.broker.config.autoCreateTopicEnable)
        config = yield defer.ensureDeferred(self.call(RequestCode.GET_BROKER_CONFIG))
        self.assertIn(b"autoCreateTopicEnable=false\n", config.body)
        self.assertEqual(fastjson.loads(config.ext_fields["version"])["counter"], 1)

    @defer.inlineCallbacks
    def test_unsupported_admin_codes_answer_3(self):
        for code in (13, 22, 23, 27, 50, 51, 52, 53, 323, 9999):
            response = yield defer.ensureDeferred(self.call(code, {"topic": "T"}))
            self.assertEqual((response.code, response.remark), (3, f" request type {code} not supported"))

    @defer.inlineCallbacks
    def test_forwarded_client_calls(self):
        yield defer.ensureDeferred(self._forwarded())

    async def _forwarded(self) -> None:
        silent = Dispatcher()
        silent.register(RequestCode.GET_CONSUMER_RUNNING_INFO, lambda request, conn: defer.Deferred())  # never answers
        resets: list[RemotingCommand] = []
        silent.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, lambda request, conn: resets.append(request))
        answering = Dispatcher()
        answering.register(
            RequestCode.GET_CONSUMER_RUNNING_INFO, lambda request, conn: request.make_response(0, body=b'{"properties":{}}')
        )
        processor = self.cluster.broker.dispatcher.processors[RequestCode.GET_CONSUMER_RUNNING_INFO].__self__
        processor.call_timeout = 1.0
        self.cluster.broker.ctx.topics.put(TopicConfig("T_fwd", 1, 1))
        self.cluster.broker.ctx.offsets.commit("C_fwd", "T_fwd", 0, 0)
        clients = [RemotingClient(dispatcher=silent), RemotingClient(dispatcher=answering)]
        try:
            for i, client in enumerate(clients):
                hb = RemotingCommand.request(RequestCode.HEART_BEAT, None, heartbeat(f"127.0.0.1@c{i}", "C_fwd", "T_fwd"))
                self.assertEqual((await client.invoke(self.cluster.broker_addr, hb)).code, 0)

            started = time.monotonic()
            quiet = await self.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "C_fwd", "clientId": "127.0.0.1@c0"})
            self.assertEqual(quiet.code, ResponseCode.CONSUME_MSG_TIMEOUT)
            self.assertLess(time.monotonic() - started, 3)
            answered = await self.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "C_fwd", "clientId": "127.0.0.1@c1"})
            self.assertEqual((answered.code, answered.body), (0, b'{"properties":{}}'))
            offline = await self.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "C_fwd", "clientId": "nobody"})
            self.assertEqual((offline.code, offline.remark), (ResponseCode.SYSTEM_ERROR, "The Consumer <C_fwd> <nobody> not online"))

            conns = fastjson.loads((await self.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "C_fwd"})).body)
            self.assertEqual(sorted(c["clientId"] for c in conns["connectionSet"]), ["127.0.0.1@c0", "127.0.0.1@c1"])
            producers = fastjson.loads((await self.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "P_raw"})).body)
            self.assertEqual(len(producers["connectionSet"]), 2)
            self.assertIn("P_raw", fastjson.loads((await self.call(RequestCode.GET_ALL_PRODUCER_INFO)).body)["data"])

            reset = await self.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "T_fwd", "group": "C_fwd", "timestamp": -1, "isForce": "true"})
            self.assertEqual(reset.code, 0)
            self.assertEqual(list(fastjson.loads(reset.body)["offsetTable"].values()), [0])
            await wait_until(lambda: len(resets) == 1)
            self.assertEqual(resets[0].ext_fields["group"], "C_fwd")
            nobody = await self.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "T_fwd", "group": "C_none", "timestamp": -1, "isForce": "true"})
            self.assertEqual(nobody.code, ResponseCode.SYSTEM_ERROR)
        finally:
            for client in clients:
                await client.close()



class DefaultBrokerConfigTest(AdminTestCase):
    @defer.inlineCallbacks
    def test_update_broker_config_off_by_default(self):
        response = yield defer.ensureDeferred(self.broker_call(RequestCode.UPDATE_BROKER_CONFIG, None, b"traceOn=false\n"))
        self.assertEqual(response.code, ResponseCode.NO_PERMISSION)
        self.assertTrue(self.cluster.broker.config.traceOn)

    @defer.inlineCallbacks
    def test_broker_config_has_every_key_java_reports(self):
        """mqadmin exportConfigs read filterServerNums/slaveReadEnable/useTLS unchecked and died with an NPE."""
        response = yield defer.ensureDeferred(self.broker_call(RequestCode.GET_BROKER_CONFIG))
        settings = dict(line.split("=", 1) for line in response.body.decode().splitlines())
        java = {r["argv"][1]: r["stdout"] for r in records("scenario-admin.client.jsonl") if r.get("kind") == "CMD"}
        java_keys = {line.split()[0] for line in java["getBrokerConfig"].splitlines() if "=" in line and not line.startswith("=")}
        self.assertEqual(java_keys - set(settings), set())
        for key in ("brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
                    "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable",
                    "traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup"):
            self.assertIn(key, settings)
        self.assertEqual(settings["checkCRCOnRecover"], "true")  # Java's spelling, not checkCrcOnRecover
        self.assertNotIn("checkCrcOnRecover", settings)
        # the HA port actually listened on: listenPort + 1, or any free port when the broker port was 0 (tests)
        self.assertEqual(settings["haListenPort"], str(self.cluster.broker.ctx.ha.master.listen_port))
