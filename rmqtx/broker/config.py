"""Broker configuration from a ``broker.conf`` with RocketMQ's key names.

``BrokerConfig.from_properties`` reads the file's strings once, at start: the broker's own keys become
typed fields, and every other part's keys become a typed, frozen section beside them (``store``, ``ha``,
``grpc``, ``console``, ``tls``, ``pop``, ``timer``, ``switches``). A value that does not parse stops
start-up there, in one line. Nothing re-reads the strings later; ``properties`` keeps them, read-only,
only for GET_BROKER_CONFIG's listing.

The config is frozen to plain assignment. ``update`` is the one place that changes it while the broker
runs (UPDATE_BROKER_CONFIG's ``RUNTIME_KEYS``, the port an ephemeral listen took, the HA port a master
bound); each change replaces a whole value, so a part holding a section keeps a consistent one.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from twisted.logger import Logger

from rmqtx.broker.console_settings import METRICS_KEYS, ConsoleConfig
from rmqtx.broker.controller.settings import KEYS as CONTROLLER_MODE_KEYS
from rmqtx.broker.controller.settings import ControllerModeSettings
from rmqtx.broker.grpc_settings import KEYS as GRPC_SETTING_KEYS
from rmqtx.broker.grpc_settings import GrpcSettings
from rmqtx.broker.ha.settings import HASettings
from rmqtx.broker.pop.settings import PopSettings
from rmqtx.common import unimplemented
from rmqtx.common.properties import bool_setting, parse_bool
from rmqtx.remoting.tls import TlsSettings
from rmqtx.store.config import OWN_KEYS as STORE_OWN_KEYS
from rmqtx.store.config import StoreConfig
from rmqtx.store.timer import KEYS as TIMER_KEYS
from rmqtx.store.timer import TimerConfig

log = Logger(namespace="rmqtx.broker.config")

#: Keys the store section (StoreConfig, TimerConfig) parses.
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
) | TIMER_KEYS | STORE_OWN_KEYS

#: Keys rmqtx adds: the gRPC endpoint of rmqtx.grpc (off unless grpcPort is set).
GRPC_KEYS = GRPC_SETTING_KEYS  # grpcPort, grpcListenAddress and Apache's proxy limits (rmqtx.broker.grpc_settings)
#: Apache 5.x's topic message-type switches: the broker's ``enableMixedMessageType`` (may a topic be MIXED),
#: the proxy's ``enableTopicMessageTypeCheck`` (the gRPC endpoint's check of a send against its topic).
MESSAGE_TYPE_KEYS = frozenset({"enableMixedMessageType", "enableTopicMessageTypeCheck"})
#: rmqtx's web console keys (the ``console`` section, rmqtx.broker.console_settings.ConsoleConfig).
CONSOLE_KEYS = frozenset({"consolePort", "consoleListenAddress", "consoleAdminEnable"})
#: Java 5.3's recall switches (the ``switches`` section).
RECALL_KEYS = frozenset({"recallMessageEnable", "allowRecallWhenBrokerNotWriteable"})
#: rmqtx's own keys and Java keys that GET_BROKER_CONFIG leaves out while unset.
EXTRA_KEYS = frozenset({"enableUpdateBrokerConfig", "litePullMessageEnable", "haMasterAddress", "mapedFileSizeCommitLog",
                        "mapedFileSizeConsumeQueue", "brokerConfigPath"}) | CONSOLE_KEYS | GRPC_KEYS | RECALL_KEYS | METRICS_KEYS \
    | MESSAGE_TYPE_KEYS | CONTROLLER_MODE_KEYS
#: The broker fields UPDATE_BROKER_CONFIG may change: each is read on every use, so a change is both
#: safe and effective at once.
RUNTIME_KEYS = frozenset(
    {
        "brokerPermission",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "defaultTopicQueueNums",
        "longPollingEnable",
        "shortPollingTimeMills",
        "rejectTransactionMessage",
        "traceOn",
        "enablePropertyFilter",
        "forceRegister",
        "regionId",
    }
)
#: What ``BrokerConfig.update`` may replace: those, the port an ephemeral listen took, the HA section.
_UPDATABLE = RUNTIME_KEYS | {"listenPort", "ha", "brokerId", "brokerRole"}  # the last two: controller-mode role switches


@dataclass(frozen=True, slots=True)
class BrokerSwitches:
    """5.x switches that 4.9.8's GET_BROKER_CONFIG does not list unless broker.conf sets them."""

    lite_pull_message_enable: bool = True  # litePullMessageEnable
    recall_message_enable: bool = False  # recallMessageEnable
    allow_recall_when_broker_not_writeable: bool = True  # allowRecallWhenBrokerNotWriteable
    enable_update_broker_config: bool = False  # enableUpdateBrokerConfig (rmqtx: UPDATE_BROKER_CONFIG is off)
    enable_mixed_message_type: bool = False  # enableMixedMessageType (Apache 5.x: may a topic be created MIXED)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "BrokerSwitches":
        return cls(bool_setting(props, "litePullMessageEnable", True), bool_setting(props, "recallMessageEnable", False),
                   bool_setting(props, "allowRecallWhenBrokerNotWriteable", True),
                   bool_setting(props, "enableUpdateBrokerConfig", False),
                   bool_setting(props, "enableMixedMessageType", False))


