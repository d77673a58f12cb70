"""Decoding request bodies that a hostile or buggy client may have sent.

A body that is not JSON, or JSON of the wrong shape, raises :class:`BodyError`; the dispatcher
answers it with SYSTEM_ERROR and a fastjson-like remark (what Java's broker answers when its
decoder throws) and logs one warning line, no traceback.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import orjson

_BARE_KEY_FIX = None  # compiled lazily: only bodies with fastjson's bare integer keys need it


class BodyError(ValueError):
    """A request body that does not decode into what its request code needs."""

    java_class = "com.alibaba.fastjson.JSONException"

    @property
    def remark(self) -> str:
        return f"{self.java_class}: {self}"


def loads_body(body: bytes | None, what: str) -> Any:
    """Parse JSON (fastjson's bare integer keys allowed); ``None`` for an empty body."""
    global _BARE_KEY_FIX
    if not body:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    if _BARE_KEY_FIX is None:
        import re

        _BARE_KEY_FIX = re.compile(rb"([{,]\s*)(-?\d+)(\s*:)")
    try:
        return orjson.loads(_BARE_KEY_FIX.sub(rb'\1"\2"\3', body))
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"{what} body is not JSON: {exc}") from None


def json_object(body: bytes | None, what: str, *, empty_ok: bool = True) -> dict:
    """The body as a JSON object (``{}`` when empty and ``empty_ok``)."""
    data = loads_body(body, what)
    if data is None:
        if empty_ok:
            return {}
        raise BodyError(f"{what} body is empty")
    if not isinstance(data, dict):
        raise BodyError(f"{what} body is not a JSON object")
    return data


def object_list(value: Any, what: str) -> list[dict]:
    """A JSON array of objects (``null`` counts as empty)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise BodyError(f"{what} is not an array of objects")
    return value


def text(value: Any, what: str, default: str = "") -> str:
    """A string field; numbers are taken as fastjson takes them, objects are refused."""
    if value is None:
        return default
    if isinstance(value, (dict, list)):
        raise BodyError(f"{what} is not a string")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@contextmanager
def body_shape(what: str) -> Iterator[None]:
    """Turn conversion errors while reading a decoded body into :class:`BodyError`."""
    try:
        yield
    except BodyError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
        raise BodyError(f"{what}: {type(exc).__name__}: {exc}") from None
