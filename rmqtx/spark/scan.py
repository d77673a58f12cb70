"""Commit log scanning without Spark: find record starts, then decode them column-wise.

Finding starts is the only per-record Python loop (a record's position depends on the previous
one's size); every field is then gathered for a whole batch at once with numpy and Arrow.
"""
from __future__ import annotations

import logging
import mmap
import os
import zlib
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmqtx.common.message import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY
from rmqtx.common.sysflag import SYSFLAG_BORN_HOST_V6, SYSFLAG_COMPRESSED, SYSFLAG_STORE_HOST_V6
from rmqtx.store import record as R

from . import columns as C

log = logging.getLogger("rmqtx.spark")

MIN_RECORD = R.record_length(0, 0, 0, 0)
PHYS_OFFSET_POS = 28  # the record's own commit log offset
_RUN = 4  # equal-sized records in a row before the walk tries the next ones in bulk
CHUNK = 32 << 20  # bytes of records per Arrow batch
QUEUE_BATCH = 32768  # consume queue units per Arrow batch
CQ_UNIT = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tagsCode", ">i8")])
CQ_BLANK_SIZE = 0x7FFFFFFF  # Java's fillPreBlank units: (0, Integer.MAX_VALUE, 0)
_MAGIC_BYTES = R.INT32.pack(R.MESSAGE_MAGIC)
_COMPRESSION_TYPE = 0x700  # 5.x: bits 8-10 name the codec; 0 (4.x) and 0x300 are zlib
_ZLIB_TYPES = (0, 0x300)


@dataclass(frozen=True)
class ScanOptions:
    """What a partition reader keeps: a [start_ms, end_ms) store-time window, body, CRC policy."""

    start_ms: int | None = None
    end_ms: int | None = None
    include_body: bool = True
    crc: str = "off"  # off | drop | flag


@dataclass(frozen=True)
class LogFile:
    """One commit log file: its path and the commit log offset of its first byte."""

    path: str
    base: int
    size: int


def commit_log_files(root: str) -> list[LogFile]:
    """The store's commit log files in offset order (names are 20-digit start offsets)."""
    d = os.path.join(root, "commitlog")
    if not os.path.isdir(d):
        return []
    out = [LogFile(os.path.join(d, n), int(n), os.path.getsize(os.path.join(d, n)))
           for n in os.listdir(d) if n.isdigit() and len(n) == 20]
    return sorted(out, key=lambda f: f.base)


