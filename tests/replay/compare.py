"""Compare one of rmqtx's frames with Java's under the rules of tests/replay/normalize.py."""

from __future__ import annotations

import re

from rmqtx.common import fastjson
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.serializer import decode_frame, encode_frame
from rmqtx.store.record import Record, decode_record
from tests.replay.normalize import (
    BODY_BY_KEYS,
    CONFIG_VOLATILE,
    RUNTIME_ADDED,
    RUNTIME_PER_PATH_PREFIXES,
    RUNTIME_VOLATILE,
    Translation,
    rules_for,
)

#: GET_BROKER_CONFIG keys both brokers must report.
CORE_CONFIG_KEYS = {"brokerClusterName", "brokerName", "brokerId", "brokerIP1", "listenPort", "namesrvAddr",
                    "storePathRootDir", "brokerRole", "flushDiskType", "brokerPermission", "autoCreateTopicEnable",
                    "defaultTopicQueueNums", "messageDelayLevel", "maxMessageSize", "deleteWhen", "fileReservedTime",
                    "transactionCheckInterval", "transactionTimeOut"}


def compare(code: int, java_frame: bytes, ours_frame: bytes, tr: Translation, pushed: bool = False) -> list[str]:
    """Every difference between the two frames that the rules do not explain (empty: equal)."""
    java, ours = decode_frame(java_frame), decode_frame(ours_frame)
    diffs: list[str] = []
    if encode_frame(ours) != ours_frame:
        diffs.append("rmqtx's frame does not re-encode to itself (not a canonical frame)")
    for name in ("code", "flag", "language", "version", "remark", "serialize_type") + (() if pushed else ("opaque",)):
        if getattr(java, name) != getattr(ours, name):
            diffs.append(f"{name}: {getattr(ours, name)!r} != Java's {getattr(java, name)!r}")
    diffs += _ext(code, java, ours, tr)
    diffs += _body(code, java, ours, tr)
    return diffs


def _ext(code: int, java: RemotingCommand, ours: RemotingCommand, tr: Translation) -> list[str]:
    if (java.ext_fields is None) != (ours.ext_fields is None):
        return [f"extFields {ours.ext_fields!r} != Java's {java.ext_fields!r} (absent vs empty)"]
    jx, ox = java.ext_fields or {}, ours.ext_fields or {}
    if list(jx) != list(ox):
        return [f"ext field order {list(ox)} != Java's {list(jx)}"]
    rules = rules_for(code, "ext")
    out = []
    for key, jv in jx.items():
        rule = rules.get(key)
        why = tr.compare(rule.how, jv, ox[key]) if rule else (None if jv == ox[key] else f"{ox[key]!r} != Java's {jv!r}")
        if why:
            out.append(f"ext {key}: {why}")
    return out


def _body(code: int, java: RemotingCommand, ours: RemotingCommand, tr: Translation) -> list[str]:
    if code in BODY_BY_KEYS and java.body:
        return _runtime(java.body, ours.body) if code == RequestCode.GET_BROKER_RUNTIME_INFO else _config(java.body, ours.body)
    if rules_for(code, "record") and java.body and _is_records(java.body):
        return _records(code, java.body, ours.body, tr)
    if rules_for(code, "json"):
        return _json_numbers(code, java.body, ours.body, tr)
    if java.body != ours.body:
        return [f"body {ours.body[:300]!r}... != Java's {java.body[:300]!r}..."]
    return []


def _json_numbers(code: int, java: bytes, ours: bytes, tr: Translation) -> list[str]:
    """Numbers under the listed keys compared by their rule, pairwise in order; the rest byte for byte."""
    out = []
    for name, rule in rules_for(code, "json").items():
        pattern = re.compile(rb'"%s":(-?\d+)' % re.escape(name.encode()))
        jv, ov = pattern.findall(java), pattern.findall(ours)
        if len(jv) != len(ov):
            out.append(f"{len(ov)} {name} values != Java's {len(jv)}")
        out += [f"{name}: {why}" for j, o in zip(jv, ov) if (why := tr.compare(rule.how, int(j), int(o)))]
        java, ours = pattern.sub(b'"%s":#' % name.encode(), java), pattern.sub(b'"%s":#' % name.encode(), ours)
    if java != ours:
        out.append(f"body {ours[:400]!r}... != Java's {java[:400]!r}...")
    return out


