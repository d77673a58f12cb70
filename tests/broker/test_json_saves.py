"""Config files written in bursts: one write per burst, the newest content last."""

from __future__ import annotations

import tempfile
from pathlib import Path

from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.broker.jsonfiles import JsonConfigFile, loads_fastjson


class SaveLatestTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.file = JsonConfigFile(Path(self.dir.name) / "config" / "topics.json")
        self.state = {"topics": []}
        self.renders = 0

    def render(self) -> dict:
        self.renders += 1
        return {"topics": list(self.state["topics"])}

    async def _burst(self) -> None:
        saves = []
        for i in range(200):  # as 200 UPDATE_AND_CREATE_TOPIC in a row
            self.state["topics"].append(f"T{i}")
            saves.append(self.file.save_latest(self.render))
        await defer.gatherResults(saves)
        await self.file.drain()
        self.assertEqual(loads_fastjson(self.file.path.read_bytes()), {"topics": [f"T{i}" for i in range(200)]})
        self.assertLessEqual(self.renders, 2)  # the first change's write, then one for all the others
        # later changes are saved too, once the burst's write is over
        self.state["topics"].append("late")
        await self.file.save_latest(self.render)
        self.assertEqual(loads_fastjson(self.file.path.read_bytes())["topics"][-1], "late")

    def test_burst_shares_one_write(self):
        return defer.ensureDeferred(self._burst())


class EntryCacheTest(unittest.TestCase):
    """topics.json and subscriptionGroup.json rendered entry by entry: the same bytes as a whole render."""

    def test_topics_file_matches_whole_render(self):
        from rmqtx.broker.config import BrokerConfig
        from rmqtx.broker.topics import TopicConfigManager
        from rmqtx.common.topic_config import TopicConfig
        from rmqtx.broker.jsonfiles import pretty

        with tempfile.TemporaryDirectory() as root:
            topics = TopicConfigManager(BrokerConfig(), root)
            self.assertEqual(pretty(topics.file_json()), pretty(topics.to_json()))
            for i in range(50):
                topics.table[f"T{i}"] = TopicConfig(f"T{i}", 4, 4)
            first = pretty(topics.file_json())
            self.assertEqual(first, pretty(topics.to_json()))
            topics.table["T3"] = TopicConfig("T3", 8, 8, attributes={"+message.type": "FIFO"})  # replaced
            del topics.table["T7"]
            topics.table["T50"] = TopicConfig("T50", 1, 1)
            second = pretty(topics.file_json())
            self.assertEqual(second, pretty(topics.to_json()))
            self.assertNotEqual(first, second)
            self.assertIn('"T50"', second)
            self.assertNotIn('"T7"', second)
            self.assertEqual(loads_fastjson(second)["topicConfigTable"]["T3"]["readQueueNums"], 8)
            del topics.table["T50"], topics.table["T3"]
            topics.table["T3"] = TopicConfig("T3", 4, 4)  # re-added: moves to the end, as a dict does
            self.assertEqual(pretty(topics.file_json()), pretty(topics.to_json()))

    def test_groups_file_matches_whole_render(self):
        from rmqtx.broker.config import BrokerConfig
        from rmqtx.broker.groups import SubscriptionGroupConfig, SubscriptionGroupManager
        from rmqtx.broker.jsonfiles import pretty

        with tempfile.TemporaryDirectory() as root:
            groups = SubscriptionGroupManager(BrokerConfig(), root)
            for i in range(20):
                groups.table[f"G{i}"] = SubscriptionGroupConfig(groupName=f"G{i}")
            self.assertEqual(pretty(groups.file_json()), pretty(groups.to_json()))
            groups.table["G1"] = SubscriptionGroupConfig(groupName="G1", retryMaxTimes=3)
            self.assertEqual(pretty(groups.file_json()), pretty(groups.to_json()))
            self.assertEqual(loads_fastjson(pretty(groups.file_json()))["subscriptionGroupTable"]["G1"]["retryMaxTimes"], 3)
            self.assertEqual(pretty({}), "{}")
