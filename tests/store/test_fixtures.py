"""Stores written by Apache RocketMQ 4.9.8 must open, read back identically and verify clean."""
from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import sys
import tempfile
import zlib

import orjson
from twisted.trial import unittest

from rmqtx.common.message import parse_properties
from rmqtx.common.sysflag import SYSFLAG_COMPRESSED
from rmqtx.store import GetStatus, MessageStore
from rmqtx.store import record as R
from rmqtx.store.tools import dump

from .helpers import FIXTURES, REPO, extract, fixture_config


def _dump_rows(root: str) -> dict[int, dict]:
    buf = io.BytesIO()
    dump(root, out=buf)
    rows = [orjson.loads(line) for line in buf.getvalue().splitlines()]
    return {r["commitLogOffset"]: r for r in rows}


def _verify_cli(root: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqtx.store", "verify", root], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


class CleanStoreTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.root = extract("store-java-4.9.8-clean.tar.gz", self.tmp.name)
        self.expected = [json.loads(line) for line in (FIXTURES / "messages.jsonl").read_text().splitlines()]

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_dump_matches_messages(self) -> None:
        rows = _dump_rows(self.root)
        self.assertEqual(len(rows), 197)
        checked = 0
        for m in self.expected:
            for sr in m["storedRecords"]:
                row = rows[sr["commitLogOffset"]]
                for k in ("topic", "queueId", "queueOffset", "storeSize", "sysFlag"):
                    self.assertEqual(row[k], sr[k], (m["seq"], k))
                self.assertEqual(row["tags"], m["tags"])
                self.assertEqual(row["keys"], m["keys"].split())
                props = row["properties"]
                for k, v in m["properties"].items():
                    if k != "WAIT":
                        self.assertEqual(props.get(k), v, (m["seq"], k))
                body = base64.b64decode(row["body"])
                self.assertEqual(len(body), sr["storedBodyLen"])
                self.assertEqual(R.body_crc(body), row["bodyCRC"])
                if row["sysFlag"] & SYSFLAG_COMPRESSED:
                    body = zlib.decompress(body)
                if "body" in m:
                    self.assertEqual(body.decode(), m["body"])
                else:
                    self.assertEqual(hashlib.sha256(body).hexdigest(), m["body_sha256"])
                checked += 1
            off = m["sendResult"].get("offsetMsgId")
            if off and "," not in off:
                self.assertIn(R.decode_offset_msg_id(off)[2], rows)
        self.assertEqual(checked, 195)

    def test_open_and_read_through_api(self) -> None:
        store = MessageStore(fixture_config("broker-store-clean.conf", self.root))
        store.load()
        try:
            ends: dict[tuple[str, int], int] = {}
            for m in self.expected:
                for sr in m["storedRecords"]:
                    key = (sr["topic"], sr["queueId"])
                    ends[key] = max(ends.get(key, 0), sr["queueOffset"] + 1)
            for (topic, qid), end in ends.items():
                self.assertEqual(store.get_max_offset_in_queue(topic, qid), end, (topic, qid))
            for m in self.expected:
                for sr in m["storedRecords"]:
                    raw = store.look_message_by_offset(sr["commitLogOffset"])
                    self.assertEqual(len(raw), sr["storeSize"])
                    if sr["topic"] == "RMQ_SYS_TRANS_HALF_TOPIC" or sr["sysFlag"] & 0xC in (4, 12):
                        continue
                    res = store.get_message(sr["topic"], sr["queueId"], sr["queueOffset"], 1)
                    self.assertEqual(res.status, GetStatus.FOUND)
                    self.assertEqual(res.messages[0], raw)
                    self.assertEqual(res.next_begin_offset, sr["queueOffset"] + 1)
            recs, _, _ = store.query_message("S_A", "K-batch-1", 32, 0, 2**62)
            self.assertEqual([R.decode_record(r).physical_offset for r in recs], [35257])
            uniq = self.expected[0]["properties"]["UNIQ_KEY"]
            recs, _, _ = store.query_message("S_A", uniq, 32, 0, 2**62)
            self.assertEqual([R.decode_record(r).physical_offset for r in recs], [0])
            # keys that were indexed into the first (full) index file and the second one
            for seq in (5, 190):
                m = self.expected[seq - 1]
                key = m["keys"].split()[0]
                recs, _, _ = store.query_message(m["topic"], key, 32, 0, 2**62)
                self.assertEqual(len(recs), 1, key)
        finally:
            store.shutdown()
        self.assertEqual(_verify_cli(self.root).returncode, 0)

    def test_verify_cli(self) -> None:
        proc = _verify_cli(self.root)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        summary = json.loads(proc.stdout)
        self.assertEqual(summary["records"], 197)
        self.assertEqual(summary["errors"], {})


class CrashStoreTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.root = extract("store-java-4.9.8-crash.tar.gz", self.tmp.name)
        self.acked = [json.loads(line) for line in (FIXTURES / "crash-acked.jsonl").read_text().splitlines()]

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_verify_before_recovery(self) -> None:
        proc = _verify_cli(self.root)
        self.assertEqual(proc.returncode, 0, proc.stdout)
        self.assertEqual(json.loads(proc.stdout)["undispatchedRecords"], 6)

    def test_recovers_acknowledged(self) -> None:
        store = MessageStore(fixture_config("broker-store-crash.conf", self.root))
        store.load()
        try:
            self.assertEqual(store.get_max_offset_in_queue("S_C", 0), 752)
            self.assertEqual(store.get_max_offset_in_queue("S_C", 1), 752)
            self.assertEqual(len(self.acked), 1503)
            for a in self.acked:
                _, _, offset = R.decode_offset_msg_id(a["offsetMsgId"])
                rec = R.decode_record(store.look_message_by_offset(offset))
                self.assertEqual((rec.queue_id, rec.queue_offset), (a["queueId"], a["queueOffset"]))
                self.assertEqual(parse_properties(rec.properties)["UNIQ_KEY"], a["msgId"])
                res = store.get_message("S_C", a["queueId"], a["queueOffset"], 1)
                self.assertEqual(R.decode_record(res.messages[0]).physical_offset, offset)
            # the one record whose send was reported failed is there too, and now dispatched
            res = store.get_message("S_C", 1, 751, 32)
            self.assertEqual(res.status, GetStatus.FOUND)
            self.assertEqual(R.decode_record(res.messages[0]).physical_offset, 1819849)
            self.assertEqual(res.next_begin_offset, 752)
            recs, _, _ = store.query_message("S_C", "K-crash-1502", 32, 0, 2**62)
            self.assertEqual(len(recs), 1)
        finally:
            store.shutdown()
        proc = _verify_cli(self.root)
        self.assertEqual(proc.returncode, 0, proc.stdout)
        summary = json.loads(proc.stdout)
        self.assertEqual(summary["undispatchedRecords"], 0)
        self.assertEqual(summary["records"], 1504)
