"""Header codecs (JSON as fastjson writes it, ROCKETMQ binary) and whole-frame encoding."""

from __future__ import annotations

import struct
from functools import lru_cache

import orjson

from rmqtx.accel import accel
from rmqtx.common.javacompat import hashmap_order
from rmqtx.remoting.codes import CURRENT_VERSION, RESPONSE_FLAG, LanguageCode, SerializeType
from rmqtx.remoting.command import RemotingCommand, java_string, next_opaque

#: Largest frame Java accepts, length prefix included.
MAX_FRAME_BYTES = 16 * 1024 * 1024

_INT = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")
_BINARY_FIXED = struct.Struct(">hBhii")
_BINARY_HEAD = struct.Struct(">hBhiii")  # the fixed part and the remark length
_SHORT = struct.Struct(">h")
_LANGUAGES = {c.value: c.name for c in LanguageCode}
_LANGUAGE_CODES = {c.name: int(c.value) for c in LanguageCode}
_OTHER = int(LanguageCode.OTHER)
_JSON = int(SerializeType.JSON)
_ROCKETMQ = int(SerializeType.ROCKETMQ)


class FrameError(ValueError):
    """The bytes are not a RemotingCommand frame; the connection that sent them gets closed."""


# -- JSON ------------------------------------------------------------------------------------
def encode_json_header(cmd: RemotingCommand) -> bytes:
    """Header bytes identical to fastjson's: sorted keys, null remark/extFields left out.

    orjson keeps insertion order and writes no spaces, so one dumps of an ordered dict suffices.
    """
    header: dict[str, object] = {"code": cmd.code}
    ext = cmd.ext_fields
    if ext is not None:
        header["extFields"] = {key: ext[key] for key in hashmap_order(tuple(ext))}
    header["flag"] = cmd.flag
    header["language"] = cmd.language
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    return orjson.dumps(header)


