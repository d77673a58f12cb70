"""REGISTER_BROKER bodies: DataVersion, TopicConfig and RegisterBrokerBody in both encodings.

Plain form: fastjson ``{"filterServerList":[],"topicConfigSerializeWrapper":{...}}``.
Compressed form (header ``compressed=true``): zlib over ``int32 len | DataVersion JSON |
int32 n | n x (int32 len | "name read write perm filterType") | int32 len | filter list JSON``.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from rmqtx.common import fastjson
from rmqtx.common.topic_config import TopicConfig

_INT = struct.Struct(">i")


class BodyError(ValueError):
    """A register body that cannot be decoded."""


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version; equal versions mean nothing changed."""

    timestamp: int = 0
    counter: int = 0

    @classmethod
    def from_bean(cls, bean: Any) -> "DataVersion":
        if not isinstance(bean, dict):
            raise BodyError("dataVersion is not an object")
        try:
            return cls(int(bean.get("timestamp", 0) or 0), int(bean.get("counter", 0) or 0))
        except (TypeError, ValueError):
            raise BodyError("dataVersion fields are not numbers") from None

    @classmethod
    def decode(cls, body: bytes) -> "DataVersion":
        try:
            return cls.from_bean(fastjson.loads(body))
        except fastjson.FastjsonError as exc:
            raise BodyError(str(exc)) from None

    def encode(self) -> bytes:
        return b'{"counter":%d,"timestamp":%d}' % (self.counter, self.timestamp)


@dataclass(slots=True)
class RegisterBrokerBody:
    data_version: DataVersion = DataVersion()
    topic_configs: list[TopicConfig] = field(default_factory=list)
    filter_server_list: list[str] | None = field(default_factory=list)

    @classmethod
    def decode(cls, body: bytes, compressed: bool) -> "RegisterBrokerBody":
        """Decode either form; raises BodyError for anything malformed."""
        return _decode_compressed(body) if compressed else _decode_json(body)

    def encode(self, compress: bool = False) -> bytes:
        """The body a broker sends (used by tests and by rmqtx's broker)."""
        if compress:
            parts = [self.data_version.encode()]
            out = [_INT.pack(len(parts[0])), parts[0], _INT.pack(len(self.topic_configs))]
            for tc in self.topic_configs:
                raw = tc.compact().encode()
                out += [_INT.pack(len(raw)), raw]
            filters = fastjson.dumps(list(self.filter_server_list or []))
            out += [_INT.pack(len(filters)), filters]
            return zlib.compress(b"".join(out), 9)
        table = fastjson.JavaMap({tc.topicName: tc.to_json() for tc in self.topic_configs})
        return fastjson.dumps(
            {
                "filterServerList": self.filter_server_list,
                "topicConfigSerializeWrapper": {
                    "dataVersion": {"counter": self.data_version.counter, "timestamp": self.data_version.timestamp},
                    "topicConfigTable": table,
                },
            }
        )


def _decode_json(body: bytes) -> RegisterBrokerBody:
    try:
        doc = fastjson.loads(body)
    except (fastjson.FastjsonError, UnicodeDecodeError) as exc:
        raise BodyError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BodyError("body is not an object")
    # Brokers before 3.0.11 send the TopicConfigSerializeWrapper itself.
    wrapper = doc.get("topicConfigSerializeWrapper", doc if "topicConfigTable" in doc else {})
    if not isinstance(wrapper, dict):
        raise BodyError("topicConfigSerializeWrapper is not an object")
    version = DataVersion.from_bean(wrapper.get("dataVersion") or {})
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise BodyError("topicConfigTable is not an object")
    try:
        configs = [TopicConfig.from_json(bean, str(name)) for name, bean in table.items()]
    except ValueError as e:
        raise BodyError(str(e)) from None
    filters = doc.get("filterServerList", [] if "topicConfigSerializeWrapper" in doc else None)
    if filters is not None and not (isinstance(filters, list) and all(isinstance(f, str) for f in filters)):
        raise BodyError("filterServerList is not a list of strings")
    return RegisterBrokerBody(version, configs, filters)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise BodyError("compressed body ends early")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int(self) -> int:
        return _INT.unpack(self.take(4))[0]

    def chunk(self) -> bytes:
        return self.take(self.int())


def _decode_compressed(body: bytes) -> RegisterBrokerBody:
    try:
        # Bounded: a hostile body must not inflate without limit (frames are at most 16 MiB).
        inflater = zlib.decompressobj()
        data = inflater.decompress(body, 256 * 1024 * 1024)
    except zlib.error as exc:
        raise BodyError(f"not zlib data: {exc}") from None
    reader = _Reader(data)
    version = DataVersion.decode(reader.chunk())
    count = reader.int()
    if count < 0:
        raise BodyError("negative topic count")
    configs = []
    for _ in range(count):
        try:
            configs.append(TopicConfig.from_compact(reader.chunk().decode("utf-8")))
        except UnicodeDecodeError:
            raise BodyError("topic config is not UTF-8") from None
        except ValueError as e:
            raise BodyError(str(e)) from None
    try:
        filters = fastjson.loads(reader.chunk())
    except (fastjson.FastjsonError, UnicodeDecodeError):
        filters = []  # Java logs and goes on with an empty list
    if not isinstance(filters, list):
        filters = []
    return RegisterBrokerBody(version, configs, [str(f) for f in filters])
