"""The value types the broker exchanges with the store (named as in Java's store API)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


@dataclass(slots=True)
class MessageToStore:
    """A message as the broker hands it over; properties is the raw "k\\x01v\\x02..." string."""

    topic: str
    queue_id: int
    flag: int
    body: bytes
    properties: str
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None


@dataclass(slots=True)
class BatchToStore:
    """SEND_BATCH_MESSAGE: the client's encoded batch body; properties are appended to each item's."""

    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    body: bytes
    properties: str = ""


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"


@dataclass(slots=True)
class PutResult:
    status: PutStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    queue_offset: int = 0
    msg_num: int = 1
    store_timestamp: int = 0
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[bytes] = field(default_factory=list)
    suggest_pull_from_slave: bool = False
    queue_offsets: list[int] = field(default_factory=list)  # consume queue offset of each message

    @property
    def buffer_total_size(self) -> int:
        return sum(map(len, self.messages))