def _is_records(body: bytes) -> bool:
    try:
        decode_records(body)
        return True
    except ValueError:
        return False


def decode_records(body: bytes) -> list[Record]:
    out, pos = [], 0
    while pos < len(body):
        rec = decode_record(body, pos)
        out.append(rec)
        pos += rec.total_size
    return out


def _records(code: int, java_body: bytes, ours_body: bytes, tr: Translation) -> list[str]:
    try:
        js, os_ = decode_records(java_body), decode_records(ours_body)
    except ValueError as exc:
        return [f"body is not a run of stored messages: {exc}"]
    if len(js) != len(os_):
        return [f"{len(os_)} messages != Java's {len(js)}"]
    rules = rules_for(code, "record")
    out = []
    for i, (j, o) in enumerate(zip(js, os_)):
        for name in j._fields:
            if name == "properties":
                out += [f"message {i}: {d}" for d in _properties(j.properties, o.properties, rules, tr)]
                continue
            jv, ov = getattr(j, name), getattr(o, name)
            rule = rules.get(name)
            why = tr.compare(rule.how, jv, ov) if rule else (None if jv == ov else f"{ov!r} != Java's {jv!r}")
            if why:
                out.append(f"message {i} ({j.topic}/{j.queue_id}@{j.queue_offset}) {name}: {why}")
    return out


def _items(text: str) -> list[tuple[str, str]]:
    """Properties in stored order, duplicates kept (a batch message carries WAIT twice)."""
    return [tuple(item.split("\x01", 1)) if "\x01" in item else (item, "") for item in text.split("\x02") if item]  # type: ignore[misc]


def _properties(java: str, ours: str, rules: dict, tr: Translation) -> list[str]:
    jp, op = _items(java), _items(ours)
    if [k for k, _ in jp] != [k for k, _ in op]:
        return [f"property order {[k for k, _ in op]} != Java's {[k for k, _ in jp]}"]
    out = []
    for (key, jv), (_, ov) in zip(jp, op):
        rule = rules.get(f"prop:{key}")
        why = tr.compare(rule.how, jv, ov) if rule else (None if jv == ov else f"{ov!r} != Java's {jv!r}")
        if why:
            out.append(f"property {key}: {why}")
    return out


def _runtime(java_body: bytes, ours_body: bytes) -> list[str]:
    java, ours = fastjson.loads(java_body)["table"], fastjson.loads(ours_body)["table"]
    per_path = tuple(RUNTIME_PER_PATH_PREFIXES)
    wanted = {k for k in java if not k.startswith(per_path)}
    have = {k for k in ours if not k.startswith(per_path) and k not in RUNTIME_ADDED}
    out = []
    if wanted - have:
        out.append(f"runtime keys missing: {sorted(wanted - have)}")
    if have - wanted:
        out.append(f"runtime keys Java does not have: {sorted(have - wanted)}")
    if [k for k in java if k.startswith(per_path)] and not [k for k in ours if k.startswith(per_path)]:
        out.append("runtime: no per-directory commitLogDiskRatio_<path> key")
    for key in sorted(wanted & have):
        if key not in RUNTIME_VOLATILE and java[key] != ours[key]:
            out.append(f"runtime {key}: {ours[key]!r} != Java's {java[key]!r}")
    return out


def _config(java_body: bytes, ours_body: bytes) -> list[str]:
    def parse(body: bytes) -> dict[str, str]:
        return dict(line.split("=", 1) for line in body.decode().splitlines() if "=" in line)

    java, ours = parse(java_body), parse(ours_body)
    out = []
    if CORE_CONFIG_KEYS - set(ours):
        out.append(f"config keys missing: {sorted(CORE_CONFIG_KEYS - set(ours))}")
    for key in sorted(set(java) & set(ours)):
        if key not in CONFIG_VOLATILE and java[key] != ours[key]:
            out.append(f"config {key}: {ours[key]!r} != Java's {java[key]!r}")
    return out
