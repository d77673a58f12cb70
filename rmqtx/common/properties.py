"""RocketMQ's configuration files: Java ``.properties`` style ``key=value`` lines."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping


def parse_properties(text: str, *, trim_values: bool = False) -> dict[str, str]:
    """Parse Java ``.properties`` text (``=``, ``:`` or blank separators, ``#``/``!`` comments).

    Enough of ``Properties.load`` for configuration files and UPDATE_*_CONFIG bodies; line
    continuations are joined, ``\\`` escapes of separators are honoured. ``trim_values`` drops a
    value's trailing blanks, which a configuration file's author never means (Java would keep them).
    """
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while line.endswith("\\") and not line.endswith("\\\\") and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        key_chars = []
        j = 0
        while j < len(line):
            ch = line[j]
            if ch == "\\" and j + 1 < len(line):
                key_chars.append(line[j + 1])
                j += 2
                continue
            if ch in "=: \t\f":
                break
            key_chars.append(ch)
            j += 1
        rest = line[j:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        value = rest.replace("\\\\", "\x00").replace("\\", "").replace("\x00", "\\")
        out["".join(key_chars)] = value.rstrip() if trim_values else value
    return out


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a configuration file; a missing file is an error the operator should see."""
    return parse_properties(Path(path).read_text(encoding="utf-8"), trim_values=True)


def parse_bool(text: str | bool) -> bool:
    """Java's ``Boolean.parseBoolean``."""
    return text if isinstance(text, bool) else str(text).strip().lower() == "true"


def int_setting(props: Mapping[str, str], key: str, default: int, file: str = "broker.conf") -> int:
    """``key`` as a number, ``default`` when unset or blank; any other text is refused (start-up stops)."""
    text = props.get(key)
    if text is None or not text.strip():
        return default
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{file}: {key}={text} is not a number") from None


def bool_setting(props: Mapping[str, str], key: str, default: bool, file: str = "broker.conf") -> bool:
    """``key`` as true or false (any case), ``default`` when unset; blank is false (Java's parseBoolean),
    other text is refused."""
    text = props.get(key)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false", ""):
        raise ValueError(f"{file}: {key}={text} is neither true nor false")
    return parse_bool(text)
