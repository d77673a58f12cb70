"""fastjson-compatible JSON: a writer that reproduces fastjson's bytes and a tolerant reader.

RocketMQ's Java side serializes bodies with fastjson, which is not plain JSON: beans come out
with their properties in alphabetical order, ``HashMap`` fields in Java's bucket order, and maps
with non-string keys use bare keys (``{0:"127.0.0.1:10911"}``). Python values map as follows:

* plain ``dict``          -> a bean: keys sorted, ``None`` values left out;
* :class:`JavaMap`        -> a ``java.util.HashMap``: Java iteration order, ``None`` values left out;
* :class:`OrderedMap`     -> a map written in the given order (LinkedHashMap, TreeMap...);
* ``list``/``tuple``      -> an array; :class:`JavaSet` -> a ``HashSet`` in Java order;
* ``int`` keys are written bare unless ``quote_keys`` (fastjson's BrowserCompatible) is on.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

import orjson

from rmqtx.common.javacompat import java_string_hash

_MASK32 = 0xFFFFFFFF


# -- Java hashing ---------------------------------------------------------------------------
def java_hash(key: object) -> int:
    """``hashCode()`` of a String or Long key (ints hash as ``java.lang.Long``)."""
    if isinstance(key, str):
        return java_string_hash(key)
    if isinstance(key, bool):
        return 1231 if key else 1237
    if isinstance(key, int):
        v = key & 0xFFFFFFFFFFFFFFFF
        return (v ^ (v >> 32)) & _MASK32
    raise TypeError(f"no Java hash for {type(key).__name__}")


def table_capacity(size: int, initial: int = 16) -> int:
    """Bucket count of a HashMap built with ``initial`` capacity once it has held ``size`` keys."""
    capacity = 1
    while capacity < max(initial, 1):
        capacity <<= 1
    while size > capacity * 3 // 4:
        capacity <<= 1
    return capacity


def _spread_hash(key: object) -> int:
    """HashMap.hash(): the key's hash with its high half folded in, before the bucket mask."""
    h = java_hash(key) & _MASK32
    return h ^ (h >> 16)


@lru_cache(maxsize=4096)
def _bucket_key(key: object, mask: int) -> int:
    return _spread_hash(key) & mask


def java_order(keys: Sequence[Any], capacity: int | None = None) -> list[Any]:
    """``keys`` (given in insertion order) in the order a Java HashMap/HashSet iterates them.

    ``capacity`` is the table size; by default that of a ``new HashMap<>()`` holding them all.
    Keys without a Java hash (beans) keep their given order.
    """
    if len(keys) < 2:
        return list(keys)
    cap = capacity if capacity is not None else table_capacity(len(keys))
    mask = cap - 1
    try:
        decorated = [(_bucket_key(k, mask), i, k) for i, k in enumerate(keys)]
    except TypeError:
        return list(keys)
    decorated.sort(key=lambda t: (t[0], t[1]))
    return [k for _, _, k in decorated]


