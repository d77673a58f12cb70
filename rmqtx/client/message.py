"""Messages, queues and results as the Java client models them (Message, MessageExt, SendResult...)."""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass, field
from typing import Iterable

from rmqtx.common.javacompat import hashset_order, java_string_hash
from rmqtx.common.message import (
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    parse_properties,
)
from rmqtx.common.sysflag import SYSFLAG_COMPRESSED
from rmqtx.store.record import decode_record, encode_host, offset_msg_id

_MASK32 = 0xFFFFFFFF


def _opt_int(text: str | None) -> int | None:
    return int(text) if text else None


def _int32(v: int) -> int:
    v &= _MASK32
    return v - (1 << 32) if v & 0x80000000 else v


class Message:
    """A message to send: topic, body, flag and properties (TAGS, KEYS, WAIT, user properties...).

    Properties keep insertion order; they go on the wire in Java HashMap order.
    """

    def __init__(
        self,
        topic: str,
        body: bytes | str,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        *,
        flag: int = 0,
        properties: dict[str, str] | None = None,
        delay_level: int = 0,
        wait_store: bool = True,
    ) -> None:
        self.topic = topic
        self.body = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        self.flag = flag
        self.properties: dict[str, str] = {}
        self.transaction_id: str | None = None
        if tags:
            self.properties[PROPERTY_TAGS] = tags
        if keys:
            self.keys = [keys] if isinstance(keys, str) else list(keys)
        self.properties[PROPERTY_WAIT] = "true" if wait_store else "false"
        for name, value in (properties or {}).items():
            self.properties[name] = str(value)
        if delay_level:
            self.delay_level = delay_level

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return self.properties.get(PROPERTY_KEYS, "").split()

    @keys.setter
    def keys(self, keys: Iterable[str]) -> None:
        self.properties[PROPERTY_KEYS] = " ".join(keys)

    @property
    def delay_level(self) -> int:
        return int(self.properties.get(PROPERTY_DELAY, "0"))

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        self.properties[PROPERTY_DELAY] = str(level)

    # Timer messages (RocketMQ 5.x): delivered at an absolute time or after a delay, to the broker's timerPrecisionMs.
    @property
    def deliver_time_ms(self) -> int | None:
        """Epoch milliseconds to deliver at (TIMER_DELIVER_MS), as Java 5.x's setDeliverTimeMs."""
        return _opt_int(self.properties.get(PROPERTY_TIMER_DELIVER_MS))

    @deliver_time_ms.setter
    def deliver_time_ms(self, ms: int) -> None:
        self.properties[PROPERTY_TIMER_DELIVER_MS] = str(int(ms))

    @property
    def delay_time_ms(self) -> int | None:
        """Milliseconds from the broker's receipt (TIMER_DELAY_MS), as setDelayTimeMs."""
        return _opt_int(self.properties.get(PROPERTY_TIMER_DELAY_MS))

    @delay_time_ms.setter
    def delay_time_ms(self, ms: int) -> None:
        self.properties[PROPERTY_TIMER_DELAY_MS] = str(int(ms))

    @property
    def delay_time_sec(self) -> int | None:
        """Seconds from the broker's receipt (TIMER_DELAY_SEC), as setDelayTimeSec."""
        return _opt_int(self.properties.get(PROPERTY_TIMER_DELAY_SEC))

    @delay_time_sec.setter
    def delay_time_sec(self, sec: int) -> None:
        self.properties[PROPERTY_TIMER_DELAY_SEC] = str(int(sec))

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} topic={self.topic!r} props={self.properties!r} body={len(self.body)}B>"


