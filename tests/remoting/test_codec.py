"""The header codecs against frames captured from Apache RocketMQ 4.9.8, byte for byte."""

from __future__ import annotations

import struct
import unittest

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtx.remoting.codes import SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import (
    PullMessageResponseHeader,
    SendMessageResponseHeader,
    send_header_from_v2,
    send_header_to_v2,
)
from rmqtx.remoting.serializer import FrameError, decode_frame, encode_frame
from tests.fixtures import java_frames, records


class FixtureFrames(unittest.TestCase):
    def test_every_java_frame_decodes_and_reencodes_identically(self) -> None:
        count = 0
        for name, rec, raw in java_frames():
            cmd = decode_frame(raw)
            self.assertEqual(cmd.code, rec["decoded"]["code"], name)
            self.assertEqual(cmd.opaque, rec["decoded"]["opaque"], name)
            self.assertEqual(len(cmd.body), rec["decoded"].get("bodyLen", 0), name)
            self.assertEqual(encode_frame(cmd), raw, f"{name} t={rec['t']}")
            count += 1
        self.assertGreater(count, 450)

    def test_both_serializations_seen(self) -> None:
        kinds = {decode_frame(raw).serialize_type for _, _, raw in java_frames()}
        self.assertEqual(kinds, {SerializeType.JSON, SerializeType.ROCKETMQ})

    def _responses_to(self, code: int):
        for name, rec, raw in java_frames():
            dec = rec["decoded"]
            if dec.get("rpc") == "response" and dec.get("requestCode") == code and dec["code"] == 0:
                yield name, raw

    def test_send_response_built_from_typed_header_matches_java(self) -> None:
        checked = set()
        for _, raw in self._responses_to(310):
            java = decode_frame(raw)
            ext = java.ext_fields
            header = SendMessageResponseHeader(ext["msgId"], int(ext["queueId"]), int(ext["queueOffset"]))
            ours = RemotingCommand(0, opaque=java.opaque, flag=1, serialize_type=java.serialize_type)
            header.apply_to(ours, {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
            self.assertEqual(encode_frame(ours), raw)
            checked.add(java.serialize_type)
        self.assertEqual(checked, {SerializeType.JSON, SerializeType.ROCKETMQ})

    def test_pull_response_header_matches_java(self) -> None:
        checked = set()
        for _, raw in self._responses_to(11):
            java = decode_frame(raw)
            ext = java.ext_fields
            header = PullMessageResponseHeader(
                int(ext["suggestWhichBrokerId"]), int(ext["nextBeginOffset"]), int(ext["minOffset"]), int(ext["maxOffset"])
            )
            ours = RemotingCommand(0, opaque=java.opaque, flag=1, serialize_type=java.serialize_type, body=java.body, remark=java.remark)
            header.apply_to(ours)
            self.assertEqual(encode_frame(ours), raw)
            checked.add(java.serialize_type)
        self.assertEqual(checked, {SerializeType.JSON, SerializeType.ROCKETMQ})

    def test_send_v2_short_names(self) -> None:
        for _, rec, raw in java_frames():
            if rec["decoded"]["code"] == 310 and rec["decoded"].get("rpc") in ("request", "oneway"):
                cmd = decode_frame(raw)
                header = send_header_from_v2(cmd.ext_fields)
                self.assertEqual(header.topic, cmd.ext_fields["b"])
                self.assertEqual(header.queueId, int(cmd.ext_fields["e"]))
                fields, order = send_header_to_v2(header)
                self.assertEqual(fields, cmd.ext_fields)
                return
        self.fail("no SEND_MESSAGE_V2 request in the fixtures")


class ForeignClientHeaders(unittest.TestCase):
    """What non-Java clients send must parse."""

    def frame(self, header: bytes, body: bytes = b"") -> bytes:
        return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body

    def test_cpp_numbers_node_booleans_go_form(self) -> None:
        cpp = b'{"code":17,"language":"CPP","version":1,"opaque":3,"flag":0,"remark":"","extFields":{"defaultTopicQueueNums":4,"order":false}}'
        cmd = decode_frame(self.frame(cpp))
        self.assertEqual(cmd.ext_fields, {"defaultTopicQueueNums": "4", "order": "false"})
        self.assertEqual(cmd.remark, "")
        self.assertEqual(cmd.language, "CPP")
        go = b'{"code":105,"language":"GO","version":317,"opaque":9,"flag":0,"remark":"","extFields":{"topic":"t"}}'
        cmd = decode_frame(self.frame(go))
        self.assertEqual((cmd.code, cmd.opaque, cmd.ext_fields), (105, 9, {"topic": "t"}))

    def test_malformed(self) -> None:
        for bad in (b"{not json", b"[1,2]", b'{"code":"x"}', b'{"extFields":[1]}'):
            with self.assertRaises(FrameError, msg=bad):
                decode_frame(self.frame(bad))
        with self.assertRaises(FrameError):
            decode_frame(struct.pack(">ii", 8, 200) + b"abcd")
        with self.assertRaises(FrameError):
            decode_frame(struct.pack(">ii", 4, 2 << 24))

    def test_bad_input_capture_cases_rejected(self) -> None:
        """The captured frames the Java servers closed on are rejected by the decoder too."""
        closed = {r["case"] for r in records("scenario-bad-input.jsonl") if r.get("event") == "close" and "server closed" in r.get("note", "")}
        rejected = 0
        for rec in records("scenario-bad-input.jsonl"):
            if rec.get("case") in closed and rec.get("dir") == "c2s" and "hex" in rec:
                raw = bytes.fromhex(rec["hex"])
                total = struct.unpack(">i", raw[:4])[0]
                if total <= 0 or total > 16 * 1024 * 1024 - 4:
                    rejected += 1
                    continue
                with self.assertRaises(FrameError, msg=rec["case"]):
                    decode_frame(raw[: 4 + total])
                rejected += 1
        self.assertGreaterEqual(rejected, 6)


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)


@st.composite
def commands(draw) -> RemotingCommand:
    return RemotingCommand(
        draw(st.integers(-32768, 32767)),
        ext_fields=draw(st.none() | st.dictionaries(_text, _text, max_size=20)),
        body=draw(st.binary(max_size=64)),
        remark=draw(st.none() | _text.filter(bool)),
        opaque=draw(st.integers(-(2**31), 2**31 - 1)),
        flag=draw(st.integers(0, 3)),
        language=draw(st.sampled_from(["JAVA", "CPP", "GO", "PYTHON"])),
        version=draw(st.integers(0, 32767)),
        serialize_type=draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ])),
    )


class RoundTrip(unittest.TestCase):
    @settings(max_examples=300, deadline=None)
    @given(commands())
    def test_encode_decode(self, cmd: RemotingCommand) -> None:
        back = decode_frame(encode_frame(cmd))
        binary_empty = cmd.serialize_type == SerializeType.ROCKETMQ and not cmd.ext_fields
        self.assertEqual(back.ext_fields, None if binary_empty else cmd.ext_fields)
        for attr in ("code", "opaque", "flag", "language", "version", "body"):
            self.assertEqual(getattr(back, attr), getattr(cmd, attr), attr)
        self.assertEqual(back.remark, cmd.remark)
        self.assertEqual(encode_frame(back), encode_frame(cmd))

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=200))
    def test_random_bytes_raise_only_frame_error(self, blob: bytes) -> None:
        try:
            decode_frame(struct.pack(">i", len(blob)) + blob)
        except FrameError:
            pass
