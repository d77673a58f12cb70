"""Broker configuration from a ``broker.conf`` with RocketMQ's key names."""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from typing import Any

from twisted.logger import Logger

from rmqtx.common.properties import parse_bool
from rmqtx.store.timer import KEYS as TIMER_KEYS

log = Logger(namespace="rmqtx.broker.config")

#: Keys the store reads (it parses them itself from the same properties).
STORE_KEYS = frozenset(
    {
        "storePathCommitLog",
        "mappedFileSizeCommitLog",
        "mappedFileSizeConsumeQueue",
        "mapedFileSizeConsumeQueue",
        "maxHashSlotNum",
        "maxIndexNum",
        "flushIntervalCommitLog",
        "maxMessageSize",
        "fileReservedTime",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "messageIndexEnable",
        "flushDiskType",
        "storePathRootDir",
        "enableConsumeQueueExt",
        "mappedFileSizeConsumeQueueExt",
        "haListenPort",
        "haSendHeartbeatInterval",
        "haHousekeepingInterval",
        "haTransferBatchSize",
        "haMasterAddress",
        "haSlaveFallbehindMax",
        "syncFlushTimeout",
        "slaveTimeout",
        "accessMessageInMemoryMaxRatio",
        "warmMapedFileEnable",
    }
) | TIMER_KEYS

#: Keys rmqtx adds: the gRPC endpoint of rmqtx.grpc (off unless grpcPort is set).
GRPC_KEYS = frozenset({"grpcPort", "grpcListenAddress"}) | frozenset(  # and Apache's proxy limits (rmqtx.grpc.backend)
    {"minInvisibleTimeMillsForRecv", "maxInvisibleTimeMills", "maxUserPropertySize", "userPropertyMaxNum"})
#: Apache 5.x's topic message-type switches: the broker's ``enableMixedMessageType`` (may a topic be MIXED),
#: the proxy's ``enableTopicMessageTypeCheck`` (the gRPC endpoint's check of a send against its topic).
MESSAGE_TYPE_KEYS = frozenset({"enableMixedMessageType", "enableTopicMessageTypeCheck"})
#: rmqtx's web console keys (rmqtx.console.web.ConsoleConfig reads them from the same properties).
CONSOLE_KEYS = frozenset({"consolePort", "consoleListenAddress", "consoleAdminEnable"})
#: Java 5.3's recall switches (rmqtx.broker.processors.recall reads them from the properties).
RECALL_KEYS = frozenset({"recallMessageEnable", "allowRecallWhenBrokerNotWriteable"})
#: rmqtx's own keys and Java keys that GET_BROKER_CONFIG leaves out while unset.
EXTRA_KEYS = frozenset({"enableUpdateBrokerConfig", "litePullMessageEnable", "haMasterAddress", "mapedFileSizeCommitLog",
                        "mapedFileSizeConsumeQueue", "brokerConfigPath"}) | CONSOLE_KEYS | GRPC_KEYS | RECALL_KEYS \
    | MESSAGE_TYPE_KEYS


