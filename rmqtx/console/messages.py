"""Messages for the console: a stored record as JSON, and the three searches (id, key, queue offset)."""

from __future__ import annotations

import time
import zlib
from typing import Any

from rmqtx.common.message import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, parse_properties
from rmqtx.common.sysflag import SYSFLAG_COMPRESSED
from rmqtx.store.record import RecordError, decode_offset_msg_id, decode_record, record_msg_id

#: The most messages one search or one DLQ page returns (the store reads stay short on the reactor).
MAX_RESULTS = 64


class SearchError(ValueError):
    """A search the console cannot run (bad id, missing argument); the text is shown to the user."""


def body_views(body: bytes, sys_flag: int) -> dict[str, Any]:
    """The body as UTF-8 text when it is text, and always as hex (a compressed body is inflated first)."""
    compressed = bool(sys_flag & SYSFLAG_COMPRESSED)
    if compressed:
        try:
            body = zlib.decompress(body)
        except zlib.error:
            pass
    try:
        text: str | None = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"bodySize": len(body), "bodyText": text, "bodyHex": body.hex(), "compressed": compressed}


def message_json(raw: bytes) -> dict[str, Any]:
    """One commit log record as the console shows it."""
    rec = decode_record(raw)
    props = parse_properties(rec.properties)
    offset_id = record_msg_id(rec)
    out: dict[str, Any] = {
        "msgId": props.get(PROPERTY_UNIQ_KEY) or offset_id,
        "offsetMsgId": offset_id,
        "topic": rec.topic,
        "queueId": rec.queue_id,
        "queueOffset": rec.queue_offset,
        "commitLogOffset": rec.physical_offset,
        "tags": props.get(PROPERTY_TAGS, ""),
        "keys": props.get(PROPERTY_KEYS, ""),
        "flag": rec.flag,
        "sysFlag": rec.sys_flag,
        "bornTimestamp": rec.born_timestamp,
        "bornHost": f"{rec.born_host}:{rec.born_port}",
        "storeTimestamp": rec.store_timestamp,
        "storeHost": f"{rec.store_host}:{rec.store_port}",
        "reconsumeTimes": rec.reconsume_times,
        "properties": props,
    }
    out.update(body_views(rec.body, rec.sys_flag))
    return out


def _decoded(raws: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for raw in raws[:MAX_RESULTS]:
        try:
            out.append(message_json(raw))
        except RecordError:
            continue
    return out


def by_offset_id(store: Any, msg_id: str) -> list[dict[str, Any]]:
    """An offsetMsgId (store host, port, commit log offset) read straight from the commit log."""
    try:
        _, _, offset = decode_offset_msg_id(msg_id.strip())
    except (ValueError, Exception):
        return []
    raw = store.look_message_by_offset(offset) if offset >= 0 else None
    if not raw:
        return []
    found = _decoded([raw])
    return [m for m in found if m["offsetMsgId"] == msg_id.strip().upper()]


def by_key(store: Any, topic: str, key: str) -> list[dict[str, Any]]:
    """Messages of ``topic`` indexed under ``key`` (a KEYS entry or a UNIQ_KEY), at any store time."""
    if not topic or not key:
        raise SearchError("a key search needs a topic and a key")
    raws, _, _ = store.query_message(topic, key, MAX_RESULTS, 0, int(time.time() * 1000) + 60_000)
    return _decoded(raws)


def by_id(store: Any, msg_id: str, topic: str = "") -> list[dict[str, Any]]:
    """An offsetMsgId, or a client msgId (UNIQ_KEY) which needs its topic, as mqadmin queryMsgById takes both."""
    msg_id = msg_id.strip()
    if not msg_id:
        raise SearchError("no message id given")
    found = by_offset_id(store, msg_id)
    if found:
        return found
    if not topic:
        raise SearchError(f"{msg_id} is not an offset message id of this broker; give its topic to look up a client msgId")
    return [m for m in by_key(store, topic, msg_id) if m["msgId"] == msg_id]


def by_queue_offset(store: Any, topic: str, queue_id: int, offset: int, count: int = 1) -> list[dict[str, Any]]:
    """Up to ``count`` messages from ``offset`` in one consume queue."""
    if not topic:
        raise SearchError("a queue search needs a topic")
    count = max(1, min(count, MAX_RESULTS))
    raws = []
    high = store.get_max_offset_in_queue(topic, queue_id)
    for cq_offset in range(max(offset, store.get_min_offset_in_queue(topic, queue_id)), min(high, offset + count)):
        phy = store.get_commit_log_offset_in_queue(topic, queue_id, cq_offset)
        raw = store.look_message_by_offset(phy) if phy >= 0 else None
        if raw:
            raws.append(raw)
    return _decoded(raws)