def _ext_value(value: object) -> str | None:
    """Ext values as strings; C++ and Node clients send numbers and booleans too."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return java_string(value)
    raise FrameError(f"extFields value of type {type(value).__name__} is not supported")


def _int_field(header: dict, name: str, default: int) -> int:
    value = header.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.lstrip("-").isdigit():
            return int(value)
        raise FrameError(f"header field {name} is not an integer: {value!r}")
    return value


def decode_json_header(data: bytes) -> RemotingCommand:
    """Parse a JSON header as any client writes it (Java, Go, C++, Node)."""
    try:
        header = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise FrameError("header is not a JSON object")
    raw_ext = header.get("extFields")
    ext: dict[str, str] | None
    if raw_ext is None:
        ext = None
    elif isinstance(raw_ext, dict):
        ext = {}
        for key, value in raw_ext.items():
            text = _ext_value(value)
            if text is not None:
                ext[key] = text
    else:
        raise FrameError("extFields is not a JSON object")
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = java_string(remark)
    language = header.get("language", "JAVA")
    if not isinstance(language, str):
        language = _LANGUAGES.get(language, "OTHER") if isinstance(language, int) else "OTHER"
    opaque = header.get("opaque")
    return RemotingCommand(
        _int_field(header, "code", 0),
        ext_fields=ext,
        remark=remark,
        opaque=next_opaque() if opaque is None else _int_field(header, "opaque", 0),
        flag=_int_field(header, "flag", 0),
        language=language,
        version=_int_field(header, "version", 0),
        serialize_type=SerializeType.JSON,
    )


# -- ROCKETMQ binary -------------------------------------------------------------------------
@lru_cache(maxsize=512)
def _binary_order(fast_keys: tuple[str, ...], keys: tuple[str, ...]) -> tuple[str, ...]:
    """Fast-header fields first (those present), then the rest in HashMap order."""
    fast = [k for k in fast_keys if k in keys]
    rest = tuple(k for k in keys if k not in fast_keys)
    return tuple(fast) + hashmap_order(rest)


binary_ext_order = _binary_order  # for callers that build ROCKETMQ frames themselves (binary_frame_head)


def _binary_ext_order(cmd: RemotingCommand) -> tuple[str, ...]:
    ext = cmd.ext_fields
    if not ext:
        return ()
    return _binary_order(cmd.fast_keys, tuple(ext))


def encode_binary_ext(ext: dict[str, str], order: tuple[str, ...]) -> bytes:
    """The extFields block (without its length) with entries in ``order``."""
    out = bytearray()
    pack_short = _SHORT.pack
    pack_int = _INT.pack
    for key in order:
        k = key.encode()
        v = ext[key].encode()
        out += pack_short(len(k))
        out += k
        out += pack_int(len(v))
        out += v
    return bytes(out)


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """ROCKETMQ binary header; fast-header fields first, then the rest in HashMap order."""
    code = cmd.code
    if not -32768 <= code <= 32767:
        raise ValueError(f"code {code} does not fit the ROCKETMQ binary header")
    remark = cmd.remark.encode() if cmd.remark else b""
    ext = cmd.ext_fields
    ext_bytes = encode_binary_ext(ext, _binary_order(cmd.fast_keys, tuple(ext))) if ext else b""
    return b"".join((
        _BINARY_HEAD.pack(code, _LANGUAGE_CODES.get(cmd.language, _OTHER), cmd.version, cmd.opaque, cmd.flag, len(remark)),
        remark,
        _INT.pack(len(ext_bytes)),
        ext_bytes,
    ))


def decode_binary_fields(data: bytes) -> tuple[int, int, int, int, int, str | None, dict[str, str] | None]:
    """(code, language code, version, opaque, flag, remark, ext fields) of a ROCKETMQ header, bounds-checked."""
    size = len(data)
    try:
        code, lang, version, opaque, flag, remark_len = _BINARY_HEAD.unpack_from(data, 0)
        pos = _BINARY_HEAD.size
        if remark_len < 0 or pos + remark_len > size:
            raise FrameError("remark length out of range")
        remark = data[pos : pos + remark_len].decode() if remark_len else None
        pos += remark_len
        (ext_len,) = _INT.unpack_from(data, pos)
        pos += 4
        end = pos + ext_len
        if ext_len < 0 or end > size:
            raise FrameError("extFields length out of range")
        ext: dict[str, str] | None = {} if ext_len else None
        unpack_entry = _SHORT.unpack_from
        unpack_int = _INT.unpack_from
        while pos < end:
            (klen,) = unpack_entry(data, pos)
            pos += 2
            key = data[pos : pos + klen].decode()
            pos += klen
            (vlen,) = unpack_int(data, pos)
            pos += 4
            if klen < 0 or vlen < 0 or pos + vlen > end:
                raise FrameError("extFields entry out of range")
            ext[key] = data[pos : pos + vlen].decode()  # type: ignore[index]
            pos += vlen
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"bad ROCKETMQ header: {exc}") from None
    return code, lang, version, opaque, flag, remark, ext


def binary_frame_head(code: int, lang: int, version: int, opaque: int, flag: int, remark: bytes,
                      ext: dict[str, str] | None, order: tuple[str, ...], body_len: int) -> bytes:
    """A ROCKETMQ-header frame up to its body: length prefix, type-and-length int, header."""
    ext_bytes = encode_binary_ext(ext, order) if ext else b""
    header = b"".join((_BINARY_HEAD.pack(code, lang, version, opaque, flag, len(remark)), remark,
                       _INT.pack(len(ext_bytes)), ext_bytes))
    return _PREFIX.pack(4 + len(header) + body_len, (_ROCKETMQ << 24) | len(header)) + header


#: SendMessageResponseHeader's fast fields, then what Java adds with addExtField, in binary order.
_SEND_ANSWER_ORDER = _binary_order(("msgId", "queueId", "queueOffset", "transactionId"),
                                   ("MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"))


def send_answer_frame(code: int, opaque: int, region: str, trace_on: str, msg_id: str, queue_id: int,
                      queue_offset: int) -> bytes:
    """The whole answer a Java broker gives a ROCKETMQ-header send whose message was stored, in one bytes."""
    fields = {"MSG_REGION": region, "TRACE_ON": trace_on, "msgId": msg_id, "queueId": str(queue_id),
              "queueOffset": str(queue_offset)}
    return binary_frame_head(code, _JAVA_LANG, CURRENT_VERSION, opaque, RESPONSE_FLAG, b"", fields, _SEND_ANSWER_ORDER, 0)


_JAVA_LANG = int(LanguageCode.JAVA)

decode_binary_fields_py = decode_binary_fields
encode_binary_ext_py = encode_binary_ext
binary_frame_head_py = binary_frame_head
send_answer_frame_py = send_answer_frame
if accel is not None:
    accel.configure(FrameError)
    decode_binary_fields = accel.decode_binary_fields  # noqa: F811
    encode_binary_ext = accel.encode_binary_ext  # noqa: F811
    binary_frame_head = accel.binary_frame_head  # noqa: F811
    send_answer_frame = accel.send_answer_frame  # noqa: F811


def decode_binary_header(data: bytes) -> RemotingCommand:
    """Parse a ROCKETMQ binary header, bounds-checked."""
    code, lang, version, opaque, flag, remark, ext = decode_binary_fields(data)
    return RemotingCommand(
        code,
        ext_fields=ext,
        remark=remark,
        opaque=opaque,
        flag=flag,
        language=_LANGUAGES.get(lang, "OTHER"),
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
        fast_keys=tuple(ext) if ext else (),  # keep the sender's order for a faithful re-encode
    )


# -- frames ----------------------------------------------------------------------------------
def encode_header(cmd: RemotingCommand) -> tuple[int, bytes]:
    """The serialize type to use and the header bytes in it (JSON unless told otherwise)."""
    if cmd.serialize_type == SerializeType.ROCKETMQ and -32768 <= cmd.code <= 32767:
        return SerializeType.ROCKETMQ, encode_binary_header(cmd)
    return SerializeType.JSON, encode_json_header(cmd)


def encode_frame_parts(cmd: RemotingCommand) -> list[bytes]:
    """A frame as pieces for ``writeSequence``: no copy of a large body."""
    body = cmd.body
    if cmd.serialize_type == SerializeType.ROCKETMQ and -32768 <= cmd.code <= 32767:
        ext = cmd.ext_fields
        head = binary_frame_head(cmd.code, _LANGUAGE_CODES.get(cmd.language, _OTHER), cmd.version, cmd.opaque,
                                 cmd.flag, cmd.remark.encode() if cmd.remark else b"", ext,
                                 _binary_order(cmd.fast_keys, tuple(ext)) if ext else (), len(body) if body else 0)
        return [head, body] if body else [head]
    header = encode_json_header(cmd)
    body = body or b""
    prefix = _PREFIX.pack(4 + len(header) + len(body), (_JSON << 24) | len(header))
    return [prefix, header, body] if body else [prefix, header]


def encode_frame(cmd: RemotingCommand) -> bytes:
    """A whole frame, length prefix included."""
    return b"".join(encode_frame_parts(cmd))


def decode_frame_payload(payload: bytes) -> RemotingCommand:
    """Decode what follows the length prefix: the type-and-length int, header and body."""
    if len(payload) < 4:
        raise FrameError(f"frame of {len(payload)} bytes is too short")
    (mark,) = _INT.unpack_from(payload, 0)
    stype = (mark >> 24) & 0xFF
    header_len = mark & 0xFFFFFF
    if 4 + header_len > len(payload):
        raise FrameError(f"header length {header_len} runs past the frame")
    header = payload[4 : 4 + header_len]
    if stype == _ROCKETMQ:
        code, lang, version, opaque, flag, remark, ext = decode_binary_fields(header)
        cmd = RemotingCommand(
            code,
            ext_fields=ext,
            remark=remark,
            opaque=opaque,
            flag=flag,
            language=_LANGUAGES.get(lang, "OTHER"),
            version=version,
            serialize_type=SerializeType.ROCKETMQ,
            fast_keys=tuple(ext) if ext else (),
        )
    elif stype == _JSON:
        cmd = decode_json_header(header)
    else:
        raise FrameError(f"unknown serialize type {stype}")
    cmd.body = payload[4 + header_len :]
    return cmd


decode_frame_payload_py = decode_frame_payload
if accel is not None:
    accel.configure_command(RemotingCommand, _LANGUAGES, "OTHER", SerializeType.ROCKETMQ, decode_frame_payload_py)
    decode_frame_payload = accel.decode_frame_payload  # noqa: F811


def decode_frame(frame: bytes) -> RemotingCommand:
    """Decode a whole frame, length prefix included."""
    if len(frame) < 4:
        raise FrameError("frame shorter than its length prefix")
    (total,) = _INT.unpack_from(frame, 0)
    if total != len(frame) - 4:
        raise FrameError(f"length prefix {total} does not match {len(frame) - 4} bytes")
    return decode_frame_payload(frame[4:])
