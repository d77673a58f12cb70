"""The admin codes Apache's 5.x mqadmin sends, straight on the wire (tests/admin/test_mqadmin5_java.py runs
the tool itself): the topic and group lists, the cold-read table, the HA status, the readahead switch, and
Java's answers for a broker without controller mode, RocksDB metadata or the RocksDB timer."""

from __future__ import annotations

import json

from twisted.internet import defer

from rmqtx.common import fastjson
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from tests.admin.support import AdminTestCase


def topic_list(*configs: dict) -> bytes:
    return json.dumps({"topicConfigList": list(configs)}).encode()


class BrokerCodes5xTest(AdminTestCase):
    async def call(self, code: int, fields: dict | None = None, body: bytes = b"") -> RemotingCommand:
        return await self.broker_call(code, fields, body)

    @defer.inlineCallbacks
    def test_topic_list_checks_every_name_then_creates_all_at_once(self):
        yield defer.ensureDeferred(self._topic_list())

    async def _topic_list(self) -> None:
        topics = self.cluster.broker.ctx.topics
        before = topics.data_version.counter
        for bad, remark in (({"topicName": "../x"}, "illegal characters"), ({"topicName": "TBW102"}, "conflict with system topic"),
                            ({"topicName": "T_mixed", "attributes": {"+message.type": "MIXED"}}, "MIXED message type is not supported.")):
            response = await self.call(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, None, topic_list({"topicName": "T_first"}, bad))
            self.assertEqual(response.code, ResponseCode.INVALID_PARAMETER)
            self.assertIn(remark, response.remark)
        self.assertIsNone(topics.get("T_first"))  # nothing of a refused list is made
        response = await self.call(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, None, topic_list(
            {"topicName": "T_l1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "attributes": {"+message.type": "FIFO"}},
            {"topicName": "T_l2", "readQueueNums": 3, "writeQueueNums": 3, "perm": 4}))
        self.assertEqual(response.code, ResponseCode.SUCCESS)
        self.assertEqual(topics.data_version.counter, before + 1)  # one change for the whole list
        self.assertEqual((topics.get("T_l1").attributes, topics.get("T_l2").perm), ({"message.type": "FIFO"}, 4))
        await self.until_routed("T_l2")
        # attributes follow 5.x's rules as on UPDATE_AND_CREATE_TOPIC: queue.type cannot change after creation
        response = await self.call(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, None, topic_list(
            {"topicName": "T_l1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "attributes": {"+queue.type": "BatchCQ"}}))
        self.assertEqual((response.code, response.remark), (ResponseCode.SYSTEM_ERROR, "attempt to update an unchangeable attribute. key: queue.type"))

    @defer.inlineCallbacks
    def test_group_list(self):
        body = json.dumps({"groupConfigList": [{"groupName": "G_l1"}, {"groupName": "G_l2", "retryMaxTimes": 3}]}).encode()
        response = yield defer.ensureDeferred(self.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, None, body))
        self.assertEqual(response.code, ResponseCode.SUCCESS)
        self.assertEqual(self.cluster.broker.ctx.groups.table["G_l2"].retryMaxTimes, 3)
        bad = json.dumps({"groupConfigList": [{"groupName": "G_l3"}, {"groupName": "a/b"}]}).encode()
        response = yield defer.ensureDeferred(self.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, None, bad))
        self.assertEqual(response.code, ResponseCode.INVALID_PARAMETER)
        self.assertNotIn("G_l3", self.cluster.broker.ctx.groups.table)

    @defer.inlineCallbacks
    def test_cold_read_table(self):
        yield defer.ensureDeferred(self.call(RequestCode.UPDATE_COLD_DATA_FLOW_CTR_CONFIG, None, b"G_a=1000\nG_b=x\n"))
        info = yield defer.ensureDeferred(self.call(RequestCode.GET_COLD_DATA_FLOW_CTR_INFO))
        self.assertEqual(fastjson.loads(info.body), {"runtimeTable": {}, "configTable": {"G_a": 1000}, "cgColdReadThreshold": 3145728,
                                                     "globalColdReadThreshold": 104857600, "globalAcc": 0})
        yield defer.ensureDeferred(self.call(RequestCode.REMOVE_COLD_DATA_FLOW_CTR_CONFIG, None, b"G_a"))
        info = yield defer.ensureDeferred(self.call(RequestCode.GET_COLD_DATA_FLOW_CTR_INFO))
        self.assertEqual(fastjson.loads(info.body)["configTable"], {})

    @defer.inlineCallbacks
    def test_ha_status_and_readahead(self):
        status = yield defer.ensureDeferred(self.call(RequestCode.GET_BROKER_HA_STATUS))
        info = fastjson.loads(status.body)
        self.assertEqual((info["master"], info["haConnectionInfo"], info["inSyncSlaveNums"]), (True, [], 0))
        self.assertEqual(info["masterCommitLogMaxOffset"], self.cluster.broker.ctx.store.max_phy_offset)
        queue = self.cluster.broker.ctx.store.commitlog.queue
        for mode, code, remark in (("7", ResponseCode.INVALID_PARAMETER, "set commitlog readahead mode param value error"),
                                   ("x", ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode failed"),
                                   ("1", ResponseCode.SUCCESS, "set commitlog readahead mode success, mode: 1")):
            response = yield defer.ensureDeferred(self.call(RequestCode.SET_COMMITLOG_READ_MODE, {"READ_AHEAD_MODE": mode}))
            self.assertEqual((response.code, response.remark), (code, remark))
        self.assertFalse(queue.readahead)
        yield defer.ensureDeferred(self.call(RequestCode.SET_COMMITLOG_READ_MODE, {"READ_AHEAD_MODE": "0"}))
        self.assertTrue(queue.readahead)

    @defer.inlineCallbacks
    def test_answers_without_the_feature(self):
        expected = {
            RequestCode.GET_BROKER_EPOCH_CACHE: (ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ", b""),
            RequestCode.RESET_MASTER_FLUSH_OFFSET: (ResponseCode.SUCCESS, None, b""),
            RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS: (ResponseCode.SUCCESS, None, b'{"checkStatus":2}'),
            RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON: (ResponseCode.SUCCESS, "export done.", b""),
            RequestCode.SWITCH_TIMER_ENGINE: (ResponseCode.INVALID_PARAMETER, "timerUseRocksDB muse be configured true when broker start", b""),
            RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC: (3, " request type 513 not supported", b""),
        }
        for code, (want, remark, body) in expected.items():
            response = yield defer.ensureDeferred(self.call(code, {"topic": "T"}))
            self.assertEqual((response.code, response.remark, response.body or b""), (want, remark, body), code)