def open_map(path: str) -> tuple[mmap.mmap, np.ndarray] | None:
    """A read-only map of a file and a numpy view of it (None for an empty file)."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return None
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    return mm, np.frombuffer(mm, np.uint8)


def is_record_at(mm: mmap.mmap, pos: int, base: int) -> bool:
    """Whether a message record starts at pos: magic, sane size and its own offset field agree."""
    if pos < 0 or pos + R.HOSTS_POS > len(mm):
        return False
    total, magic = R.SIZE_MAGIC.unpack_from(mm, pos)
    return (magic == R.MESSAGE_MAGIC and MIN_RECORD <= total <= len(mm) - pos
            and R.INT64.unpack_from(mm, pos + PHYS_OFFSET_POS)[0] == base + pos)


def find_record_start(mm: mmap.mmap, start: int, stop: int, base: int) -> int | None:
    """The first record start in [start, stop), found by its magic and self-referencing offset."""
    if is_record_at(mm, start, base):
        return start
    q = mm.find(_MAGIC_BYTES, start + 4, stop + 4)
    while q != -1:
        if is_record_at(mm, q - 4, base):
            return q - 4
        q = mm.find(_MAGIC_BYTES, q + 1, stop + 4)
    return None


def store_timestamp_at(mm: mmap.mmap, pos: int) -> int:
    """storeTimestamp of the record at pos (its position depends on the born host's width)."""
    sys_flag = R.INT32.unpack_from(mm, pos + R.SYSFLAG_POS)[0]
    return R.INT64.unpack_from(mm, pos + R.HOSTS_POS + (20 if sys_flag & SYSFLAG_BORN_HOST_V6 else 8))[0]


def walk(mm: mmap.mmap, buf: np.ndarray, pos: int, until: int) -> tuple[np.ndarray, int, str | None]:
    """Record starts from pos while pos < until; the end state is None, blank, zero or torn.

    After a few records of one size in a row, the next ones are assumed to have that size too
    and checked together with numpy (exactly: each must carry that size and the magic), so a
    run of equal-sized messages costs no Python step per record.
    """
    starts: list[int] = []
    runs: list[np.ndarray] = []
    size = len(mm)
    unpack = R.SIZE_MAGIC.unpack_from
    same = prev = 0
    while pos < until:
        if pos + 8 > size:
            return _joined(runs, starts), pos, "torn"
        total, magic = unpack(mm, pos)
        if magic == R.MESSAGE_MAGIC and MIN_RECORD <= total <= size - pos:
            same = same + 1 if total == prev else 0
            prev = total
            if same < _RUN:
                starts.append(pos)
                pos += total
                continue
            same = 0
            guess = pos + total * np.arange(min(-(-(until - pos) // total), (size - pos) // total), dtype=np.int64)
            head = C.gather(buf, guess, 8).view(">i4")
            ok = (head[:, 0] == total) & (head[:, 1] == R.MESSAGE_MAGIC)
            n = len(ok) if ok.all() else int(ok.argmin())
            runs.append(np.array(starts, np.int64))
            runs.append(guess[:n])
            starts = []
            pos += n * total
        elif magic == R.BLANK_MAGIC:
            return _joined(runs, starts), pos, "blank"
        else:
            return _joined(runs, starts), pos, "zero" if total == 0 and magic == 0 else "torn"
    return _joined(runs, starts), pos, None


def _joined(runs: list[np.ndarray], starts: list[int]) -> np.ndarray:
    return np.concatenate(runs + [np.array(starts, np.int64)])


def scan_range(f: LogFile, start: int, stop: int, last: bool, opts: ScanOptions) -> Iterator[dict]:
    """Column dicts for the records starting in [start, stop) of one commit log file."""
    mapped = open_map(f.path)
    if mapped is None:
        return
    mm, buf = mapped
    pos = start
    while pos < stop:
        starts, pos, end = walk(mm, buf, pos, min(stop, pos + CHUNK))
        if len(starts):
            cols = decode(buf, starts, f.base, opts)
            if cols is not None:
                yield cols
        if end == "torn" or (end == "zero" and not last):
            log.warning("commit log %s: %s data at offset %d ends the scan of this file",
                        f.path, end, f.base + pos)
        if end is not None:
            break


def read_queue_units(path: str) -> np.ndarray:
    """The written units of a consume queue file: those before the first empty one."""
    units = np.fromfile(path, CQ_UNIT)
    empty = np.flatnonzero(units["size"] == 0)
    if len(empty):
        units = units[:empty[0]]
    return units


def scan_queue_file(path: str, files: list[LogFile], opts: ScanOptions) -> Iterator[dict]:
    """Column dicts for the records a consume queue file points at, in queue order."""
    units = read_queue_units(path)
    units = units[units["size"] != CQ_BLANK_SIZE]
    if not len(units):
        return
    offsets = units["offset"].astype(np.int64)
    sizes = units["size"].astype(np.int64)
    bases = np.array([f.base for f in files], np.int64)
    which = np.searchsorted(bases, offsets, side="right") - 1
    cuts = np.flatnonzero(np.diff(which)) + 1
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(units)]):
        if which[lo] < 0:
            continue  # the commit log file was deleted by retention
        f = files[which[lo]]
        mapped = open_map(f.path)
        if mapped is None:
            continue
        mm, buf = mapped
        starts = offsets[lo:hi] - f.base
        inside = starts + sizes[lo:hi] <= len(mm)
        starts, expect = starts[inside], sizes[lo:hi][inside]
        for a in range(0, len(starts), QUEUE_BATCH):
            cols = decode(buf, starts[a:a + QUEUE_BATCH], f.base, opts, expect[a:a + QUEUE_BATCH])
            if cols is not None:
                yield cols


def decode(buf: np.ndarray, starts: np.ndarray, base: int | None, opts: ScanOptions,
           expect_size: np.ndarray | None = None) -> dict | None:
    """Decode the records at `starts` (file positions) into a dict of Arrow columns.

    base is the commit log offset of buf[0]; None (records pulled over the network, not at their
    place) takes each record's commit log offset from its own header field.

    Records whose fields do not add up to their total size (or to the consume queue's size)
    are dropped with a warning; the time window and CRC policy are applied before any
    variable-length column is built.
    """
    rows = _locate(buf, starts)
    ok = rows.pop("ok")
    if expect_size is not None:
        ok &= rows["total"] == expect_size
    if not ok.all():
        log.warning("records at %s: %d malformed record(s) skipped", base, int((~ok).sum()))
    keep = ok
    if opts.start_ms is not None:
        keep &= rows["store_ts"] >= opts.start_ms
    if opts.end_ms is not None:
        keep &= rows["store_ts"] < opts.end_ms
    if opts.crc != "off":
        idx = np.flatnonzero(keep)
        good = _crc(buf, rows["start"][idx] + rows["p_body"][idx], rows["body_len"][idx]) == rows["crc"][idx]
        if opts.crc == "drop":
            if not good.all():
                log.warning("records at %s: %d record(s) with a bad body CRC dropped", base, int((~good).sum()))
            keep[idx[~good]] = False
        else:
            rows["crc_valid"] = np.zeros(len(starts), bool)
            rows["crc_valid"][idx] = good
    if not keep.all():
        rows = {k: v[keep] for k, v in rows.items()}
    return _columns(buf, rows, base, opts.include_body) if len(rows["start"]) else None


def _locate(buf: np.ndarray, starts: np.ndarray) -> dict[str, np.ndarray]:
    """Per-record field positions, lengths and the values filters need, plus an `ok` mask."""
    head = C.gather(buf, starts, R.HOSTS_POS)
    total = C.field(head, 0, 4)
    sys_flag = C.field(head, R.SYSFLAG_POS, 4)
    born_v6 = (sys_flag & SYSFLAG_BORN_HOST_V6) != 0
    store_v6 = (sys_flag & SYSFLAG_STORE_HOST_V6) != 0
    p_store_ts = R.HOSTS_POS + np.where(born_v6, 20, 8)
    p_reconsume = p_store_ts + 8 + np.where(store_v6, 20, 8)
    p_body = p_reconsume + 16
    body_len = C.be_int(buf, starts + p_body - 4, 4)
    ok = (C.field(head, 4, 4) == R.MESSAGE_MAGIC) & (body_len >= 0) & (p_body + body_len + 3 <= total)
    p_topic = p_body + np.where(ok, body_len, 0) + 1
    topic_len = np.take(buf, starts + p_topic - 1, mode="clip").astype(np.int64)
    p_props = p_topic + topic_len + 2
    props_len = C.be_int(buf, starts + p_props - 2, 2)
    ok &= (props_len >= 0) & (p_props + props_len == total)
    return {"ok": ok, "start": starts, "head": head, "total": total, "sys_flag": sys_flag, "born_v6": born_v6,
            "store_v6": store_v6, "store_ts": C.be_int(buf, starts + p_store_ts, 8), "crc": C.field(head, 8, 4),
            "p_store_host": p_store_ts + 8, "p_reconsume": p_reconsume, "p_body": p_body, "body_len": body_len,
            "p_topic": p_topic, "topic_len": topic_len, "p_props": p_props, "props_len": props_len}


def _crc(buf: np.ndarray, body_pos: np.ndarray, body_len: np.ndarray) -> np.ndarray:
    """CRC32 of each stored body (zlib per record: CRC cannot be vectorised in numpy)."""
    mv = buf.data  # the array's own bytes
    return np.fromiter((zlib.crc32(mv[p:p + n]) & 0x7FFFFFFF for p, n in zip(body_pos.tolist(), body_len.tolist())),
                       np.int64, len(body_pos))


def _columns(buf: np.ndarray, r: dict[str, np.ndarray], base: int | None, include_body: bool) -> dict:
    """All output columns of the located records."""
    n = len(r["start"])
    s = r["start"]
    cols = _fixed_columns(r["head"], r["total"], r["crc"], r["sys_flag"], r["store_ts"], s, base)
    cols["bornHost"] = C.host_strings(buf, s + R.HOSTS_POS, r["born_v6"])
    cols["storeHost"] = C.host_strings(buf, s + r["p_store_host"], r["store_v6"])
    cols["reconsumeTimes"] = pa.array(C.be_int(buf, s + r["p_reconsume"], 4), pa.int32())
    cols["preparedTransactionOffset"] = pa.array(C.be_int(buf, s + r["p_reconsume"] + 4, 8))
    cols["topic"] = C.to_text(C.binary_segments(buf, s + r["p_topic"], r["topic_len"]))
    cols["msgId"] = _msg_ids(buf, s, r["p_store_host"], r["store_v6"])
    cols.update(_property_columns(C.to_text(C.binary_segments(buf, s + r["p_props"], r["props_len"])), n))
    cols["body"] = (_bodies(buf, s + r["p_body"], r["body_len"], r["sys_flag"]) if include_body
                    else pa.nulls(n, pa.binary()))
    if "crc_valid" in r:
        cols["crcValid"] = pa.array(r["crc_valid"])
    return cols


def _fixed_columns(head: np.ndarray, total: np.ndarray, crc: np.ndarray, sys_flag: np.ndarray,
                   store_ts: np.ndarray, starts: np.ndarray, base: int | None) -> dict:
    """Columns at fixed positions of the record header."""
    ts = pa.timestamp("us", tz="UTC")
    return {
        "queueId": pa.array(C.field(head, 12, 4), pa.int32()),
        "queueOffset": pa.array(C.field(head, R.QUEUE_OFFSET_POS, 8)),
        "commitLogOffset": pa.array(starts + base if base is not None else C.field(head, PHYS_OFFSET_POS, 8)),
        "storeSize": pa.array(total, pa.int32()),
        "bodyCRC": pa.array(crc, pa.int32()),
        "flag": pa.array(C.field(head, 16, 4), pa.int32()),
        "sysFlag": pa.array(sys_flag, pa.int32()),
        "bornTimestamp": pa.array(C.field(head, R.BORN_TS_POS, 8) * 1000, ts),
        "storeTimestamp": pa.array(store_ts * 1000, ts),
    }


def _msg_ids(buf: np.ndarray, starts: np.ndarray, p_store_host: np.ndarray, store_v6: np.ndarray) -> pa.Array:
    """offsetMsgId: store host address + port + the record's physical offset field, in hex."""
    def ids(width: int) -> pa.Array:
        raw = np.concatenate([C.gather(buf, starts + p_store_host, width), C.gather(buf, starts + PHYS_OFFSET_POS, 8)], axis=1)
        return C.hex_strings(raw)

    v4 = ids(8)
    return pc.if_else(pa.array(store_v6), ids(20), v4) if store_v6.any() else v4


def _property_columns(props: pa.Array, n: int) -> dict:
    """properties (map), tags, keys and uniqKey, all from one split of the properties strings."""
    names, values, owner = C.split_properties(props)
    out = {"properties": pa.MapArray.from_arrays(C.offsets_from_owners(owner, n), names, values)}
    for col, prop in (("tags", PROPERTY_TAGS), ("uniqKey", PROPERTY_UNIQ_KEY)):
        hit = pc.equal(names, prop)
        out[col] = C.scatter(values.filter(hit), owner[hit.to_numpy(zero_copy_only=False)], n)
    hit = pc.equal(names, PROPERTY_KEYS).to_numpy(zero_copy_only=False)
    rows = owner[hit]
    last = np.r_[rows[1:] != rows[:-1], True] if len(rows) else np.zeros(0, bool)
    out["keys"] = C.split_words(values.filter(pa.array(hit)).filter(pa.array(last)), rows[last], n)
    return out


def _bodies(buf: np.ndarray, pos: np.ndarray, length: np.ndarray, sys_flag: np.ndarray) -> pa.Array:
    """Bodies as stored, except zlib-compressed ones, which are inflated (as Java's decode does)."""
    bodies = C.binary_segments(buf, pos, length)
    packed = np.flatnonzero((sys_flag & SYSFLAG_COMPRESSED) != 0)
    if len(packed) == 0:
        return bodies
    codec = sys_flag[packed] & _COMPRESSION_TYPE
    packed = packed[np.isin(codec, _ZLIB_TYPES)]
    mask = np.zeros(len(pos), bool)
    mask[packed] = True
    inflated = pa.array([_inflate(bodies[int(i)].as_py()) for i in packed], pa.binary())
    return pc.replace_with_mask(bodies, pa.array(mask), inflated)


def _inflate(body: bytes) -> bytes:
    """zlib-inflate a body; a damaged one is returned as stored rather than failing the scan."""
    try:
        return zlib.decompress(body)
    except zlib.error:
        log.warning("a body flagged as compressed does not inflate; returned as stored")
        return body
