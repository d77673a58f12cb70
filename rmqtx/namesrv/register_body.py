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

_INT = struct.Struct(">i")
_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


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
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    @classmethod
    def from_bean(cls, bean: Any, fallback_name: str | None = None) -> "TopicConfig":
        if not isinstance(bean, dict):
            raise BodyError("topic config is not an object")
        name = bean.get("topicName", fallback_name)
        if not isinstance(name, str) or not name:
            raise BodyError("topic config without topicName")
        try:
            return cls(
                name,
                int(bean.get("readQueueNums", 16)),
                int(bean.get("writeQueueNums", 16)),
                int(bean.get("perm", 6)),
                str(bean.get("topicFilterType", "SINGLE_TAG")),
                int(bean.get("topicSysFlag", 0)),
                bool(bean.get("order", False)),
            )
        except (TypeError, ValueError):
            raise BodyError(f"topic config {name}: bad numbers") from None

    @classmethod
    def from_compact(cls, text: str) -> "TopicConfig":
        """The space-separated form of the compressed body (it carries no sys flag)."""
        parts = text.split(" ")
        if len(parts) != 5 or parts[4] not in _FILTER_TYPES:
            raise BodyError(f"bad compressed topic config {text!r}")
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
        except ValueError:
            raise BodyError(f"bad compressed topic config {text!r}") from None

    def compact(self) -> str:
        return f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} {self.topic_filter_type}"

    def to_bean(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


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
        table = fastjson.JavaMap({tc.topic_name: tc.to_bean() for tc in self.topic_configs})
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
    configs = [TopicConfig.from_bean(bean, str(name)) for name, bean in table.items()]
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
    try:
        filters = fastjson.loads(reader.chunk())
    except (fastjson.FastjsonError, UnicodeDecodeError):
        filters = []  # Java logs and goes on with an empty list
    if not isinstance(filters, list):
        filters = []
    return RegisterBrokerBody(version, configs, [str(f) for f in filters])
