"""StoreConfig reads and reports RocketMQ's own key names, including the irregular ones."""

from __future__ import annotations

import unittest

from rmqtx.store.config import StoreConfig


class StoreConfigKeysTest(unittest.TestCase):
    def test_check_crc_on_recover_uses_javas_spelling(self) -> None:
        """Java's key is checkCRCOnRecover; a broker.conf with it was ignored and getBrokerConfig said checkCrcOnRecover."""
        config = StoreConfig.from_properties({"checkCRCOnRecover": "false"})
        self.assertFalse(config.check_crc_on_recover)
        self.assertNotIn("checkCRCOnRecover", config.extra)
        props = config.to_properties()
        self.assertEqual(props["checkCRCOnRecover"], "false")
        self.assertNotIn("checkCrcOnRecover", props)
        self.assertFalse(StoreConfig.from_properties(props).check_crc_on_recover)  # round trip

    def test_plain_camel_keys_and_old_spellings(self) -> None:
        config = StoreConfig.from_properties({"mapedFileSizeCommitLog": "1048576", "maxHashSlotNum": "100"})
        self.assertEqual((config.mapped_file_size_commit_log, config.max_hash_slot_num), (1048576, 100))
        self.assertEqual(config.to_properties()["mappedFileSizeCommitLog"], "1048576")
