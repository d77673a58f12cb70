"""The compiled accelerator gives exactly what its pure-Python twins give, on captures and on random input."""

from __future__ import annotations

import os
import shutil
import struct
import sysconfig
import unittest
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtx import accel as accel_mod
from rmqtx.common import javacompat, message
from rmqtx.remoting import headers, serializer
from rmqtx.remoting.codes import SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.store import consume_queue as cq
from rmqtx.store import index
from rmqtx.store import record as R
from tests.fixtures import java_frames


def _compiled():
    """The built extension, whether or not RMQTX_PURE_PYTHON turned it off for the rest of the code."""
    try:
        from rmqtx import _accel
    except ImportError:
        return None
    return _accel


C = _compiled()


class Availability(unittest.TestCase):
    def test_built_where_a_compiler_exists(self) -> None:
        """CI builds it in place (tox commands_pre); a machine with cc and Python headers must have it."""
        has_headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
        if shutil.which("cc") and has_headers:
            self.assertIsNotNone(C, "rmqtx._accel is not built: run `python setup.py build_ext --inplace`")

    def test_required_names_match_the_build(self) -> None:
        """accel.REQUIRED (what a stale build is checked against) lists exactly what the extension defines."""
        if C is None:
            self.skipTest("rmqtx._accel is not built")
        self.assertEqual(sorted(accel_mod.REQUIRED), sorted(n for n in dir(C) if not n.startswith("_")))

    def test_pure_python_switch(self) -> None:
        self.assertEqual(accel_mod.accel is None, C is None or os.environ.get(accel_mod.PURE_ENV, "") not in ("", "0"))


def _binary_header(code: int, lang: int, version: int, opaque: int, flag: int, remark: bytes, entries: list[tuple[bytes, bytes]]) -> bytes:
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in entries)
    return struct.pack(">hBhiii", code, lang, version, opaque, flag, len(remark)) + remark + struct.pack(">i", len(ext)) + ext


def _command_outcome(fn, payload: bytes):
    """A decoded command as comparable values (every slot), or the kind of failure."""
    try:
        cmd = fn(payload)
    except serializer.FrameError as exc:
        return "frame-error", str(exc)
    return "ok", type(cmd), tuple((name, getattr(cmd, name)) for name in RemotingCommand.__slots__)


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except serializer.FrameError:
        return "frame-error", None


texts = st.text(max_size=40)
ints32 = st.integers(-(2**31), 2**31 - 1)