def _section(**kwargs: Any) -> Any:
    """A settings section: built from the fields and ``properties`` after init, never a constructor argument."""
    return field(init=False, repr=False, compare=False, metadata={"section": True}, **kwargs)


@dataclass(frozen=True, eq=False)
class BrokerConfig:
    """What the broker itself reads (field names are RocketMQ's keys) and every part's settings section."""

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
    #: Everything read from the file, as given (read-only): the sections' source and GET_BROKER_CONFIG's listing.
    properties: Mapping[str, str] = field(default_factory=dict)

    store: StoreConfig = _section()
    ha: HASettings = _section()
    grpc: GrpcSettings = _section()
    console: ConsoleConfig = _section()
    tls: TlsSettings = _section()
    pop: PopSettings = _section()
    timer: TimerConfig = _section()
    switches: BrokerSwitches = _section()
    controller: ControllerModeSettings = _section()

    def __post_init__(self) -> None:
        """Check the role and parse each section; a value that does not parse raises ValueError."""
        role = self.brokerRole.strip().upper()
        if role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"broker.conf: brokerRole={self.brokerRole!r} is not ASYNC_MASTER, SYNC_MASTER or SLAVE")
        if role == "SLAVE" and self.brokerId <= 0:
            raise ValueError("Slave's brokerId must be > 0")
        init = object.__setattr__  # frozen: the one-time set-up of derived values
        init(self, "brokerRole", role)
        if role != "SLAVE":
            init(self, "brokerId", 0)
        props = MappingProxyType(dict(self.properties))
        init(self, "properties", props)
        store = StoreConfig.from_properties(self.store_properties())
        init(self, "store", store)
        init(self, "ha", HASettings.from_store(store))
        init(self, "grpc", GrpcSettings.from_properties(props))
        init(self, "console", ConsoleConfig.from_properties(props))
        init(self, "tls", TlsSettings.from_properties(props))
        init(self, "pop", PopSettings.from_properties(props))
        init(self, "timer", TimerConfig.from_properties(props))
        init(self, "switches", BrokerSwitches.from_properties(props))
        init(self, "controller", ControllerModeSettings.from_properties(props))

    def update(self, **changes: Any) -> None:
        """The one run-time write: replace broker fields in ``RUNTIME_KEYS``, ``listenPort`` (the port an
        ephemeral listen took), the ``ha`` section (the port a master's HA listener bound), or, in controller
        mode, ``brokerId`` and ``brokerRole`` (the role the controller gave).

        Whole values are replaced, never changed in place; any other name raises AttributeError.
        """
        for name in changes:
            if name not in _UPDATABLE:
                raise AttributeError(f"{name} does not change while the broker runs")
        for name, value in changes.items():
            object.__setattr__(self, name, value)

    def list_setting(self, key: str, text: str, *, replace: bool = True) -> None:
        """Show ``key=text`` in GET_BROKER_CONFIG's listing (where the file had it, else last), as Java's
        broker lists a value it found at run time; ``replace=False`` leaves a value the file gave."""
        if replace or key not in self.properties:
            object.__setattr__(self, "properties", MappingProxyType({**self.properties, key: text}))

    @property
    def broker_addr(self) -> str:
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def ha_listen_port(self) -> int:
        """haListenPort when broker.conf sets it (an rmqtx extension), else listenPort + 1 as Java forces."""
        return self.ha.listen_port or self.listenPort + 1

    @property
    def ha_server_addr(self) -> str:
        return f"{self.brokerIP2 or self.brokerIP1}:{self.ha_listen_port}"

    @property
    def is_slave(self) -> bool:
        return self.brokerRole.strip().upper() == "SLAVE"

    def check_role(self) -> None:
        """Java's BrokerStartup: masters are brokerId 0, a slave needs a brokerId above 0. Checked (and the
        role normalised) when the config is made; this says it again for callers that ask."""
        if self.brokerRole not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE") or (self.is_slave and self.brokerId <= 0):
            raise ValueError(f"broker.conf: brokerRole={self.brokerRole!r} with brokerId={self.brokerId}")

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrvAddr.split(";") if a.strip()]

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "BrokerConfig":
        """Build from ``key=value`` pairs; a value that does not parse raises ValueError.

        A key no RocketMQ broker knows is warned about (with the closest known key) and dropped, so
        GET_BROKER_CONFIG never shows it as a setting. Java keys rmqtx has no use for are kept.
        """
        unimplemented.refuse(props, unimplemented.BROKER, "broker.conf")
        kinds = {f.name: f.type for f in _setting_fields()}
        known = known_keys()
        kept: dict[str, str] = {}
        values: dict[str, Any] = {}
        for key, value in props.items():
            if key in kinds:
                values[key] = _convert(kinds[key], value, key)
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
        return cls(properties=kept, **values)

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
        out = {f.name: _java_text(getattr(self, f.name)) for f in _setting_fields()}
        for key, value in self.properties.items():
            if not key.startswith("tls."):  # Java keeps TLS settings (key passwords) out of the broker config
                out.setdefault(key, value)
        return out