@dataclass
class BrokerConfig:
    """What the broker itself reads; field names are RocketMQ's keys."""

    brokerClusterName: str = "DefaultCluster"
    brokerName: str = "broker-a"
    brokerId: int = 0
    brokerIP1: str = "127.0.0.1"
    brokerIP2: str = ""
    listenPort: int = 10911
    listenAddress: str = "0.0.0.0"
    namesrvAddr: str = ""
    storePathRootDir: str = os.path.join(os.path.expanduser("~"), "store")
    flushDiskType: str = "ASYNC_FLUSH"
    brokerRole: str = "ASYNC_MASTER"
    #: Consumers may be sent to slave 1 when the master's data they read is no longer in memory.
    slaveReadEnable: bool = False
    brokerPermission: int = 6
    autoCreateTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    defaultTopicQueueNums: int = 8
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    traceTopicEnable: bool = False
    msgTraceTopicName: str = "RMQ_SYS_TRACE_TOPIC"
    registerNameServerPeriod: int = 30000
    forceRegister: bool = True
    registerBrokerTimeoutMills: int = 6000
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    flushConsumerOffsetInterval: int = 5000
    channelExpiredTimeout: int = 120000
    transferMsgByHeap: bool = True
    maxMessageSize: int = 4 * 1024 * 1024
    regionId: str = "DefaultRegion"
    traceOn: bool = True
    rejectTransactionMessage: bool = False
    #: SEND_REPLY_MESSAGE(_V2): also store the reply on its topic (<cluster>_REPLY_TOPIC), not only push it.
    storeReplyMessageEnable: bool = True
    transactionCheckInterval: int = 60000
    transactionTimeOut: int = 6000
    transactionCheckMax: int = 15
    enablePropertyFilter: bool = False
    enableCalcFilterBitMap: bool = False
    expectConsumerNumUseFilter: int = 32
    maxErrorRateOfBloomFilter: int = 20
    filterDataCleanTimeSpan: int = 24 * 3600 * 1000
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    #: Plain ACL (conf/plain_acl.yml) checks every request when true.
    aclEnable: bool = False
    #: rmqtx key: where plain_acl.yml is; empty means $ROCKETMQ_HOME/conf/plain_acl.yml as Java.
    aclFilePath: str = ""
    #: Everything read from the file, for the store and for GET_BROKER_CONFIG.
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def broker_addr(self) -> str:
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def ha_listen_port(self) -> int:
        """haListenPort when broker.conf sets it (an rmqtx extension), else listenPort + 1 as Java forces."""
        value = int(self.properties.get("haListenPort", "0").strip() or 0)
        return value if value > 0 else self.listenPort + 1

    @property
    def ha_server_addr(self) -> str:
        return f"{self.brokerIP2 or self.brokerIP1}:{self.ha_listen_port}"

    @property
    def is_slave(self) -> bool:
        return self.brokerRole.strip().upper() == "SLAVE"

    def check_role(self) -> None:
        """Java's BrokerStartup: masters are brokerId 0, a slave needs a brokerId above 0."""
        role = self.brokerRole.strip().upper()
        if role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"broker.conf: brokerRole={self.brokerRole!r} is not ASYNC_MASTER, SYNC_MASTER or SLAVE")
        self.brokerRole = role
        if role == "SLAVE":
            if self.brokerId <= 0:
                raise ValueError("Slave's brokerId must be > 0")
        else:
            self.brokerId = 0

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrvAddr.split(";") if a.strip()]

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "BrokerConfig":
        """Build from ``key=value`` pairs; a value that does not parse raises ValueError.

        A key no RocketMQ broker knows is warned about (with the closest known key) and dropped, so
        GET_BROKER_CONFIG never shows it as a setting. Java keys rmqtx has no use for are kept.
        """
        config = cls()
        kinds = {f.name: f.type for f in dataclasses.fields(cls) if f.name != "properties"}
        known = known_keys()
        kept: dict[str, str] = {}
        for key, value in props.items():
            if key in kinds:
                setattr(config, key, _convert(kinds[key], value, key))
            elif key.startswith("tls."):
                pass
            elif key not in known:
                hint = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
                log.warn("broker.conf key {key} is not a RocketMQ broker setting; ignored{hint}",
                         key=key, hint=f" (did you mean {hint[0]}?)" if hint else "")
                continue
            else:
                check_value(key, value)
            kept[key] = value
        config.properties = kept
        return config

    def store_properties(self) -> dict[str, str]:
        """The keys the store reads, with the broker's own defaults filled in."""
        props = dict(self.properties)
        props.setdefault("storePathRootDir", self.storePathRootDir)
        props.setdefault("flushDiskType", self.flushDiskType)
        props["brokerRole"] = self.brokerRole
        props.setdefault("maxMessageSize", str(self.maxMessageSize))
        props.setdefault("messageDelayLevel", self.messageDelayLevel)
        if self.enableCalcFilterBitMap:  # bit maps live in the ext files (Java needs both switches set)
            props.setdefault("enableConsumeQueueExt", "true")
        return props

    def as_properties(self) -> dict[str, str]:
        """Every setting as strings (GET_BROKER_CONFIG)."""
        out = {f.name: _java_text(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "properties"}
        for key, value in self.properties.items():
            if not key.startswith("tls."):  # Java keeps TLS settings (key passwords) out of the broker config
                out.setdefault(key, value)
        return out


def known_keys() -> frozenset[str]:
    """Every key a broker.conf may set: Java 4.9.8's broker, store and netty settings, and rmqtx's own."""
    global _KNOWN
    if _KNOWN is None:
        from rmqtx.broker.java_settings import java_defaults
        from rmqtx.broker.pop.settings import PopSettings
        from rmqtx.store.config import StoreConfig

        fields = {f.name for f in dataclasses.fields(BrokerConfig) if f.name != "properties"}
        _KNOWN = frozenset(fields | STORE_KEYS | EXTRA_KEYS | set(java_defaults(10911))
                           | set(StoreConfig().to_properties()) | {f.name for f in dataclasses.fields(PopSettings)})
    return _KNOWN


_KNOWN: frozenset[str] | None = None


def check_value(key: str, value: str) -> None:
    """Refuse a value Java's default says is a boolean or a number when it is neither."""
    from rmqtx.broker.java_settings import FIXED_DEFAULTS
    from rmqtx.store.config import StoreConfig

    default = "false" if key in MESSAGE_TYPE_KEYS else FIXED_DEFAULTS.get(key)
    if default is None:
        default = StoreConfig().to_properties().get(key)
    if default in ("true", "false"):
        _convert(bool, value, key)
    elif default is not None and default.lstrip("-").isdigit():
        _convert(int, value, key)


def _convert(kind: Any, value: str, key: str) -> Any:
    kind_name = kind if isinstance(kind, str) else kind.__name__
    text = value.strip()
    if kind_name == "bool":
        if text.lower() not in ("true", "false"):
            raise ValueError(f"broker.conf: {key}={value} is neither true nor false")
        return parse_bool(text)
    if kind_name == "int":
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"broker.conf: {key}={value} is not a number") from None
    return text


def _java_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
