"""NamesrvConfig: the NameServer's settings under RocketMQ's property names."""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from typing import Any

from twisted.logger import Logger

from rmqtx.common import unimplemented

log = Logger(namespace="rmqtx.namesrv.config")

#: Keys UPDATE_NAMESRV_CONFIG may change at run time (when enabled at all). Nothing that names a
#: file, a path, a command or the listener may be changed remotely (CVE-2023-37582).
UPDATABLE_KEYS = frozenset({"orderMessageEnable", "clusterTest", "productEnvName"})


def _parse_bool(text: str) -> bool:
    return text.strip().lower() == "true"


@dataclass
class NamesrvConfig:
    """Settings of one NameServer; field names are RocketMQ's property keys."""

    listenAddress: str = "0.0.0.0"
    listenPort: int = 9876
    rocketmqHome: str | None = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME"))
    kvConfigPath: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv", "kvConfig.json"))
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    #: How often the liveness scan runs (Java 4.9: every 10 s).
    scanNotActiveBrokerInterval: int = 10_000
    #: A broker silent for longer than this is dropped (Java: 2 minutes).
    brokerChannelExpiredTime: int = 120_000
    #: Connections silent this long are closed (Java's serverChannelMaxIdleTimeSeconds).
    serverChannelMaxIdleTimeSeconds: int = 120
    #: UPDATE_NAMESRV_CONFIG is refused unless the operator turns this on.
    enableUpdateNamesrvConfig: bool = False
    #: A controller in the same process (launcher.make_namesrv adds it; its keys are Apache's ControllerConfig's).
    enableControllerInNamesrv: bool = False
    #: The ``tls.*`` keys (Java's TLS property names; see rmqtx.remoting.tls), kept as given.
    tls: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "NamesrvConfig":
        """Build from ``key=value`` properties; unknown keys are logged and ignored."""
        unimplemented.refuse(props, unimplemented.NAMESRV, "namesrv.conf")
        config = cls()
        config.apply(props, log_unknown=True)
        return config

    def apply(self, props: dict[str, str], log_unknown: bool = False) -> list[str]:
        """Set the known keys of ``props``; returns the keys that were not known."""
        types = {f.name: f.type for f in dataclasses.fields(self)}
        unknown = []
        for key, raw in props.items():
            if key.startswith("tls."):
                self.tls[key] = raw
                continue
            kind = types.get(key)
            if kind is None:
                unknown.append(key)
                if log_unknown:
                    hint = difflib.get_close_matches(key, sorted(types), n=1, cutoff=0.6)
                    log.warn("unknown name server property {key} ignored{hint}", key=key,
                             hint=f" (did you mean {hint[0]}?)" if hint else "")
                continue
            setattr(self, key, _convert(str(kind), raw, key))
        return unknown

    def to_properties(self) -> dict[str, str]:
        """Every setting as Java would print it (booleans lower case, null as empty)."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name == "tls":
                continue
            value: Any = getattr(self, f.name)
            if isinstance(value, bool):
                value = "true" if value else "false"
            out[f.name] = "" if value is None else str(value)
        return out

    def format_properties(self) -> str:
        """GET_NAMESRV_CONFIG body: ``key=value`` lines."""
        return "".join(f"{k}={v}\n" for k, v in sorted(self.to_properties().items()))


def _convert(kind: str, raw: str, key: str) -> Any:
    raw = raw.strip()
    if kind.startswith("bool"):
        return _parse_bool(raw)
    if kind.startswith("int"):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"property {key}: not an integer: {raw!r}") from None
    return raw