@unittest.skipIf(C is None, "rmqtx._accel not built (Availability says whether it should be)")
class SameResults(unittest.TestCase):
    def setUp(self) -> None:
        C.configure(serializer.FrameError)  # the serializer does this only when it uses the extension
        C.configure_command(RemotingCommand, serializer._LANGUAGES, "OTHER", SerializeType.ROCKETMQ,
                            serializer.decode_frame_payload_py)

    def test_java_captured_headers(self) -> None:
        count = 0
        for name, _rec, raw in java_frames():
            mark = struct.unpack_from(">i", raw, 4)[0]
            if (mark >> 24) != 1:
                continue
            header = raw[8 : 8 + (mark & 0xFFFFFF)]
            self.assertEqual(C.decode_binary_fields(header), serializer.decode_binary_fields_py(header), name)
            fields = serializer.decode_binary_fields_py(header)[6]
            if fields:
                order = tuple(fields)
                self.assertEqual(C.encode_binary_ext(fields, order), serializer.encode_binary_ext_py(fields, order))
            count += 1
        self.assertGreater(count, 10)

    @settings(max_examples=300, deadline=None)
    @given(st.integers(-32768, 32767), st.integers(0, 255), st.integers(-32768, 32767), ints32, ints32, texts,
           st.lists(st.tuples(texts, texts), max_size=6))
    def test_well_formed_headers(self, code, lang, version, opaque, flag, remark, entries) -> None:
        data = _binary_header(code, lang, version, opaque, flag, remark.encode(), [(k.encode(), v.encode()) for k, v in entries])
        self.assertEqual(C.decode_binary_fields(data), serializer.decode_binary_fields_py(data))
        ext = dict(entries)
        self.assertEqual(C.encode_binary_ext(ext, tuple(ext)), serializer.encode_binary_ext_py(ext, tuple(ext)))

    @settings(max_examples=500, deadline=None)
    @given(st.binary(max_size=80), st.integers(0, 79), st.binary(max_size=4))
    def test_malformed_headers_fail_alike(self, good_tail, cut, noise) -> None:
        data = _binary_header(310, 0, 409, 1, 0, b"", [(b"a", b"x"), (b"b", good_tail)])
        for bad in (data[:cut], data[:cut] + noise, noise + data[cut:], data.replace(b"\x00\x01a", b"\xff\xffa")):
            self.assertEqual(_outcome(C.decode_binary_fields, bad)[0], _outcome(serializer.decode_binary_fields_py, bad)[0], bad)
            if _outcome(C.decode_binary_fields, bad)[0] == "ok":
                self.assertEqual(C.decode_binary_fields(bad), serializer.decode_binary_fields_py(bad))

    def test_java_captured_frames(self) -> None:
        for name, _rec, raw in java_frames():
            payload = raw[4:]
            self.assertEqual(_command_outcome(C.decode_frame_payload, payload),
                             _command_outcome(serializer.decode_frame_payload_py, payload), name)

    @settings(max_examples=300, deadline=None)
    @given(st.integers(-32768, 32767), st.integers(0, 255), st.integers(-32768, 32767), ints32, ints32, texts,
           st.lists(st.tuples(texts, texts), max_size=6), st.binary(max_size=40), st.integers(0, 12), st.binary(max_size=3))
    def test_frames(self, code, lang, version, opaque, flag, remark, entries, body, cut, noise) -> None:
        header = _binary_header(code, lang, version, opaque, flag, remark.encode(),
                                [(k.encode(), v.encode()) for k, v in entries])
        payload = struct.pack(">i", (1 << 24) | len(header)) + header + body
        for frame in (payload, payload[:cut], noise + payload[cut:], b"\x00" + payload[1:], payload[:4] + noise):
            self.assertEqual(_command_outcome(C.decode_frame_payload, frame),
                             _command_outcome(serializer.decode_frame_payload_py, frame), frame)

    def test_invalid_utf8_is_a_frame_error(self) -> None:
        data = _binary_header(310, 0, 409, 1, 0, b"", [(b"a", b"\xff\xfe")])
        self.assertEqual(_outcome(C.decode_binary_fields, data)[0], "frame-error")
        self.assertEqual(_outcome(serializer.decode_binary_fields_py, data)[0], "frame-error")

    @settings(max_examples=300, deadline=None)
    @given(st.text(max_size=60), st.text(max_size=60))
    def test_java_hashes(self, prefix, key) -> None:
        try:
            expected = javacompat.java_string_hash_py(prefix + key)
        except UnicodeError:
            with self.assertRaises(UnicodeError):
                C.java_string_hash(prefix + key)
            return
        self.assertEqual(C.java_string_hash(prefix + key), expected)
        self.assertEqual(C.index_key_hash2(prefix, key), R.index_key_hash2_py(prefix, key))

    def test_known_hashes(self) -> None:
        self.assertEqual(C.java_string_hash("TagA"), 2598919)
        self.assertEqual(C.java_string_hash("polygenelubricants"), -2147483648)  # Integer.MIN_VALUE
        self.assertEqual(C.index_key_hash2("polygene", "lubricants"), 0)
        self.assertEqual(C.java_string_hash("\U0001F600"), javacompat.java_string_hash_py("\U0001F600"))

    @settings(max_examples=200, deadline=None)
    @given(st.binary(max_size=300), st.text(min_size=1, max_size=30), st.text(max_size=200), st.booleans(), st.booleans(),
           st.integers(0, 2**31 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(0, 65535), st.integers(0, 30))
    def test_records(self, body, topic, props, born_v6, store_v6, queue_id, big, port, pos) -> None:
        sys_flag = (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0) | 0x8
        born_ip = bytes(range(16)) if born_v6 else b"\x7f\x00\x00\x01"
        store_ip = bytes(range(16, 32)) if store_v6 else b"\x0a\x00\x00\x02"
        tb, pb = topic.encode()[:127], props.encode()
        total = R.record_length(sys_flag, len(body), len(tb), len(pb))
        args = (pos, total, sys_flag, queue_id, 3, big, big // 3, 1795264935148, born_ip, port, 1795264935149,
                store_ip, 10911, 2, big // 7, body, tb, pb)
        out_c, out_py = bytearray(b"\x55" * (pos + total + 5)), bytearray(b"\x55" * (pos + total + 5))
        C.write_record(out_c, *args)
        R.write_record_py(out_py, *args)
        self.assertEqual(out_c, out_py)
        rec = R.decode_record(bytes(out_c), pos)
        self.assertEqual((rec.body, rec.body_crc), (body, zlib.crc32(body) & 0x7FFFFFFF))

    def test_record_that_does_not_fit_is_refused(self) -> None:
        with self.assertRaises(ValueError):
            C.write_record(bytearray(10), 0, 100, 0, 0, 0, 0, 0, 0, b"\x7f\0\0\1", 1, 0, b"\x7f\0\0\1", 1, 0, 0, b"x" * 20, b"t", b"")


prop_text = st.lists(st.sampled_from(["\x01", "\x02", "a", "K", "", "é", "v1", "\x01\x01", "UNIQ_KEY"]), max_size=16).map("".join)


@unittest.skipIf(C is None, "rmqtx._accel not built (Availability says whether it should be)")
class SameSendPathResults(unittest.TestCase):
    """The send path's compiled calls: properties parse, V2 header values, index entries."""

    @settings(max_examples=500, deadline=None)
    @given(st.one_of(prop_text, st.text(max_size=40), st.none()))
    def test_properties(self, text) -> None:
        self.assertEqual(C.parse_properties(text), message.parse_properties_py(text))

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=12), st.integers()), max_size=8), st.randoms())
    def test_joined_properties(self, props, rnd) -> None:
        order = list(props)
        rnd.shuffle(order)
        self.assertEqual(C.join_properties(props, tuple(order)), message.join_properties_py(props, tuple(order)))
        self.assertEqual(_outcome_any(C.join_properties, props, ("missing",)),
                         _outcome_any(message.join_properties_py, props, ("missing",)))

    def test_properties_as_java_splits_them(self) -> None:
        for text, expected in [("a\x01b\x02c\x01d", {"a": "b", "c": "d"}), ("a\x01b\x02", {"a": "b"}),
                               ("a\x01b\x01\x01", {"a": "b"}), ("a\x01\x01b", {}), ("\x01b", {"": "b"}),
                               ("a\x01", {}), ("a", {}), ("", {}), ("a\x01b\x02a\x01c", {"a": "c"})]:
            self.assertEqual(C.parse_properties(text), expected, repr(text))
            self.assertEqual(message.parse_properties_py(text), expected, repr(text))

    @settings(max_examples=400, deadline=None)
    @given(st.dictionaries(st.sampled_from(list("abcdefghijklmnz")),
                           st.one_of(st.sampled_from(["0", "12", " 7", "-3", "1_0", "x", "", "true", " TRUE ", "1", "False",
                                                     "false", "-", "-0", "007", "+4", "123456789012345678",
                                                     "-1234567890123456789", "\u0663", "9" * 40]),
                                     st.text(max_size=5)), max_size=15))
    def test_send_v2_values(self, ext) -> None:
        self.assertEqual(_outcome_any(C.send_v2_values, ext), _outcome_any(headers.send_v2_values_py, ext))

    def test_send_v2_values_of_a_java_send(self) -> None:
        ext = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1795264935148", "h": "0",
               "i": "UNIQ_KEY\x01X\x02WAIT\x01true", "j": "0", "k": "false", "l": "16", "m": "false"}
        values = C.send_v2_values(ext)
        self.assertEqual(values, headers.send_v2_values_py(ext))
        self.assertEqual(values, ("PG", "T", "TBW102", 4, 3, 0, 1795264935148, 0, ext["i"], 0, False, False, 16, None))
        self.assertIsNone(C.send_v2_values({k: v for k, v in ext.items() if k != "b"}))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**62), st.integers(-10**7, 10**12)),
                    min_size=1, max_size=40),
           st.integers(1, 7), st.integers(1, 30), st.integers(-5, 10**12))
    def test_index_entries(self, puts, slot_num, index_num, begin_ts) -> None:
        size = 40 + slot_num * 4 + index_num * 20
        buf_c, buf_py = bytearray(size), bytearray(size)
        for count, (key_hash, phy, ts) in enumerate(puts, start=1):
            args = (slot_num, index_num, count, begin_ts, key_hash, phy, ts)
            self.assertEqual(C.index_put(buf_c, *args), index.index_put_py(buf_py, *args))
        self.assertEqual(buf_c, buf_py)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.text(max_size=6)),
                              st.one_of(st.none(), st.text(alphabet=" ab\u00e9\u4e2d\U0001f600", max_size=12)),
                              st.integers(0, 2**40), st.integers(-10**7, 10**12)), min_size=1, max_size=25),
           st.integers(1, 7), st.integers(1, 30), st.integers(-5, 10**12), st.integers(0, 3))
    def test_index_records(self, records, slot_num, index_num, begin_ts, start_count) -> None:
        size = 40 + slot_num * 4 + index_num * 20
        files = [_index_file(bytearray(size), slot_num, index_num, begin_ts, start_count) for _ in range(2)]
        for prefix, uniq_key, keys, phy, ts in records:
            got = [_outcome_any(fn, f, prefix + "#", uniq_key, keys, phy, ts)
                   for fn, f in zip((C.index_put_keys, index.index_put_keys_py), files)]
            self.assertEqual(got[0], got[1])
            self.assertEqual(vars(files[0]), vars(files[1]))
            if got[0][0] == "ok" and got[0][1] < 0:
                break  # full: the service rolls to a new file
        self.assertEqual(files[0].mm, files[1].mm)


