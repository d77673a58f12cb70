"""config/consumerFilter.json read back: good entries load, bad ones are skipped one by one, nothing stops the broker."""

from __future__ import annotations

import os
import tempfile
import unittest

import orjson

from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.filters import ConsumerFilterManager
from rmqtx.filter import consumer_bloom_key


class FilterFileTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.config = BrokerConfig.from_properties({"storePathRootDir": self.tmp.name, "enableCalcFilterBitMap": "true"})
        os.makedirs(os.path.join(self.tmp.name, "config"))

    def manager(self) -> ConsumerFilterManager:
        return ConsumerFilterManager(self.config, lambda group: True, clock=lambda: 1_700_000_100.0)

    def write(self, content: object) -> None:
        with open(os.path.join(self.tmp.name, "config", "consumerFilter.json"), "wb") as fh:
            fh.write(content if isinstance(content, bytes) else orjson.dumps(content))

    def entry(self, group: str, **changes: object) -> dict:
        bloom = self.manager().bloom.generate(consumer_bloom_key(group, "T"))
        data = {"bloomFilterData": {"bitNum": bloom.bit_num, "bitPos": list(bloom.bit_pos)}, "bornTime": 1_700_000_000_000,
                "clientVersion": 7, "consumerGroup": group, "dead": False, "deadTime": 0, "expression": "a > 1",
                "expressionType": "SQL92", "topic": "T"}
        data.update(changes)
        return data

    def test_bad_entries_are_skipped_and_good_ones_load(self) -> None:
        groups = {"G_ok": self.entry("G_ok"), "G_syntax": self.entry("G_syntax", expression="a >"),
                  "G_no_expr": {k: v for k, v in self.entry("G_no_expr").items() if k != "expression"},
                  "G_bad_time": self.entry("G_bad_time", bornTime="yesterday"), "G_not_object": [1, 2]}
        self.write({"filterDataByTopic": {"T": {"groupFilterData": groups, "topic": "T"}}})
        filters = self.manager()
        filters.load()
        self.assertEqual([g for g in groups if filters.get("T", g) is not None], ["G_ok"])
        loaded = filters.get("T", "G_ok")
        self.assertEqual((loaded.born_time, loaded.client_version, loaded.expression), (1_700_000_000_000, 7, "a > 1"))
        self.assertTrue(loaded.dead)  # dead from load until a heartbeat revives it
        self.assertEqual(loaded.dead_time, 1_700_000_100_000 - 30_000)

    def test_files_that_are_not_a_filter_table_load_nothing(self) -> None:
        for content in (b"[1, 2, 3]", b'{"filterDataByTopic": [1]}', b'{"filterDataByTopic": {"T": 5}}', b"{not json"):
            self.write(content)
            filters = self.manager()
            filters.load()
            self.assertIsNone(filters.get("T", "G_ok"), content)

    def test_a_changed_bloom_filter_drops_everything(self) -> None:
        self.write({"filterDataByTopic": {"T": {"groupFilterData": {
            "G_ok": self.entry("G_ok"), "G_other": self.entry("G_other", bloomFilterData={"bitNum": 8, "bitPos": [1]})},
            "topic": "T"}}})
        filters = self.manager()
        filters.load()
        self.assertIsNone(filters.get("T", "G_ok"))


if __name__ == "__main__":
    unittest.main()
