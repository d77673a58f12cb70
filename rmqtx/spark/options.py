"""The option parsing the store and network data sources share (times, booleans, topic lists, the store
path): its own module so that network.py need not import datasource.py, which imports it."""
from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Mapping


def store_root(options: Mapping[str, str]) -> str:
    """The store directory given to load(), checked early so a typo fails at planning."""
    path = options.get("path")
    if not path:
        raise ValueError("give the store directory: spark.read.format(...).load('/path/to/store')")
    if not os.path.isdir(path):
        raise ValueError(f"store directory {path!r} does not exist")
    return path


def parse_time(value: str | None) -> int | None:
    """Epoch milliseconds from "1795264822018" or an ISO 8601 time (naive = UTC)."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def parse_bool(value: str | None, default: bool) -> bool:
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


def parse_crc(value: str | None) -> str:
    """verifyCrc: false/off (default), drop (= true) or flag (adds a crcValid column)."""
    v = (value or "off").strip().lower()
    v = {"false": "off", "no": "off", "0": "off", "true": "drop", "yes": "drop", "1": "drop"}.get(v, v)
    if v not in ("off", "drop", "flag"):
        raise ValueError(f"verifyCrc must be false, drop or flag, not {value!r}")
    return v


def topic_list(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]
