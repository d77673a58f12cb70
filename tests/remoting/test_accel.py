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
from rmqtx.common import javacompat
from rmqtx.remoting import serializer
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

    def test_pure_python_switch(self) -> None:
        self.assertEqual(accel_mod.accel is None, C is None or os.environ.get(accel_mod.PURE_ENV, "") not in ("", "0"))


def _binary_header(code: int, lang: int, version: int, opaque: int, flag: int, remark: bytes, entries: list[tuple[bytes, bytes]]) -> bytes:
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in entries)
    return struct.pack(">hBhiii", code, lang, version, opaque, flag, len(remark)) + remark + struct.pack(">i", len(ext)) + ext


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