class MessageExt(Message):
    """A stored message as pulled or queried: where it lives and when it was born and stored."""

    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int
    offset_msg_id: str
    broker_name: str | None

    @property
    def msg_id(self) -> str:
        """The id Java's MessageClientExt shows: UNIQ_KEY when present, else the offset id."""
        return self.properties.get(PROPERTY_UNIQ_KEY) or self.offset_msg_id

    @classmethod
    def from_stored(cls, buf: bytes, pos: int = 0, broker_name: str | None = None) -> "MessageExt":
        """Decode one stored record (as pull, query and check bodies carry them); inflates zlib bodies."""
        rec = decode_record(buf, pos)
        msg = cls.__new__(cls)
        msg.topic = rec.topic
        msg.flag = rec.flag
        msg.properties = parse_properties(rec.properties)
        msg.transaction_id = None
        msg.body = zlib.decompress(rec.body) if rec.sys_flag & SYSFLAG_COMPRESSED else rec.body
        msg.queue_id = rec.queue_id
        msg.queue_offset = rec.queue_offset
        msg.commit_log_offset = rec.physical_offset
        msg.store_size = rec.total_size
        msg.sys_flag = rec.sys_flag
        msg.born_timestamp = rec.born_timestamp
        msg.born_host = _host_port(rec.born_host, rec.born_port)
        msg.store_timestamp = rec.store_timestamp
        msg.store_host = _host_port(rec.store_host, rec.store_port)
        msg.reconsume_times = rec.reconsume_times
        msg.prepared_transaction_offset = rec.prepared_transaction_offset
        msg.body_crc = rec.body_crc
        msg.offset_msg_id = offset_msg_id(encode_host(rec.store_host)[0], rec.store_port, rec.physical_offset)
        msg.broker_name = broker_name
        if msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
            msg.transaction_id = msg.properties.get(PROPERTY_UNIQ_KEY)
        return msg

    def __repr__(self) -> str:
        return (
            f"<MessageExt {self.topic}:{self.queue_id}@{self.queue_offset} id={self.msg_id} "
            f"props={self.properties!r} body={len(self.body)}B>"
        )


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def decode_messages(body: bytes, broker_name: str | None = None) -> list[MessageExt]:
    """Records stored back to back (pull and query answers) as MessageExt objects."""
    out = []
    pos = 0
    while pos < len(body):
        msg = MessageExt.from_stored(body, pos, broker_name)
        out.append(msg)
        pos += msg.store_size
    return out


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; sorts like Java's (topic, brokerName, queueId)."""

    topic: str
    broker_name: str
    queue_id: int

    def java_hash(self) -> int:
        """Java's MessageQueue.hashCode, for HashSet ordering."""
        h = 31 + java_string_hash(self.broker_name)
        h = _int32(31 * h + self.queue_id)
        return _int32(31 * h + java_string_hash(self.topic))

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, data: dict) -> "MessageQueue":
        return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))


def mq_set_json(mqs: Iterable[MessageQueue]) -> list[dict]:
    """A Set<MessageQueue> as fastjson writes it."""
    return [mq.to_json() for mq in hashset_order(list(dict.fromkeys(mqs)), MessageQueue.java_hash)]


class SendStatus(enum.Enum):
    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 10
    FLUSH_SLAVE_TIMEOUT = 12
    SLAVE_NOT_AVAILABLE = 11


@dataclass
class SendResult:
    """Outcome of a send: UNIQ_KEY(s), the broker's offset id(s), queue and offset."""

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True


class PullStatus(enum.Enum):
    FOUND = 0
    NO_NEW_MSG = 19
    NO_MATCHED_MSG = 20
    OFFSET_ILLEGAL = 21


@dataclass
class PullResult:
    """Outcome of a pull: status, where to pull next, queue bounds and the (tag-filtered) messages."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_broker_id: int = 0


class TransactionState(enum.Enum):
    """A local transaction's outcome; the value is END_TRANSACTION's commitOrRollback."""

    COMMIT_MESSAGE = 8
    ROLLBACK_MESSAGE = 12
    UNKNOW = 0


__all__ = [
    "Message",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "TransactionState",
    "decode_messages",
    "mq_set_json",
]
