"""Store configuration with RocketMQ's key names and defaults."""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field

CQ_UNIT_SIZE = 20
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

# Older RocketMQ spellings still found in broker.conf files.
_ALIASES = {
    "mapedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    "mapedFileSizeCommitLog": "mapped_file_size_commit_log",
    "checkCRCOnRecover": "check_crc_on_recover",  # Java's own spelling, not plain camel case
}
#: Settings 4.9.8 lacks (rmqtx's own, Apache 5.x's): read from broker.conf, left out of the 4.9.8
#: listing (GET_BROKER_CONFIG).
OWN_KEYS = frozenset({"mappedConsumeQueueFilesMax", "storeType"})
STORE_TYPES = ("default", "defaultRocksDB")
#: Snake-case fields whose Java key is not their plain camel case.
_JAVA_KEYS = {"check_crc_on_recover": "checkCRCOnRecover"}


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p.capitalize() for p in rest)


@dataclass(frozen=True)
class StoreConfig:
    """MessageStoreConfig subset; field names are RocketMQ's keys in snake case. Frozen: read once at
    start (the broker's settings section for its store), never changed while the store runs."""

    store_path_root_dir: str = os.path.join(os.path.expanduser("~"), "store")
    store_path_commit_log: str | None = None
    mapped_file_size_commit_log: int = 1024**3
    mapped_file_size_consume_queue: int = 300000 * CQ_UNIT_SIZE
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 48 * 1024 * 1024
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    flush_disk_type: str = "ASYNC_FLUSH"
    flush_interval_commit_log: int = 500
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60000
    sync_flush_timeout: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    clean_resource_interval: int = 10000
    message_index_enable: bool = True
    max_msgs_num_batch: int = 64
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    check_crc_on_recover: bool = True
    #: Java's warmMapedFileEnable: off, new store files are sparse; on, their blocks are reserved at creation.
    warm_maped_file_enable: bool = False
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    #: rmqtx's own: at most this many consume-queue files mapped (a descriptor and a map area each);
    #: idle queues are unmapped and mapped again on use. 0: every file mapped from start, as Java does.
    mapped_consume_queue_files_max: int = 4096
    #: Apache 5.x's: "default" (4.x consume-queue files) or "defaultRocksDB" (units in RocksDB, the rocksdb extra)
    store_type: str = "default"
    # HA (master/slave replication), Java's MessageStoreConfig names and defaults.
    broker_role: str = "ASYNC_MASTER"
    ha_listen_port: int = 0  # 0: listenPort + 1, as Java's BrokerStartup sets it
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20000
    ha_transfer_batch_size: int = 32 * 1024
    ha_master_address: str | None = None
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    slave_timeout: int = 3000
    extra: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # Java rounds the consume queue file size up to whole 20-byte units.
        units = -(-self.mapped_file_size_consume_queue // CQ_UNIT_SIZE)
        object.__setattr__(self, "mapped_file_size_consume_queue", units * CQ_UNIT_SIZE)
        if self.store_type not in STORE_TYPES:
            raise ValueError(f"store setting storeType={self.store_type} is neither of {', '.join(STORE_TYPES)}")
        if self.store_type == "defaultRocksDB" and self.enable_consume_queue_ext:
            raise ValueError("storeType=defaultRocksDB keeps no consume queue ext files: "
                             "enableConsumeQueueExt (and enableCalcFilterBitMap) must be false")

    @property
    def rocksdb_queues(self) -> bool:
        return self.store_type == "defaultRocksDB"

    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def consume_queue_ext_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue_ext")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def is_slave(self) -> bool:
        return self.broker_role.upper() == "SLAVE"

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type.upper() == "SYNC_FLUSH"

    @property
    def index_file_size(self) -> int:
        return 40 + self.max_hash_slot_num * 4 + self.max_index_num * 20

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "StoreConfig":
        """Build from broker.conf-style keys; unknown keys are kept in `extra` and ignored."""
        types = {f.name: f.type for f in dataclasses.fields(cls) if f.name != "extra"}
        kwargs: dict[str, object] = {}
        extra: dict[str, str] = {}
        for key, raw in props.items():
            name = _ALIASES.get(key.strip(), _snake(key.strip()))
            value = str(raw).strip()
            if name not in types:
                extra[key] = value
                continue
            kind = types[name]
            if kind in ("int", int):
                try:
                    kwargs[name] = int(value)
                except ValueError:
                    raise ValueError(f"store setting {key}={value} is not a number") from None
            elif kind in ("bool", bool):
                if value.lower() not in ("true", "false"):
                    raise ValueError(f"store setting {key}={value} is neither true nor false")
                kwargs[name] = value.lower() == "true"
            else:
                kwargs[name] = value or None if name in ("store_path_commit_log", "ha_master_address") else value
        return cls(extra=extra, **kwargs)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        """RocketMQ key names to string values (for getBrokerConfig-style answers)."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name == "extra" or _camel(f.name) in OWN_KEYS:
                continue
            v = getattr(self, f.name)
            if v is None and f.name == "ha_master_address":
                continue  # Java's properties listing leaves out null settings
            out[_JAVA_KEYS.get(f.name, _camel(f.name))] = "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        return out
