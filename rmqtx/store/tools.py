"""Offline tools over a store directory, read-only: dump every message, verify every structure."""
from __future__ import annotations

import base64
import mmap
import os
import re
import sys
from collections import Counter
from typing import IO, Iterator

import orjson

from rmqtx.common.message import PROPERTY_DELAY, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, parse_properties
from rmqtx.common.progress import Progress, size_text
from rmqtx.common.topics import SCHEDULE_TOPIC

from . import record as R
from .commitlog import check_at, gets_queue_entry
from .config import DEFAULT_DELAY_LEVELS
from .consume_queue import UNIT, UNIT_SIZE
from .consume_queue_ext import HEAD as EXT_HEAD
from .consume_queue_ext import MIN_UNIT_SIZE as EXT_MIN_UNIT
from .consume_queue_ext import is_ext_addr, undecorate
from .index import ENTRY, HEADER, HEADER_SIZE, SLOT

_OFFSET_NAME = re.compile(r"^\d{20}$")
_INDEX_NAME = re.compile(r"^\d{17}$")


def _files(directory: str, pattern: re.Pattern[str]) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if pattern.match(n))


def _map(path: str) -> mmap.mmap | bytes:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def scan_commit_log(store_dir: str, check_crc: bool = True) -> Iterator[tuple[int, str, int, R.Record | None]]:
    """(offset, kind, size, record) for every record, blank and the first bad spot of each file."""
    for path in _files(os.path.join(store_dir, "commitlog"), _OFFSET_NAME):
        base = int(os.path.basename(path))
        buf = _map(path)
        pos, limit = 0, len(buf)
        while pos < limit:
            kind, size, rec = check_at(buf, pos, limit, check_crc)
            yield base + pos, kind, size, rec
            if kind != "msg":
                break
            pos += size


