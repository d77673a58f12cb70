"""Pure encode/decode of RocketMQ 4.x commit log records.

Stdlib only and free of I/O, so PySpark readers and offline tools can reuse it.
All integers are big-endian; layouts follow REFERENCE.md ("Store layout").
"""
from __future__ import annotations

import mmap
import socket
import struct
import zlib
from functools import lru_cache
from operator import mul
from typing import Iterator, NamedTuple, TypeAlias

from rmqtx.accel import accel
from rmqtx.common.javacompat import _POW31  # index_key_hash2 reuses the table
from rmqtx.common.javacompat import java_string_hash as java_hash
from rmqtx.common.sysflag import SYSFLAG_BORN_HOST_V6, SYSFLAG_STORE_HOST_V6

# What records are read from (a mapped file, a copied-out slice) and written into.
ReadBuffer: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"
WriteBuffer: TypeAlias = "bytearray | mmap.mmap"

MESSAGE_MAGIC = -626843481  # 0xDAA320A7
BLANK_MAGIC = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8

# Fixed part: totalSize, magic, bodyCRC, queueId, flag, queueOffset, physicalOffset, sysFlag,
# bornTimestamp; hosts follow, their widths depending on the IPv6 sys flags.
HEAD = struct.Struct(">iiiiiqqiq")
SIZE_MAGIC = struct.Struct(">ii")
INT32 = struct.Struct(">i")
INT16 = struct.Struct(">h")
INT64 = struct.Struct(">q")
SYSFLAG_POS = 36
BORN_TS_POS = 40
HOSTS_POS = 48
QUEUE_OFFSET_POS = 20


def _host_fmt(v6: bool) -> str:
    return "16si" if v6 else "4si"


# Whole record header up to and including bodyLen, one Struct per (born v6, store v6) pair.
_HEADERS: dict[int, struct.Struct] = {
    flags: struct.Struct(
        ">iiiiiqqiq"
        + _host_fmt(bool(flags & SYSFLAG_BORN_HOST_V6))
        + "q"
        + _host_fmt(bool(flags & SYSFLAG_STORE_HOST_V6))
        + "iqi"
    )
    for flags in (0, SYSFLAG_BORN_HOST_V6, SYSFLAG_STORE_HOST_V6, SYSFLAG_BORN_HOST_V6 | SYSFLAG_STORE_HOST_V6)
}
_HOST_BITS = SYSFLAG_BORN_HOST_V6 | SYSFLAG_STORE_HOST_V6


class RecordError(ValueError):
    """A byte range that is not a well-formed commit log record."""


class Record(NamedTuple):
    """One decoded commit log record (hosts as text, body and properties as stored)."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    born_port: int
    store_timestamp: int
    store_host: str
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: str


def header_struct(sys_flag: int) -> struct.Struct:
    """The header Struct for a record with this sys flag."""
    return _HEADERS[sys_flag & _HOST_BITS]


def record_length(sys_flag: int, body_len: int, topic_len: int, props_len: int) -> int:
    """Total stored size of a record, as Java's calMsgLength computes it."""
    return _HEADERS[sys_flag & _HOST_BITS].size + body_len + 1 + topic_len + 2 + props_len


def body_crc(body: bytes) -> int:
    """Java's UtilAll.crc32: CRC32 masked to a non-negative int."""
    return zlib.crc32(body) & 0x7FFFFFFF


@lru_cache(maxsize=1024)
def encode_host(host: str) -> tuple[bytes, bool]:
    """IP text to its 4 or 16 address bytes, and whether it is IPv6."""
    if ":" in host:
        return socket.inet_pton(socket.AF_INET6, host), True
    return socket.inet_aton(host), False


def decode_host(raw: bytes) -> str:
    """Address bytes (4 or 16) to text."""
    return socket.inet_ntop(socket.AF_INET6 if len(raw) == 16 else socket.AF_INET, raw)


