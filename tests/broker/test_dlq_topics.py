"""DLQ topics are readable: made read+write, and write-only ones left by earlier rmqtx versions repaired on load."""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path

from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.topics import TopicConfigManager
from rmqtx.common.topic_config import TopicConfig


class DlqTopicLoadTest(unittest.TestCase):
    def test_write_only_dlq_from_an_old_store_becomes_readable(self) -> None:
        with tempfile.TemporaryDirectory(prefix="rmqtx-topics-") as root:
            config_dir = Path(root) / "config"
            config_dir.mkdir()
            table = {name: TopicConfig(name, 1, 1, perm).to_json()
                     for name, perm in (("%DLQ%G_old", 2), ("%DLQ%G_closed", 0), ("T_write_only", 2))}
            (config_dir / "topics.json").write_text(json.dumps({"topicConfigTable": table, "dataVersion": {"counter": 3, "timestamp": 1}}))
            topics = TopicConfigManager(BrokerConfig(), root)
            topics.load()
            self.assertEqual(topics.get("%DLQ%G_old").perm, 6)
            self.assertEqual(topics.get("%DLQ%G_closed").perm, 0)  # an operator's choice stays
            self.assertEqual(topics.get("T_write_only").perm, 2)


if __name__ == "__main__":
    unittest.main()
