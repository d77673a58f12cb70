"""RocketMQ's configuration files: Java ``.properties`` style ``key=value`` lines."""

from __future__ import annotations

from pathlib import Path


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``key=value`` (or ``key: value``) lines; ``#`` and ``!`` start comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            key, value = line, ""
        else:
            key, value = line[:cut].strip(), line[cut + 1 :].strip()
        props[key] = value
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a configuration file; a missing file is an error the operator should see."""
    return parse_properties(Path(path).read_text(encoding="utf-8"))


def parse_bool(text: str | bool) -> bool:
    """Java's ``Boolean.parseBoolean``."""
    return text if isinstance(text, bool) else str(text).strip().lower() == "true"