def _index_file(buf: bytearray, slot_num: int, index_num: int, begin_ts: int, count: int) -> index.IndexFile:
    """An IndexFile over a bytearray, mid-life (its header fields set as a loaded file has them)."""
    f = index.IndexFile.__new__(index.IndexFile)
    f.mm, f.slot_num, f.index_num = buf, slot_num, index_num
    f.entries_pos = 40 + slot_num * 4
    f.begin_ts, f.end_ts, f.begin_phy, f.end_phy = begin_ts, max(begin_ts, 0), 0, 0
    f.slot_count, f.index_count = 0, max(count, 1)
    return f


def _outcome_any(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as exc:  # the same exception type is part of the contract
        return "raised", type(exc)


@unittest.skipIf(C is None, "rmqtx._accel not built (Availability says whether it should be)")
class SameFrameHeads(unittest.TestCase):
    @settings(max_examples=300, deadline=None)
    @given(st.integers(-32768, 32767), st.integers(0, 255), st.integers(-32768, 32767), ints32, ints32, st.binary(max_size=30),
           st.dictionaries(texts, texts, max_size=6), st.integers(0, 10**6))
    def test_binary_frame_heads(self, code, lang, version, opaque, flag, remark, ext, body_len) -> None:
        args = (code, lang, version, opaque, flag, remark, ext or None, tuple(ext), body_len)
        self.assertEqual(C.binary_frame_head(*args), serializer.binary_frame_head_py(*args))

    def test_out_of_range_fails_alike(self) -> None:
        for bad in [(40000, 0, 0, 0, 0), (1, 256, 0, 0, 0), (1, 0, 0, 2**31, 0)]:
            args = (*bad, b"", None, (), 0)
            self.assertEqual(_outcome_any(C.binary_frame_head, *args), _outcome_any(serializer.binary_frame_head_py, *args))

    @settings(max_examples=300, deadline=None)
    @given(st.integers(-32768, 32767), ints32, texts, st.sampled_from(["true", "false"]), texts,
           st.integers(-(2**70), 2**70), st.integers(-(2**70), 2**70))
    def test_send_answer_frames(self, code, opaque, region, trace_on, msg_id, queue_id, queue_offset) -> None:
        args = (code, opaque, region, trace_on, msg_id, queue_id, queue_offset)
        self.assertEqual(C.send_answer_frame(*args), serializer.send_answer_frame_py(*args))

    def test_send_answer_out_of_range_fails_alike(self) -> None:
        for code, opaque in [(40000, 0), (1, 2**31), (1, -(2**31) - 1)]:
            args = (code, opaque, "r", "false", "id", 1, 2)
            self.assertEqual(_outcome_any(C.send_answer_frame, *args), _outcome_any(serializer.send_answer_frame_py, *args))

    @settings(max_examples=300, deadline=None)
    @given(st.sampled_from([b"\x7f\x00\x00\x01", bytes(range(16)), b"", b"\xff\xfe"]), st.integers(-(2**33), 2**33),
           st.integers(-(2**70), 2**70))
    def test_offset_msg_ids(self, ip, port, offset) -> None:
        self.assertEqual(_outcome_any(C.offset_msg_id, ip, port, offset), _outcome_any(R.offset_msg_id_py, ip, port, offset))


@unittest.skipIf(C is None, "rmqtx._accel not built (Availability says whether it should be)")
class SameScanResults(unittest.TestCase):
    """A pull's plain run of consume-queue units: the same records, offsets and stopping point."""

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.tuples(st.integers(-50, 5000), st.integers(-5, 600), st.sampled_from([-(2**62), -5, 0, 7, 11, 2**40])),
                    max_size=40),
           st.integers(-20, 60), st.integers(0, 4000), st.integers(0, 6000), st.integers(0, 40), st.integers(0, 3),
           st.integers(1, 40), st.integers(0, 20000), st.integers(0, 20), st.integers(0, 5000), st.integers(0, 10),
           st.sampled_from([None, frozenset({7}), frozenset({7, 11, 2**40}), frozenset()]), st.integers(0, 10**6))
    def test_scan_units(self, units, start, mm_from, mm_wrote, count, total, max_count, max_bytes, memory_count,
                        disk_bytes, disk_count, tags, memory) -> None:
        raw = b"".join(cq.UNIT.pack(phy, size, tag) for phy, size, tag in units)
        mm = bytes(range(256)) * 20
        outs = []
        (mem_n, mem_b), (disk_n, disk_b) = cq.batch_limits(max_count, max_bytes, memory_count, disk_bytes, disk_count)
        for fn in (C.scan_units, cq.scan_units_py):
            messages: list = [b"before"]
            qofs: list = [-1]
            got = fn(raw, start * cq.UNIT_SIZE // 2, len(raw), mm, mm_from, mm_wrote, 5000, memory, count, total * 1000,
                     mem_n, mem_b, disk_n, disk_b, tags, -(2**61), messages, qofs, 100)
            outs.append((got, messages, qofs))
        self.assertEqual(outs[0], outs[1])

    def test_bad_arguments_are_refused(self) -> None:
        raw = cq.UNIT.pack(0, 10, 7)
        for tags, messages in ((frozenset(), None), ([7], [])):
            args = (raw, 0, 20, b"x" * 20, 0, 20, 20, 100, 0, 0, 32, 1000, 8, 1000, tags, -(2**61), messages, [], 0)
            with self.assertRaises(TypeError):
                C.scan_units(*args)
