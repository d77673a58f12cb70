"""Broker config files (``config/*.json``) in fastjson's pretty format, written atomically.

Java writes ``file.tmp``, keeps the previous file as ``file.bak`` and renames the new one in;
integer-keyed maps get bare keys (``{0:48,1:49}``), which Java reads back and so does rmqtx.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any, Callable

import orjson
from twisted.internet import defer, threads
from twisted.python.failure import Failure

_BARE_KEY = re.compile(rb"([{,]\s*)(-?\d+)(\s*:)")


def loads_fastjson(data: bytes | str) -> Any:
    """Parse JSON that may have fastjson's bare integer keys."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return orjson.loads(_BARE_KEY.sub(rb'\1"\2"\3', raw))


def _scalar(value: Any) -> str:
    return orjson.dumps(value).decode()


class RenderedMap:
    """A string-keyed map whose entries are already rendered for ``pretty`` at ``depth``."""

    __slots__ = ("lines", "depth")

    def __init__(self, lines: list[str], depth: int) -> None:
        self.lines = lines
        self.depth = depth


class EntryCache:
    """Each entry of a big table rendered once per change, not once per save.

    ``topics.json`` with 100,000 topics is ~25 MB: rendering it whole on every save took most of the
    reactor's time while topics were created one after another. An entry is rendered again only when
    the table holds a different object under its name (tables replace beans, never edit them in place).
    """

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self._lines: dict[str, tuple[object, str]] = {}

    def render(self, table: dict[str, Any], to_json: Callable[[Any], Any]) -> RenderedMap:
        pad = "\t" * (self.depth + 1)
        old, fresh = self._lines, {}
        for name, bean in table.items():
            hit = old.get(name)
            if hit is None or hit[0] is not bean:
                hit = (bean, f"{pad}{_scalar(name)}:{pretty(to_json(bean), self.depth + 1)}")
            fresh[name] = hit
        self._lines = fresh
        return RenderedMap([line for _, line in fresh.values()], self.depth)


def pretty(value: Any, depth: int = 0) -> str:
    """fastjson ``PrettyFormat``: tabs, one entry per line; int-keyed maps stay on one line."""
    pad = "\t" * (depth + 1)
    if isinstance(value, RenderedMap):
        if value.depth != depth:
            raise ValueError(f"entries rendered for depth {value.depth}, placed at {depth}")
        return "{\n" + ",\n".join(value.lines) + "\n" + "\t" * depth + "}" if value.lines else "{}"
    if isinstance(value, dict):
        if not value:
            return "{}"
        if all(isinstance(k, int) for k in value):
            inner = ",".join(f"{k}:{_scalar(v)}" for k, v in value.items())
            return "{" + inner + "\n" + "\t" * depth + "}"
        items = [f"{pad}{_scalar(str(k))}:{pretty(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "\t" * depth + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [f"{pad}{pretty(v, depth + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "\t" * depth + "]"
    return _scalar(value)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    if path.exists():
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)


class JsonConfigFile:
    """One config file: load at start (blocking is fine then), persist in a thread later."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = defer.DeferredLock()  # saves of one file run in order, so the newest content lands last
        self._queued: defer.Deferred | None = None  # a save_latest() waiting for its turn

    def load(self) -> Any | None:
        """The parsed file, falling back to ``.bak`` when the main file is missing or torn."""
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            if data.strip():
                try:
                    return loads_fastjson(data)
                except orjson.JSONDecodeError:
                    continue
        return None

    def save_now(self, value: Any) -> None:
        """Blocking write: for start-up and shutdown."""
        _write_atomically(self.path, pretty(value))

    def save(self, value: Any) -> defer.Deferred[None]:
        """Render on the caller's thread, write in a worker thread, one save of this file at a time."""
        return self._lock.run(threads.deferToThread, _write_atomically, self.path, pretty(value))

    def save_latest(self, render: Callable[[], Any]) -> defer.Deferred:
        """Save what ``render()`` returns when this file's turn comes: changes made while a save is
        written or waits join the one waiting save, so a burst of changes (2,000 topics created one
        after another) renders and writes the file a few times, not once per change."""
        if self._queued is not None:
            return self._queued
        queued: defer.Deferred = defer.Deferred()  # set before the lock runs write(), which may be at once
        self._queued = queued

        def write() -> defer.Deferred:
            self._queued = None
            return threads.deferToThread(_write_atomically, self.path, pretty(render()))

        def settle(result: Any) -> None:  # the failure, if any, goes to the caller's Deferred only
            if isinstance(result, Failure):
                queued.errback(result)
            else:
                queued.callback(None)

        self._lock.run(write).addBoth(settle)
        return queued

    def drain(self) -> defer.Deferred[None]:
        """A Deferred that fires once every save started so far has finished."""
        return self._lock.run(lambda: None)