def _host(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def message_json(offset: int, rec: R.Record) -> dict:
    """The dump view of one record."""
    props = parse_properties(rec.properties)
    store_ip, _ = R.encode_host(rec.store_host)
    keys = props.get(PROPERTY_KEYS, "")
    return {
        "topic": rec.topic, "queueId": rec.queue_id, "queueOffset": rec.queue_offset,
        "commitLogOffset": offset, "storeSize": rec.total_size, "sysFlag": rec.sys_flag, "flag": rec.flag,
        "bornTimestamp": rec.born_timestamp, "storeTimestamp": rec.store_timestamp,
        "bornHost": _host(rec.born_host, rec.born_port), "storeHost": _host(rec.store_host, rec.store_port),
        "reconsumeTimes": rec.reconsume_times, "preparedTransactionOffset": rec.prepared_transaction_offset,
        "tags": props.get(PROPERTY_TAGS), "keys": [k for k in keys.split(" ") if k], "properties": props,
        "bodyCRC": rec.body_crc, "msgId": R.offset_msg_id(store_ip, rec.store_port, offset),
        "body": base64.b64encode(rec.body).decode(),
    }


def dump(store_dir: str, topic: str | None = None, out: IO[bytes] | None = None) -> int:
    """Print one JSON line per message; returns the count."""
    out = out or sys.stdout.buffer
    n = 0
    for offset, kind, _, rec in scan_commit_log(store_dir, check_crc=False):
        if kind == "msg" and rec is not None and (topic is None or rec.topic == topic):
            out.write(orjson.dumps(message_json(offset, rec)) + b"\n")
            n += 1
    out.flush()
    return n


def _tags_code(rec: R.Record, props: dict[str, str], delay_levels: list[int]) -> int:
    if rec.topic == SCHEDULE_TOPIC and props.get(PROPERTY_DELAY, "").isdigit() and int(props[PROPERTY_DELAY]) > 0:
        return rec.store_timestamp + delay_levels[min(int(props[PROPERTY_DELAY]), len(delay_levels)) - 1]
    return R.tags_hash(props.get(PROPERTY_TAGS, ""))


def _ext_tags_code(ext_files: dict[int, mmap.mmap | bytes], address: int) -> int | None:
    """tagsCode of the ext unit at address, None when no well-formed unit is there."""
    real = undecorate(address)
    for base, buf in ext_files.items():
        pos = real - base
        if 0 <= pos and pos + EXT_MIN_UNIT <= len(buf):
            size, tags_code, _, bm_size = EXT_HEAD.unpack_from(buf, pos)
            ok = size >= EXT_MIN_UNIT and pos + size <= len(buf) and 0 <= bm_size <= size - EXT_MIN_UNIT
            return tags_code if ok else None
    return None


def verify(store_dir: str, hash_slots: int | None = None, delay_spec: str = DEFAULT_DELAY_LEVELS,
           progress: Progress | None = None) -> dict:
    """Check every record (magic, size, CRC), consume queue unit and index entry; a summary dict.

    ``progress`` hears how far the commit log scan is (the long part) every few seconds.
    """
    errors: Counter[str] = Counter()
    delay_levels = R.parse_delay_levels(delay_spec)
    records: dict[int, tuple[str, int, int, int, int | None, frozenset[int]]] = {}
    n_rec = n_bytes = n_blank = 0
    files = _files(os.path.join(store_dir, "commitlog"), _OFFSET_NAME)
    first = int(os.path.basename(files[0])) if files else 0
    total = sum(os.path.getsize(f) for f in files)
    for offset, kind, size, rec in scan_commit_log(store_dir):
        if kind == "msg" and rec is not None:
            n_rec += 1
            if progress is not None and not n_rec & 4095:
                progress.tick(offset - first, total, "of the commit log checked")
            n_bytes += size
            props = parse_properties(rec.properties)
            keys = [props[PROPERTY_UNIQ_KEY]] if PROPERTY_UNIQ_KEY in props else []
            keys += [k for k in props.get(PROPERTY_KEYS, "").split(" ") if k]
            hashes = frozenset(R.index_key_hash(f"{rec.topic}#{k}") for k in keys)
            tag = _tags_code(rec, props, delay_levels) if gets_queue_entry(rec.sys_flag) else None
            records[offset] = (rec.topic, rec.queue_id, rec.queue_offset, size, tag, hashes)
        elif kind == "blank":
            n_blank += 1
        elif kind != "end":
            errors[f"commitlog_{kind}"] += 1
    min_phy = int(os.path.basename(files[0])) if files else 0
    max_phy = max((o + r[3] for o, r in records.items()), default=min_phy)

    n_cq = n_ext = 0
    undispatched = 0
    cq_root = os.path.join(store_dir, "consumequeue")
    seen_units: set[tuple[str, int, int]] = set()
    for topic in sorted(os.listdir(cq_root)) if os.path.isdir(cq_root) else []:
        for qid in sorted(os.listdir(os.path.join(cq_root, topic))):
            if not qid.isdigit():
                continue
            ext_dir = os.path.join(store_dir, "consumequeue_ext", topic, qid)
            ext_files = {int(os.path.basename(p)): _map(p) for p in _files(ext_dir, _OFFSET_NAME)}
            for path in _files(os.path.join(cq_root, topic, qid), _OFFSET_NAME):
                buf = _map(path)
                base = int(os.path.basename(path)) // UNIT_SIZE
                for i in range(len(buf) // UNIT_SIZE):
                    phy, size, tag = UNIT.unpack_from(buf, i * UNIT_SIZE)
                    if phy == 0 and size == 0 and tag == 0:
                        break
                    if size == 0x7FFFFFFF and phy == 0:
                        continue  # padding before a queue's first unit
                    n_cq += 1
                    if is_ext_addr(tag) and phy >= min_phy:
                        ext_tag = _ext_tags_code(ext_files, tag)
                        if ext_tag is None:
                            errors["consumequeue_ext_unresolved"] += 1
                        else:
                            n_ext += 1
                        tag = ext_tag
                    if phy < min_phy:
                        continue  # record already deleted by retention
                    r = records.get(phy)
                    if r is None:
                        errors["consumequeue_dangling" if phy >= max_phy else "consumequeue_not_a_record"] += 1
                    elif (r[0], r[1], r[2], r[3]) != (topic, int(qid), base + i, size):
                        errors["consumequeue_mismatch"] += 1
                    elif tag is not None and r[4] != tag:
                        errors["consumequeue_tag_mismatch"] += 1
                    else:
                        seen_units.add((topic, int(qid), r[2]))
    for offset, r in records.items():
        if r[4] is not None and (r[0], r[1], r[2]) not in seen_units:
            undispatched += 1

    if progress is not None:
        progress.tick(total, total, "of the commit log checked; consume queues done, checking the index")
    n_idx = 0
    idx_files = _files(os.path.join(store_dir, "index"), _INDEX_NAME)
    for path in idx_files:
        buf = _map(path)
        if len(buf) < HEADER_SIZE:
            errors["index_bad_file"] += 1
            continue
        _, _, _, _, slot_count, count = HEADER.unpack_from(buf, 0)
        slot_num = hash_slots or _slots_from_size(len(buf))
        if slot_num is None or count > (len(buf) - HEADER_SIZE - slot_num * 4) // 20:
            errors["index_bad_header"] += 1
            continue
        epos = HEADER_SIZE + slot_num * 4
        for i in range(1, max(count, 1)):
            key_hash, phy, diff, prev = ENTRY.unpack_from(buf, epos + i * 20)
            n_idx += 1
            if phy < min_phy:
                continue
            r = records.get(phy)
            if r is None:
                errors["index_dangling" if phy >= max_phy else "index_not_a_record"] += 1
            elif key_hash not in r[5]:
                errors["index_key_mismatch"] += 1
            if prev < 0 or prev >= i or diff < 0:
                errors["index_bad_chain"] += 1
        for s in range(slot_num):
            v = SLOT.unpack_from(buf, HEADER_SIZE + s * 4)[0]
            if v < 0 or (v and v >= count):
                errors["index_bad_slot"] += 1
    return {
        "records": n_rec, "bytes": n_bytes, "blanks": n_blank, "commitLogFiles": len(files),
        "minOffset": min_phy, "maxOffset": max_phy, "consumeQueueUnits": n_cq, "consumeQueueExtUnits": n_ext,
        "undispatchedRecords": undispatched, "indexFiles": len(idx_files), "indexEntries": n_idx,
        "errors": dict(errors), "ok": not errors,
    }


def _slots_from_size(file_size: int) -> int | None:
    """Slot count of an index file whose entries are 4x its slots (RocketMQ's default ratio)."""
    body = file_size - HEADER_SIZE
    return body // 84 if body > 0 and body % 84 == 0 else None


def verify_summary(summary: dict) -> str:
    """One line saying what verify found."""
    errors = sum(summary["errors"].values())
    return (f"{'OK' if summary['ok'] else 'ERRORS'}, {summary['records']} records ({size_text(summary['bytes'])}) "
            f"in {summary['commitLogFiles']} commit log files, {summary['consumeQueueUnits']} consume queue units, "
            f"{summary['indexEntries']} index entries, {errors} errors")