class JavaMap(dict):
    """A ``java.util.HashMap``: written in Java's iteration order for its ``capacity``."""

    __slots__ = ("capacity",)

    def __init__(self, *args: Any, capacity: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.capacity = capacity

    def java_keys(self) -> list[Any]:
        return java_order(list(self), self.capacity or table_capacity(len(self)))


class Raw(str):
    """Text already in fastjson's compact form (default flags), written as it is."""

    __slots__ = ()


class RenderedHashMap:
    """A big ``HashMap`` of beans written again and again (a broker's topic table, registered every
    30 s): each entry rendered once per change, not once per write. 100,000 topics took over a
    second of the reactor per registration rendered whole. An entry is rendered again only when
    the table holds a different object under its name (tables replace beans, never edit them).
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[object, int, str]] = {}

    def render(self, table: dict[str, Any], to_json: Callable[[Any], Any], capacity: int) -> Raw:
        """``table`` as :func:`dumps` writes a :class:`JavaMap` of ``capacity`` buckets holding it."""
        old, fresh = self._entries, {}
        for name, bean in table.items():
            hit = old.get(name)
            if hit is None or hit[0] is not bean:
                hit = (bean, _spread_hash(name), write_string(name) + ":" + dumps(to_json(bean)).decode("utf-8"))
            fresh[name] = hit
        self._entries = fresh
        mask = capacity - 1
        entries = sorted(fresh.values(), key=lambda e: e[1] & mask)  # stable: a bucket keeps insertion order
        return Raw("{" + ",".join(e[2] for e in entries) + "}")


class OrderedMap(dict):
    """A map written in the order its entries were given (LinkedHashMap, TreeMap, ...)."""

    __slots__ = ()


class JavaSet(list):
    """A ``java.util.HashSet`` of strings or longs: written in Java's iteration order."""

    __slots__ = ("capacity",)

    def __init__(self, items: Iterable[Any] = (), capacity: int | None = None) -> None:
        super().__init__(dict.fromkeys(items))
        self.capacity = capacity


# -- writer ---------------------------------------------------------------------------------
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _needs_escape(ch: str, browser: bool) -> bool:
    o = ord(ch)
    return ch in _ESCAPES or o < 0x20 or 0x7F <= o < 0xA0 or (browser and o > 0x7F)


def write_string(text: str, browser_compatible: bool = False) -> str:
    """A JSON string literal as fastjson writes it (``\\uXXXX`` upper-case hex)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text and "\x7f" not in text:
        return f'"{text}"'
    out = ['"']
    for ch in text:
        if not _needs_escape(ch, browser_compatible):
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        else:
            for unit in (ch.encode("utf-16-be"),):
                for i in range(0, len(unit), 2):
                    out.append("\\u%04X" % ((unit[i] << 8) | unit[i + 1]))
    out.append('"')
    return "".join(out)


class _Writer:
    def __init__(self, quote_keys: bool, sort_maps: bool, browser: bool) -> None:
        self.quote_keys = quote_keys
        self.sort_maps = sort_maps
        self.browser = browser
        self.out: list[str] = []

    def value(self, v: Any) -> None:
        out = self.out
        if v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, str):
            out.append(v if type(v) is Raw else write_string(v, self.browser))
        elif isinstance(v, int):
            if self.browser and not -9007199254740991 <= v <= 9007199254740991:
                out.append(f'"{v}"')
            else:
                out.append(str(v))
        elif isinstance(v, float):
            out.append(repr(v) if v == v and v not in (float("inf"), float("-inf")) else "null")
        elif isinstance(v, (JavaMap, OrderedMap)):
            self.map(v)
        elif isinstance(v, dict):
            self.bean(v)
        elif isinstance(v, JavaSet):
            self.array(java_order(list(v), v.capacity or table_capacity(len(v))))
        elif isinstance(v, (list, tuple)):
            self.array(v)
        elif isinstance(v, (set, frozenset)):
            self.array(java_order(list(v)))
        elif isinstance(v, (bytes, bytearray)):
            out.append('"%s"' % base64.b64encode(v).decode("ascii"))
        else:
            raise TypeError(f"cannot write {type(v).__name__} as fastjson")

    def array(self, items: Iterable[Any]) -> None:
        self.out.append("[")
        first = True
        for item in items:
            if not first:
                self.out.append(",")
            first = False
            self.value(item)
        self.out.append("]")

    def bean(self, bean: dict) -> None:
        out = self.out
        out.append("{")
        first = True
        for key in sorted(bean):
            v = bean[key]
            if v is None:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(write_string(key, self.browser))
            out.append(":")
            self.value(v)
        out.append("}")

    def map(self, m: dict) -> None:
        if self.sort_maps:
            try:
                keys: list[Any] = sorted(m)
            except TypeError:
                keys = list(m)
        elif isinstance(m, JavaMap):
            keys = m.java_keys()
        else:
            keys = list(m)
        out = self.out
        out.append("{")
        first = True
        for key in keys:
            v = m[key]
            if v is None:
                continue
            if not first:
                out.append(",")
            first = False
            self.key(key)
            out.append(":")
            self.value(v)
        out.append("}")

    def key(self, key: Any) -> None:
        if isinstance(key, str):
            self.out.append(write_string(key, self.browser))
        elif isinstance(key, (bool, int)) and not isinstance(key, bool):
            self.out.append(f'"{key}"' if self.quote_keys else str(key))
        elif isinstance(key, tuple):  # a bean key as the reader returns it
            self.bean(dict(key))
        else:
            self.value(key)


def dumps(obj: Any, *, quote_keys: bool = False, sort_maps: bool = False, browser_compatible: bool = False) -> bytes:
    """Serialize ``obj`` as fastjson does (UTF-8 bytes, no spaces).

    ``browser_compatible`` is fastjson's BrowserCompatible: non-ASCII escaped, non-string map keys
    quoted; ``sort_maps`` is MapSortField.
    """
    w = _Writer(quote_keys or browser_compatible, sort_maps, browser_compatible)
    w.value(obj)
    return "".join(w.out).encode("utf-8")


# -- reader ---------------------------------------------------------------------------------
class FastjsonError(ValueError):
    """The text is neither JSON nor fastjson's relaxed form."""


def loads(data: bytes | str) -> Any:
    """Parse strict JSON or fastjson output (bare keys, single quotes).

    Bare integer keys become ``int``; an object used as a key becomes a sorted tuple of its items.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    parser = _Parser(text)
    value = parser.value()
    parser.ws()
    if parser.pos != len(text):
        raise FastjsonError(f"trailing data at offset {parser.pos}")
    return value


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


class _Parser:
    _BARE_END = set(" \t\r\n:,}]")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> FastjsonError:
        return FastjsonError(f"{what} at offset {self.pos}")

    def ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        self.ws()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end")
        return self.text[self.pos]

    def value(self) -> Any:
        ch = self.peek()
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.arr()
        if ch in "\"'":
            return self.string()
        return self.bare(as_key=False)

    def obj(self) -> dict:
        self.pos += 1
        out: dict = {}
        if self.peek() == "}":
            self.pos += 1
            return out
        while True:
            ch = self.peek()
            if ch in "\"'":
                key: Any = self.string()
            elif ch == "{" or ch == "[":
                key = _freeze(self.value())
            else:
                key = self.bare(as_key=True)
            if self.peek() != ":":
                raise self.fail("expected ':'")
            self.pos += 1
            out[key] = self.value()
            ch = self.peek()
            self.pos += 1
            if ch == "}":
                return out
            if ch != ",":
                raise self.fail("expected ',' or '}'")
            if self.peek() == "}":  # trailing comma
                self.pos += 1
                return out

    def arr(self) -> list:
        self.pos += 1
        out: list = []
        if self.peek() == "]":
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            ch = self.peek()
            self.pos += 1
            if ch == "]":
                return out
            if ch != ",":
                raise self.fail("expected ',' or ']'")

    def string(self) -> str:
        quote = self.text[self.pos]
        if quote == '"':
            end = self.pos + 1
            text = self.text
            # find the closing quote, skipping escaped characters
            while True:
                end = text.find('"', end)
                if end < 0:
                    raise self.fail("unterminated string")
                backslashes = 0
                i = end - 1
                while text[i] == "\\":
                    backslashes += 1
                    i -= 1
                if backslashes % 2 == 0:
                    break
                end += 1
            raw = text[self.pos : end + 1]
            self.pos = end + 1
            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise self.fail("bad string") from None
        # single-quoted: unescape by hand
        self.pos += 1
        out: list[str] = []
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            self.pos += 1
            if ch == "'":
                return "".join(out)
            if ch == "\\":
                esc = text[self.pos : self.pos + 1]
                self.pos += 1
                if esc == "u":
                    out.append(chr(int(text[self.pos : self.pos + 4], 16)))
                    self.pos += 4
                else:
                    out.append({"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(esc, esc))
            else:
                out.append(ch)
        raise self.fail("unterminated string")

    def bare(self, as_key: bool) -> Any:
        start = self.pos
        text = self.text
        while self.pos < len(text) and text[self.pos] not in self._BARE_END:
            self.pos += 1
        word = text[start : self.pos]
        if not word:
            raise self.fail("unexpected character")
        if word in ("true", "false", "null") and not as_key:
            return {"true": True, "false": False, "null": None}[word]
        try:
            return int(word)
        except ValueError:
            pass
        if not as_key:
            try:
                return float(word)
            except ValueError:
                raise self.fail(f"bad literal {word!r}") from None
        return word


__all__ = [
    "FastjsonError",
    "JavaMap",
    "JavaSet",
    "OrderedMap",
    "dumps",
    "java_hash",
    "java_order",
    "loads",
    "table_capacity",
    "write_string",
]
