"""Re-put copies (send-back, schedule due, DLQ, commit) against what Apache 4.9.8 stored in the captures."""

from __future__ import annotations

import tempfile
import unittest

from rmqtx.broker.reput import committed_copy, due_copy, sendback_properties
from rmqtx.common.message import properties_to_string
from rmqtx.store.record import Record
from rmqtx.store.tools import scan_commit_log
from tests.fixtures import records
from tests.store.helpers import extract


def java_store_records() -> list[Record]:
    """Every message record of the clean Java 4.9.8 store fixture."""
    with tempfile.TemporaryDirectory(prefix="rmqtx-reput-") as tmp:
        root = extract("store-java-4.9.8-clean.tar.gz", tmp)
        return [rec for _, kind, _, rec in scan_commit_log(root) if kind == "msg"]


def captured_retry_records() -> tuple[dict, dict]:
    """The message as first pulled from T_retry_fix, and as pulled again from %RETRY%C_retry_fix."""
    seen = [m for r in records("scenario-retry.jsonl") for m in (r.get("decoded") or {}).get("body_messages", [])]
    first = next(m for m in seen if m["topic"] == "T_retry_fix")
    retried = next(m for m in seen if m["topic"] == "%RETRY%C_retry_fix")
    return first, retried


def as_record(m: dict, topic: str | None = None, properties: str | None = None) -> Record:
    """A decoded capture message as the store's Record."""
    host, port = m["storeHost"].rsplit(":", 1)
    born, born_port = m["bornHost"].rsplit(":", 1)
    return Record(
        m["totalSize"], 0, m["bodyCRC"], m["queueId"], m["flag"], m["queueOffset"], m["physicalOffset"], m["sysFlag"],
        m["bornTimestamp"], born, int(born_port), m["storeTimestamp"], host, int(port), m["reconsumeTimes"],
        m["preparedTransactionOffset"], m["body_text"].encode(), topic or m["topic"],
        m["properties_raw"] if properties is None else properties,
    )


class SendBackFromCaptureTest(unittest.TestCase):
    """scenario-retry: one RECONSUME_LATER (delayLevel 0 -> 3), redelivered through the schedule topic."""

    def test_retry_copy_string_is_byte_identical_to_java(self) -> None:
        first, retried = captured_retry_records()
        original = as_record(first)
        props = sendback_properties(original, "7F000001000051AF00000000000009CA", 3 + original.reconsume_times)
        # the store's delay redirect adds the real place, then the schedule copy goes out when due
        props["REAL_TOPIC"], props["REAL_QID"] = "%RETRY%C_retry_fix", "0"
        scheduled = as_record(first, topic="SCHEDULE_TOPIC_XXXX", properties=properties_to_string(props))
        copy = due_copy(scheduled)
        self.assertEqual(copy.properties, retried["properties_raw"])
        self.assertEqual((copy.topic, copy.queue_id), ("%RETRY%C_retry_fix", 0))
        self.assertEqual(copy.prepared_transaction_offset, 0)

    def test_dead_letter_copy_follows_java_rules_key_by_key(self) -> None:
        _, retried = captured_retry_records()
        props = sendback_properties(as_record(retried), "7F000001000051AF0000000000000C2B", 0)
        expected = dict(retried["properties"], WAIT="false", DELAY="0")  # everything else kept, stale REAL_* too
        self.assertEqual(props, expected)
        self.assertEqual(list(props), list(expected))
        self.assertEqual(props["ORIGIN_MESSAGE_ID"], "7F000001000051AF00000000000009CA")  # the first copy's id stays


class StoreFixtureCopiesTest(unittest.TestCase):
    """The clean Java store holds a delayed message and a committed transaction next to their originals."""

    def setUp(self) -> None:
        self.records = java_store_records()

    def one(self, topic: str, label: str) -> Record:
        return next(r for r in self.records if r.topic == topic and label in r.properties)

    def test_due_copy_equals_java_reput(self) -> None:
        scheduled = self.one("SCHEDULE_TOPIC_XXXX", "K-delay-1")
        java = self.one("S_B", "K-delay-1")
        copy = due_copy(scheduled)
        self.assertEqual(copy.properties, java.properties)  # DELAY, REAL_TOPIC, REAL_QID and WAIT all stay
        self.assertEqual((copy.topic, copy.queue_id, copy.sys_flag, copy.flag), (java.topic, java.queue_id, java.sys_flag, java.flag))
        self.assertEqual((copy.born_timestamp, copy.reconsume_times, copy.prepared_transaction_offset),
                         (java.born_timestamp, java.reconsume_times, java.prepared_transaction_offset))
        self.assertEqual(copy.store_host, (java.store_host, java.store_port))

    def test_committed_copy_equals_java_commit(self) -> None:
        half = self.one("RMQ_SYS_TRANS_HALF_TOPIC", "K-tx-COMMIT_MESSAGE")
        java = self.one("S_A", "K-tx-COMMIT_MESSAGE")
        copy, routing = committed_copy(half)
        self.assertEqual(copy.properties, java.properties)  # TRAN_MSG, PGROUP, REAL_TOPIC, REAL_QID stay stored
        self.assertEqual((copy.topic, copy.queue_id, copy.sys_flag), (java.topic, java.queue_id, java.sys_flag))
        self.assertEqual(copy.prepared_transaction_offset, java.prepared_transaction_offset)
        self.assertNotIn("TRAN_MSG", routing)
        self.assertNotIn("REAL_TOPIC", routing)

    def test_half_topic_is_never_a_due_target(self) -> None:
        scheduled = self.one("SCHEDULE_TOPIC_XXXX", "K-delay-1")
        bad = scheduled._replace(properties=scheduled.properties.replace("REAL_TOPIC\x01S_B", "REAL_TOPIC\x01RMQ_SYS_TRANS_HALF_TOPIC"))
        self.assertIsNone(due_copy(bad))
        self.assertIsNone(due_copy(scheduled._replace(properties="TAGS\x01x")))


if __name__ == "__main__":
    unittest.main()
