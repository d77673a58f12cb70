"""Apache 5.x's topic attributes over remoting: UPDATE_AND_CREATE_TOPIC's ``attributes`` header (as 5.x
``mqadmin updateTopic -a +message.type=FIFO`` sends it) is checked by AttributeUtil's rules, kept in the topic
table, answered by GET_TOPIC_CONFIG / GET_ALL_TOPIC_CONFIG, persisted in topics.json and registered with the
NameServer; a topic created without attributes keeps 4.9.8's bean byte for byte."""

from __future__ import annotations

import json

from twisted.internet import defer

from rmqtx.common import fastjson
from rmqtx.common.topic_config import TopicConfig
from rmqtx.remoting.codes import RequestCode, ResponseCode
from tests.admin.support import AdminTestCase
from tests.client.support import wait_until

#: Java's HashSet of TopicMessageType's values, as the 5.x broker prints it in a refusal.
TYPES = "[UNSPECIFIED, MIXED, TRANSACTION, FIFO, DELAY, NORMAL]"


def create_fields(topic: str, attributes: str | None = None, queues: int = 2) -> dict:
    fields: dict = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                    "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
    if attributes is not None:
        fields["attributes"] = attributes
    return fields


class TopicAttributesTest(AdminTestCase):
    async def create(self, topic: str, attributes: str | None = None, queues: int = 2) -> tuple[int, str]:
        response = await self.broker_call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_fields(topic, attributes, queues))
        return response.code, response.remark or ""

    async def bean(self, topic: str) -> bytes:
        response = await self.broker_call(RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
        self.assertEqual(response.code, ResponseCode.SUCCESS, response.remark)
        return response.body

    @defer.inlineCallbacks
    def test_created_kept_answered_persisted_and_routed(self):
        yield defer.ensureDeferred(self._lifecycle())

    async def _lifecycle(self) -> None:
        self.assertEqual(await self.create("T_fifo", "+message.type=FIFO"), (ResponseCode.SUCCESS, "not set any response code"))
        self.assertEqual(await self.create("T_plain"), (ResponseCode.SUCCESS, "not set any response code"))
        self.assertEqual(await self.bean("T_fifo"),
                         b'{"attributes":{"message.type":"FIFO"},"order":false,"perm":6,"readQueueNums":2,'
                         b'"topicFilterType":"SINGLE_TAG","topicName":"T_fifo","topicSysFlag":0,"writeQueueNums":2}')
        self.assertEqual(await self.bean("T_plain"),  # 4.9.8's bean: no attributes key at all
                         b'{"order":false,"perm":6,"readQueueNums":2,"topicFilterType":"SINGLE_TAG",'
                         b'"topicName":"T_plain","topicSysFlag":0,"writeQueueNums":2}')
        table = fastjson.loads((await self.broker_call(RequestCode.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
        self.assertEqual(table["T_fifo"]["attributes"], {"message.type": "FIFO"})
        self.assertNotIn("attributes", table["T_plain"])
        await self.until_routed("T_fifo")

        # a 4.x updateTopic (no attributes field) changes the queues and keeps the type
        self.assertEqual((await self.create("T_fifo", None, 4))[0], ResponseCode.SUCCESS)
        self.assertEqual(self.cluster.broker.ctx.topics.get("T_fifo").attributes, {"message.type": "FIFO"})
        self.assertEqual(self.cluster.broker.ctx.topics.get("T_fifo").writeQueueNums, 4)
        # message.type may change after creation, and be deleted (NORMAL again); a second key is added beside it
        self.assertEqual((await self.create("T_fifo", "+message.type=DELAY,+reserve.time=7"))[0], ResponseCode.SUCCESS)
        self.assertEqual(self.cluster.broker.ctx.topics.get("T_fifo").attributes,
                         {"message.type": "DELAY", "reserve.time": "7"})
        topics_json = self.cluster.broker.ctx.topics.file.path

        def persisted() -> dict:
            try:
                return json.loads(topics_json.read_text())["topicConfigTable"]
            except (OSError, ValueError, KeyError):
                return {}

        await wait_until(lambda: persisted().get("T_fifo", {}).get("attributes") == {"message.type": "DELAY",
                                                                                      "reserve.time": "7"})
        self.assertNotIn("attributes", persisted()["T_plain"])
        self.assertIn('"attributes":{\n\t\t\t\t"message.type":"DELAY",', topics_json.read_text().replace("\r", ""))
        self.assertEqual((await self.create("T_fifo", "-reserve.time,-message.type"))[0], ResponseCode.SUCCESS)
        self.assertEqual(self.cluster.broker.ctx.topics.get("T_fifo").attributes, {})
        self.assertNotIn(b"attributes", await self.bean("T_fifo"))

        # the table a restarted broker reads back
        reread = TopicConfig.from_json({"topicName": "T", "attributes": {"message.type": "TRANSACTION"}})
        self.assertEqual(reread.attributes, {"message.type": "TRANSACTION"})

    @defer.inlineCallbacks
    def test_refusals_as_the_5x_broker_words_them(self):
        yield defer.ensureDeferred(self._refusals())

    async def _refusals(self) -> None:
        self.assertEqual((await self.create("T_base", "+message.type=FIFO"))[0], ResponseCode.SUCCESS)
        cases = [
            ("T_new", "+message.type=ORDERED", ResponseCode.SYSTEM_ERROR, f"value is not in set: {TYPES}"),
            ("T_new", "+colour=red", ResponseCode.SYSTEM_ERROR, "unsupported key: colour"),
            ("T_new", "-message.type", ResponseCode.SYSTEM_ERROR,
             "only add attribute is supported while creating topic. key: message.type"),
            ("T_new", "message.type", ResponseCode.SYSTEM_ERROR, "delete attribute format is wrong: message.type"),
            ("T_new", "message.type=FIFO", ResponseCode.SYSTEM_ERROR, "add/alter attribute format is wrong: message.type"),
            ("T_new", "+message.type=FIFO,+message.type=DELAY", ResponseCode.SYSTEM_ERROR,
             "key duplication: +message.type"),
            ("T_new", "+reserve.time=-2", ResponseCode.SYSTEM_ERROR, f"value is not in range(-1, {2**63 - 1})"),
            ("T_new", "+reserve.time=soon", ResponseCode.SYSTEM_ERROR, 'For input string: "soon"'),
            ("T_new", "+message.type=MIXED", ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."),
            ("T_base", "+queue.type=BatchCQ", ResponseCode.SYSTEM_ERROR,
             "attempt to update an unchangeable attribute. key: queue.type"),
            ("T_base", "-cleanup.policy", ResponseCode.SYSTEM_ERROR, "attempt to delete a nonexistent key: cleanup.policy"),
        ]
        for topic, attributes, code, remark in cases:
            self.assertEqual(await self.create(topic, attributes), (code, remark), attributes)
        self.assertIsNone(self.cluster.broker.ctx.topics.get("T_new"), "nothing refused was created")
        self.assertEqual(self.cluster.broker.ctx.topics.get("T_base").attributes, {"message.type": "FIFO"})
        # an unchangeable key may be given when the topic is created
        self.assertEqual((await self.create("T_batch", "+queue.type=SimpleCQ"))[0], ResponseCode.SUCCESS)


class RmqadminAttributesTest(AdminTestCase):
    @defer.inlineCallbacks
    def test_update_topic_with_attributes(self):
        """``rmqadmin updateTopic -a +message.type=FIFO``, as 5.x mqadmin's ``-a``; a refusal is the broker's remark."""
        yield defer.ensureDeferred(self.ok("updateTopic", "-c", "DefaultCluster", "-t", "T_cli", "-a", "+message.type=FIFO"))
        self.assertEqual(self.cluster.broker.ctx.topics.get("T_cli").attributes, {"message.type": "FIFO"})
        code, _, err = yield defer.ensureDeferred(self.rmqadmin("updateTopic", "-c", "DefaultCluster", "-t", "T_cli2",
                                                                "-a", "+message.type=SOMETIMES"))
        self.assertNotEqual(code, 0)
        self.assertIn("value is not in set", err)
        self.assertIsNone(self.cluster.broker.ctx.topics.get("T_cli2"))


class MixedMessageTypeTest(AdminTestCase):
    broker_conf = {"enableMixedMessageType": "true"}

    @defer.inlineCallbacks
    def test_mixed_allowed_when_enabled(self):
        response = yield defer.ensureDeferred(self.broker_call(
            RequestCode.UPDATE_AND_CREATE_TOPIC, create_fields("T_mixed", "+message.type=MIXED")))
        self.assertEqual(response.code, ResponseCode.SUCCESS, response.remark)
        self.assertEqual(self.cluster.broker.ctx.topics.get("T_mixed").attributes, {"message.type": "MIXED"})


class CompactFormTest(AdminTestCase):
    def test_compressed_register_form(self):
        """A compressed REGISTER_BROKER body keeps 4.9.8's five fields (a 4.9.8 NameServer's TopicConfig.decode
        fails on six); the sixth a 5.x broker appends is read."""
        typed = TopicConfig("T", 2, 2, attributes={"message.type": "FIFO"})
        self.assertEqual(typed.compact(), "T 2 2 6 SINGLE_TAG")
        self.assertEqual(TopicConfig.from_compact('T 2 2 6 SINGLE_TAG {"message.type":"FIFO"}').attributes,
                         {"message.type": "FIFO"})
        self.assertEqual(TopicConfig.from_compact("T 2 2 6 SINGLE_TAG {}").attributes, {})