def known_keys() -> frozenset[str]:
    """Every key a broker.conf may set: Java 4.9.8's broker, store and netty settings, and rmqtx's own."""
    global _KNOWN
    if _KNOWN is None:
        from rmqtx.broker.java_settings import java_defaults

        fields = {f.name for f in _setting_fields()}
        _KNOWN = frozenset(fields | STORE_KEYS | EXTRA_KEYS | set(java_defaults(10911))
                           | set(StoreConfig().to_properties()) | {f.name for f in dataclasses.fields(PopSettings)}
                           | unimplemented.BROKER_COMPANION_KEYS)
    return _KNOWN


_KNOWN: frozenset[str] | None = None


def check_value(key: str, value: str) -> None:
    """Refuse a value Java's default says is a boolean or a number when it is neither."""
    from rmqtx.broker.java_settings import FIXED_DEFAULTS

    default = "false" if key in MESSAGE_TYPE_KEYS else FIXED_DEFAULTS.get(key)
    if default is None:
        default = StoreConfig().to_properties().get(key)
    if default in ("true", "false"):
        _convert(bool, value, key)
    elif default is not None and default.lstrip("-").isdigit():
        _convert(int, value, key)


def _setting_fields() -> list[dataclasses.Field]:
    """BrokerConfig's own keys: its fields but the sections and the listing."""
    return [f for f in dataclasses.fields(BrokerConfig) if f.init and f.name != "properties"]


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
