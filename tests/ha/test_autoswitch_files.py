"""Controller mode's small formats, checked against Apache's: the epoch file (CheckpointFile's example in
its own javadoc), the broker id files, and the 5.x HA frame layouts (field offsets as Apache's readers use)."""

from __future__ import annotations

import os
import struct
import tempfile
import unittest

from rmqtx.broker.controller.identity import identity_files
from rmqtx.broker.ha import autoswitch_wire as w
from rmqtx.store.epoch import EpochCache, EpochEntry, decode_entries, encode_entries


class EpochFileTest(unittest.TestCase):
    def test_apache_example_bytes(self) -> None:
        # CheckpointFile's javadoc: size 2, crc32 773307083, then "7-7000" and "8-8000"
        text = encode_entries([EpochEntry(7, 7000), EpochEntry(8, 8000)])
        self.assertEqual(text, "2\n773307083\n7-7000\n8-8000\n")
        self.assertEqual([(e.epoch, e.start) for e in decode_entries(text)], [(7, 7000), (8, 8000)])

    def test_bad_crc_falls_back_to_bak(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "epochFileCheckpoint")
            cache = EpochCache(path)
            self.assertTrue(cache.append(1, 0))
            self.assertTrue(cache.append(2, 100))  # the first version is now path.bak
            with open(path, "w") as f:
                f.write("2\n1\n1-0\n2-100\n")
            again = EpochCache(path)
            again.load()
            self.assertEqual([(e.epoch, e.start) for e in again.entries], [(1, 0)])

    def test_append_refuses_empty_term_as_java(self) -> None:
        cache = EpochCache()
        self.assertTrue(cache.append(1, 0))
        self.assertFalse(cache.append(2, 0))  # nothing written in epoch 1: Java's appendEntry refuses
        self.assertFalse(cache.append(1, 50))
        self.assertTrue(cache.append(3, 50))
        self.assertEqual(cache.get(1).end, 50)  # type: ignore[union-attr]

    def test_consistent_point_and_truncation(self) -> None:
        old_master, new_master = EpochCache(), EpochCache()
        for cache in (old_master, new_master):
            cache.append(1, 0)
        old_master.append(2, 1000)  # the old master wrote on in epoch 2 alone ...
        old_master.set_last_end(1500)
        new_master.append(3, 1200)  # ... while the new master took over at 1200
        new_master.set_last_end(2000)
        self.assertEqual(old_master.consistent_point(new_master), 1000)
        old_master.truncate_from_offset(1000)
        self.assertEqual([(e.epoch, e.start) for e in old_master.entries], [(1, 0)])


class IdentityFileTest(unittest.TestCase):
    def test_apache_layout(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            applied, temp = identity_files(d)
            self.assertEqual(temp.path, os.path.join(d, "brokerIdentity-temp"))
            temp.save("DefaultCluster", "broker-a", 2, "127.0.0.1:10911;1700000000000")
            with open(temp.path) as f:
                self.assertEqual(f.read(), "DefaultCluster#broker-a#2#127.0.0.1:10911;1700000000000")
            applied.save("DefaultCluster", "broker-a", 2)
            temp.clear()
            with open(os.path.join(d, "brokerIdentity")) as f:
                self.assertEqual(f.read(), "DefaultCluster#broker-a#2")
            again, temp2 = identity_files(d)
            again.read()
            temp2.read()
            self.assertTrue(again.loaded)
            self.assertEqual(again.broker_id, 2)
            self.assertFalse(temp2.loaded)


class WireTest(unittest.TestCase):
    def test_slave_frames(self) -> None:
        hs = w.slave_handshake(3, True, False)
        self.assertEqual(len(hs), 16)  # AutoSwitchHAClient.HANDSHAKE_HEADER_SIZE
        # Apache's master reads the id at HANDSHAKE_HEADER_SIZE - 8, the flags at -12 and -10
        self.assertEqual(struct.unpack_from(">i", hs, 0)[0], w.HANDSHAKE)
        self.assertEqual(struct.unpack_from(">q", hs, 8)[0], 3)
        self.assertEqual(struct.unpack_from(">h", hs, 4)[0], 1)
        self.assertEqual(struct.unpack_from(">h", hs, 6)[0], 0)
        report = w.slave_report(12345)
        self.assertEqual(len(report), 12)  # TRANSFER_HEADER_SIZE
        self.assertEqual(struct.unpack_from(">iq", report), (w.TRANSFER, 12345))

    def test_master_frames(self) -> None:
        hs = w.master_handshake(900, 2, [(1, 0), (2, 500)])
        self.assertEqual(len(hs), 20 + 24)
        self.assertEqual(struct.unpack_from(">iiqi", hs), (w.HANDSHAKE, 24, 900, 2))
        self.assertEqual(w.parse_epoch_entries(hs[20:]), [(1, 0), (2, 500)])
        head = w.master_transfer_header(10, 500, 2, 500, 480)
        self.assertEqual(len(head), 36)  # AutoSwitchHAConnection.TRANSFER_HEADER_SIZE
        self.assertEqual(struct.unpack_from(">iiqiqq", head), (w.TRANSFER, 10, 500, 2, 500, 480))