def write_record(
    buf: WriteBuffer,
    pos: int,
    total: int,
    sys_flag: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    born_timestamp: int,
    born_ip: bytes,
    born_port: int,
    store_timestamp: int,
    store_ip: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    topic: bytes,
    props: bytes,
) -> None:
    """Write one record into a writable buffer (bytearray or mmap) at pos."""
    hs = _HEADERS[sys_flag & _HOST_BITS]
    hs.pack_into(
        buf, pos, total, MESSAGE_MAGIC, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
        physical_offset, sys_flag, born_timestamp, born_ip, born_port, store_timestamp, store_ip,
        store_port, reconsume_times, prepared_transaction_offset, len(body),
    )
    p = pos + hs.size
    e = p + len(body)
    buf[p:e] = body
    buf[e] = len(topic)
    p = e + 1
    e = p + len(topic)
    buf[p:e] = topic
    INT16.pack_into(buf, e, len(props))
    buf[e + 2:e + 2 + len(props)] = props


write_record_py = write_record
if accel is not None:
    write_record = accel.write_record  # noqa: F811


def encode_record(
    sys_flag: int, queue_id: int, flag: int, queue_offset: int, physical_offset: int,
    born_timestamp: int, born_host: tuple[str, int], store_timestamp: int,
    store_host: tuple[str, int], reconsume_times: int, prepared_transaction_offset: int,
    body: bytes, topic: str, properties: str,
) -> bytes:
    """A whole record as bytes; host flags are set from the address families."""
    born_ip, born_v6 = encode_host(born_host[0])
    store_ip, store_v6 = encode_host(store_host[0])
    sys_flag = (sys_flag & ~_HOST_BITS) | (SYSFLAG_BORN_HOST_V6 if born_v6 else 0) | (
        SYSFLAG_STORE_HOST_V6 if store_v6 else 0)
    topic_b = topic.encode()
    props_b = properties.encode()
    total = record_length(sys_flag, len(body), len(topic_b), len(props_b))
    buf = bytearray(total)
    write_record(buf, 0, total, sys_flag, queue_id, flag, queue_offset, physical_offset,
                 born_timestamp, born_ip, born_host[1], store_timestamp, store_ip, store_host[1],
                 reconsume_times, prepared_transaction_offset, body, topic_b, props_b)
    return bytes(buf)


def decode_record(buf: ReadBuffer, pos: int = 0, limit: int | None = None) -> Record:
    """Decode the record at pos; raises RecordError when the bytes do not form one."""
    end = len(buf) if limit is None else limit
    if pos + 8 > end:
        raise RecordError("truncated header")
    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC:
        raise RecordError(f"bad magic {magic & 0xFFFFFFFF:#010x}")
    if pos + HOSTS_POS > end:
        raise RecordError("truncated header")
    sys_flag = INT32.unpack_from(buf, pos + SYSFLAG_POS)[0]
    hs = _HEADERS[sys_flag & _HOST_BITS]
    if total < hs.size + 3 or pos + total > end:
        raise RecordError(f"bad total size {total}")
    f = hs.unpack_from(buf, pos)
    body_len = f[16]
    p = pos + hs.size
    if body_len < 0 or p + body_len + 3 > pos + total:
        raise RecordError(f"bad body length {body_len}")
    body = bytes(buf[p:p + body_len])
    p += body_len
    topic_len = buf[p]
    topic = bytes(buf[p + 1:p + 1 + topic_len]).decode("utf-8", "replace")
    p += 1 + topic_len
    if p + 2 > pos + total:
        raise RecordError("bad topic length")
    props_len = INT16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != pos + total:
        raise RecordError(f"size mismatch: total {total}, fields end at {p + props_len - pos}")
    props = bytes(buf[p:p + props_len]).decode("utf-8", "replace")
    return Record(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], decode_host(f[9]), f[10],
                  f[11], decode_host(f[12]), f[13], f[14], f[15], body, topic, props)






@lru_cache(maxsize=4096)
def tags_hash(tags: str) -> int:
    """Consume queue tag code: String.hashCode of TAGS (0 when empty)."""
    return java_hash(tags) if tags else 0


