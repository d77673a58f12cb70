"""Header codecs (JSON as fastjson writes it, ROCKETMQ binary) and whole-frame encoding."""

from __future__ import annotations

import struct

import orjson

from rmqtx.common.javacompat import hashmap_order
from rmqtx.remoting.codes import LanguageCode, SerializeType
from rmqtx.remoting.command import RemotingCommand, java_string, next_opaque

#: Largest frame Java accepts, length prefix included.
MAX_FRAME_BYTES = 16 * 1024 * 1024

_INT = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")
_BINARY_FIXED = struct.Struct(">hBhii")
_LANGUAGES = {c.value: c.name for c in LanguageCode}


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
def _binary_ext_order(cmd: RemotingCommand) -> list[str]:
    ext = cmd.ext_fields or {}
    fast = [k for k in cmd.fast_keys if k in ext]
    rest = tuple(k for k in ext if k not in cmd.fast_keys)
    return fast + list(hashmap_order(rest))


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """ROCKETMQ binary header; fast-header fields first, then the rest in HashMap order."""
    if not -32768 <= cmd.code <= 32767:
        raise ValueError(f"code {cmd.code} does not fit the ROCKETMQ binary header")
    parts = [_BINARY_FIXED.pack(cmd.code, cmd.language_code, cmd.version, cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode() if cmd.remark else b""
    parts.append(_INT.pack(len(remark)))
    parts.append(remark)
    entries = []
    for key in _binary_ext_order(cmd):
        k = key.encode()
        v = cmd.ext_fields[key].encode()  # type: ignore[index]
        entries.append(struct.pack(">h", len(k)) + k + _INT.pack(len(v)) + v)
    ext_bytes = b"".join(entries)
    parts.append(_INT.pack(len(ext_bytes)))
    parts.append(ext_bytes)
    return b"".join(parts)


def decode_binary_header(data: bytes) -> RemotingCommand:
    """Parse a ROCKETMQ binary header, bounds-checked."""
    view = memoryview(data)
    try:
        code, lang, version, opaque, flag = _BINARY_FIXED.unpack_from(view, 0)
        pos = _BINARY_FIXED.size
        (remark_len,) = _INT.unpack_from(view, pos)
        pos += 4
        if remark_len < 0 or pos + remark_len > len(view):
            raise FrameError("remark length out of range")
        remark = bytes(view[pos : pos + remark_len]).decode() if remark_len else None
        pos += remark_len
        (ext_len,) = _INT.unpack_from(view, pos)
        pos += 4
        end = pos + ext_len
        if ext_len < 0 or end > len(view):
            raise FrameError("extFields length out of range")
        ext: dict[str, str] | None = {} if ext_len else None
        while pos < end:
            (klen,) = struct.unpack_from(">h", view, pos)
            pos += 2
            key = bytes(view[pos : pos + klen]).decode()
            pos += klen
            (vlen,) = _INT.unpack_from(view, pos)
            pos += 4
            if klen < 0 or vlen < 0 or pos + vlen > end:
                raise FrameError("extFields entry out of range")
            ext[key] = bytes(view[pos : pos + vlen]).decode()  # type: ignore[index]
            pos += vlen
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"bad ROCKETMQ header: {exc}") from None
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
    stype, header = encode_header(cmd)
    body = cmd.body or b""
    prefix = _PREFIX.pack(4 + len(header) + len(body), (stype << 24) | len(header))
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
    if stype == SerializeType.JSON:
        cmd = decode_json_header(header)
    elif stype == SerializeType.ROCKETMQ:
        cmd = decode_binary_header(header)
    else:
        raise FrameError(f"unknown serialize type {stype}")
    cmd.body = payload[4 + header_len :]
    return cmd


def decode_frame(frame: bytes) -> RemotingCommand:
    """Decode a whole frame, length prefix included."""
    if len(frame) < 4:
        raise FrameError("frame shorter than its length prefix")
    (total,) = _INT.unpack_from(frame, 0)
    if total != len(frame) - 4:
        raise FrameError(f"length prefix {total} does not match {len(frame) - 4} bytes")
    return decode_frame_payload(frame[4:])
