"""ControllerConfig: a controller's settings under Apache 5.x's ControllerConfig key names."""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from typing import Any

from twisted.logger import Logger

log = Logger(namespace="rmqtx.controller.config")

#: Keys Apache accepts that ask for something rmqtx's controller does not do: start-up stops on them
#: unless they hold the value rmqtx does honour.
REFUSED: dict[str, tuple[str, str]] = {
    "controllerType": ("DLedger", "a JRaft controller (rmqtx replicates with pysyncobj, peers given as controllerDLegerPeers)"),
    "isProcessReadEvent": ("false", "reads through the Raft log (rmqtx answers reads from the leader's applied state)"),
    "metricsExporterType": ("DISABLE", "controller metrics exporters"),
}

#: Keys of Apache's ControllerConfig that only tune Java's own machinery: accepted and ignored.
JAVA_ONLY = frozenset({
    "controllerThreadPoolNums", "controllerRequestThreadPoolQueueCapacity", "mappedFileSize",
    "metricsGrpcExporterTarget", "metricsGrpcExporterHeader", "metricGrpcExporterTimeOutInMills",
    "metricGrpcExporterIntervalInMills", "metricLoggingExporterIntervalInMills", "metricsPromExporterPort",
    "metricsPromExporterHost", "metricsLabel", "metricsInDelta", "configBlackList", "rocketmqHome",
    "jRaftGroupId", "jRaftServerId", "jRaftAddress", "jRaftInitConf", "jRaftControllerRPCAddr",
    "jRaftElectionTimeoutMs", "jRaftSnapshotIntervalSecs",
})


def _parse_bool(text: str) -> bool:
    return text.strip().lower() == "true"


@dataclass
class ControllerConfig:
    """Settings of one controller node; field names are Apache's property keys."""

    controllerDLegerGroup: str = ""
    #: ``n0-127.0.0.1:9877;n1-127.0.0.1:9878``: each node's id and the address brokers reach it on.
    controllerDLegerPeers: str = ""
    controllerDLegerSelfId: str = ""
    controllerStorePath: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "DledgerController"))
    #: Unused while the peers name the address (Apache's DLedger controller listens on its peer address too).
    listenPort: int = 9878
    #: How often silent brokers are looked for (ms).
    scanNotActiveBrokerInterval: int = 5_000
    #: How often broker sets whose master went silent are looked for (ms).
    scanInactiveMasterInterval: int = 5_000
    electMasterMaxRetryCount: int = 3
    enableElectUncleanMaster: bool = False
    notifyBrokerRoleChanged: bool = True
    controllerType: str = "DLedger"
    isProcessReadEvent: bool = False
    metricsExporterType: str = "DISABLE"
    #: rmqtx only: the port offset of each node's pysyncobj (Raft) listener from its peer address.
    controllerRaftPortOffset: int = 1

    @classmethod
    def from_properties(cls, props: dict[str, str], file: str = "controller.conf") -> "ControllerConfig":
        """Build from ``key=value`` properties; refuses what it cannot honour, in one line naming ``file``."""
        for key, (honoured, what) in REFUSED.items():
            if key in props and props[key].strip().lower() != honoured.lower():
                raise ValueError(f"{file}: {key}={props[key].strip()} asks for {what}, which rmqtx does not implement")
        config = cls()
        types = {f.name: f.type for f in dataclasses.fields(config)}
        for key, raw in props.items():
            kind = types.get(key)
            if kind is None:
                if key not in JAVA_ONLY:
                    hint = difflib.get_close_matches(key, sorted(types), n=1, cutoff=0.6)
                    log.warn("unknown controller property {key} ignored{hint}", key=key,
                             hint=f" (did you mean {hint[0]}?)" if hint else "")
                continue
            setattr(config, key, _convert(str(kind), raw, f"{file}: {key}"))
        try:
            config.peers()  # malformed peers stop start-up here
        except ValueError as e:
            raise ValueError(f"{file}: {e}") from None
        return config

    def peers(self) -> dict[str, tuple[str, int]]:
        """``controllerDLegerPeers`` as id -> (host, port), in the order given."""
        out: dict[str, tuple[str, int]] = {}
        if not self.controllerDLegerPeers.strip():
            raise ValueError("controllerDLegerPeers is empty (n0-127.0.0.1:9877;n1-...)")
        for item in self.controllerDLegerPeers.split(";"):
            item = item.strip()
            if not item:
                continue
            node, sep, addr = item.partition("-")
            host, colon, port = addr.rpartition(":")
            if not sep or not colon or not port.isdigit() or not node:
                raise ValueError(f"controllerDLegerPeers entry {item!r} is not id-host:port")
            out[node] = (host, int(port))
        if not self.controllerDLegerSelfId or self.controllerDLegerSelfId not in out:
            raise ValueError(f"controllerDLegerSelfId {self.controllerDLegerSelfId!r} is not one of "
                             f"controllerDLegerPeers ({', '.join(out)})")
        return out

    def raft_address(self, node: str) -> str:
        host, port = self.peers()[node]
        return f"{host}:{port + self.controllerRaftPortOffset}"

    def format_properties(self) -> str:
        """GET_CONTROLLER_CONFIG body: ``key=value`` lines."""
        lines = []
        for f in sorted(dataclasses.fields(self), key=lambda f: f.name):
            value: Any = getattr(self, f.name)
            if isinstance(value, bool):
                value = "true" if value else "false"
            lines.append(f"{f.name}={value}\n")
        return "".join(lines)


def _convert(kind: str, raw: str, key: str) -> Any:
    raw = raw.strip()
    if kind.startswith("bool"):
        return _parse_bool(raw)
    if kind.startswith("int"):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{key}: not an integer: {raw!r}") from None
    return raw