def index_key_hash(key: str) -> int:
    """IndexFile key hash: abs(String.hashCode), with Integer.MIN_VALUE mapped to 0."""
    h = abs(java_hash(key))
    return 0 if h > 0x7FFFFFFF else h


@lru_cache(maxsize=4096)
def _unsigned_hash(s: str) -> int:
    return java_hash(s) & 0xFFFFFFFF


#: 31**(n-1) .. 31**0 (mod 2**32) for keys of n characters: one multiply per character, no reversing.
_DESCENDING_POW31 = tuple(_POW31[:n][::-1] for n in range(256))


def index_key_hash2(prefix: str, key: str) -> int:
    """index_key_hash(prefix + key), reusing the cached hash of a repeated prefix like "topic#"."""
    n = len(key)
    if not key.isascii() or n >= len(_DESCENDING_POW31):
        return index_key_hash(prefix + key)
    h = (_unsigned_hash(prefix) * _POW31[n] + sum(map(mul, key.encode("ascii"), _DESCENDING_POW31[n]))) & 0xFFFFFFFF
    if h & 0x80000000:
        h = (1 << 32) - h
    return 0 if h > 0x7FFFFFFF else h


index_key_hash2_py = index_key_hash2
if accel is not None:
    index_key_hash2 = accel.index_key_hash2  # noqa: F811


_MSGID_V4 = struct.Struct(">4siq")
_MSGID_V6 = struct.Struct(">16siq")


@lru_cache(maxsize=256)
def _msg_id_prefix(store_ip: bytes, store_port: int) -> str:
    return (store_ip + struct.pack(">i", store_port)).hex().upper()


def offset_msg_id(store_ip: bytes, store_port: int, offset: int) -> str:
    """offsetMsgId: store host + port + commit log offset as upper-case hex."""
    return f"{_msg_id_prefix(store_ip, store_port)}{offset & 0xFFFFFFFFFFFFFFFF:016X}"


offset_msg_id_py = offset_msg_id
if accel is not None:
    offset_msg_id = accel.offset_msg_id  # noqa: F811


def record_msg_id(record: Record) -> str:
    """The offsetMsgId of a decoded record (its store host and commit log offset)."""
    return offset_msg_id(encode_host(record.store_host)[0], record.store_port, record.physical_offset)


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(store host, port, commit log offset) from an offsetMsgId."""
    raw = bytes.fromhex(msg_id)
    st = _MSGID_V4 if len(raw) == 16 else _MSGID_V6
    ip, port, offset = st.unpack(raw)
    return decode_host(ip), port, offset


_BATCH_HEAD = struct.Struct(">iiiii")


def iter_batch_body(body: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """(flag, body, properties bytes) of each message in a client batch body."""
    pos, end = 0, len(body)
    while pos < end:
        if pos + _BATCH_HEAD.size > end:
            raise RecordError("truncated batch item header")
        _size, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
        pos += _BATCH_HEAD.size
        if body_len < 0 or pos + body_len + 2 > end:
            raise RecordError("bad batch item body length")
        item = body[pos:pos + body_len]
        pos += body_len
        props_len = INT16.unpack_from(body, pos)[0]
        pos += 2
        if props_len < 0 or pos + props_len > end:
            raise RecordError("bad batch item properties length")
        yield flag, item, body[pos:pos + props_len]
        pos += props_len


def encode_batch_body(items: list[tuple[int, bytes, str]]) -> bytes:
    """A client batch body from (flag, body, properties) items, as producers send it."""
    out = bytearray()
    for flag, item, props in items:
        pb = props.encode()
        size = _BATCH_HEAD.size + len(item) + 2 + len(pb)
        out += _BATCH_HEAD.pack(size, 0, 0, flag, len(item)) + item + INT16.pack(len(pb)) + pb
    return bytes(out)


def parse_delay_levels(spec: str) -> list[int]:
    """messageDelayLevel ("1s 5s ... 2h") to milliseconds, level 1 first."""
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    return [int(tok[:-1]) * units[tok[-1]] for tok in spec.split()]
