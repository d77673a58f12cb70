"""Subscription groups: ``config/subscriptionGroup.json`` and auto-creation."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmqtx.broker.jsonfiles import EntryCache, JsonConfigFile
from rmqtx.broker.topics import DataVersion

if TYPE_CHECKING:
    from twisted.internet import defer

    from rmqtx.broker.config import BrokerConfig

SYSTEM_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_SYS_RMQ_TRANS",
)


def _coerce(kind: object, value: Any) -> Any:
    """A bean field as its declared type; raises TypeError/ValueError for values Java refuses."""
    if kind in (bool, "bool"):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if isinstance(value, int):
            return value != 0
        raise TypeError(f"cannot take {value!r} as a boolean")
    if kind in (int, "int"):
        if isinstance(value, (dict, list)) or value is None:
            raise TypeError(f"cannot take {value!r} as a number")
        number = int(value)
        if not -(2**63) <= number < 2**63:
            raise ValueError(f"{value!r} is out of range")
        return number
    if isinstance(value, (dict, list)):
        raise TypeError(f"cannot take {value!r} as a string")
    return "" if value is None else str(value)


#: Apache 5.x's fields of the bean (4.9.8 has none of them): kept when a client sends them, written back
#: as sent (in the bean's alphabetical order), never added to a group that came without them, so a 4.x
#: tool reads 4.9.8's bytes. ``dict``/``list`` values are JSON objects/arrays kept whole.
V5_FIELDS: dict[str, object] = {
    "attributes": dict, "consumeMessageOrderly": bool, "consumeTimeoutMinute": int, "groupRetryPolicy": dict,
    "groupSysFlag": int, "subscriptionDataSet": list,
}


def _coerce_v5(name: str, value: object) -> object:
    kind = V5_FIELDS[name]
    if kind in (dict, list):
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"cannot take {value!r} as {name}")
        return value
    return _coerce(kind, value)


@dataclass
class SubscriptionGroupConfig:
    """Field names and order as fastjson writes the Java bean (alphabetical); 5.x fields in ``v5``."""

    brokerId: int = 0
    consumeBroadcastEnable: bool = True
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    groupName: str = ""
    notifyConsumerIdsChangedEnable: bool = True
    retryMaxTimes: int = 16
    retryQueueNums: int = 1
    whichBrokerWhenConsumeSlowly: int = 1
    v5: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: dict) -> "SubscriptionGroupConfig":
        known = {f.name: _coerce(f.type, data[f.name]) for f in fields(cls) if f.name != "v5" and f.name in data}
        v5 = {k: _coerce_v5(k, data[k]) for k in V5_FIELDS if k in data and data[k] is not None}
        return cls(**known, v5=v5)

    def to_json(self) -> dict:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "v5"}
        if self.v5:
            out.update(self.v5)
            out = dict(sorted(out.items()))
        return out

    @property
    def consumeMessageOrderly(self) -> bool:
        """5.x: the group consumes in order (its POP and its gRPC consumers' settings are FIFO)."""
        return bool(self.v5.get("consumeMessageOrderly", False))

    @property
    def groupRetryPolicy(self) -> dict | None:
        """5.x: the retry backoff told to gRPC consumers ({"type": "EXPONENTIAL"|"CUSTOMIZED", ...})."""
        return self.v5.get("groupRetryPolicy")


class SubscriptionGroupManager:
    def __init__(self, config: BrokerConfig, store_root: str) -> None:
        self.config = config
        self.file = JsonConfigFile(Path(store_root) / "config" / "subscriptionGroup.json")
        self.table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(groupName=g) for g in SYSTEM_GROUPS}
        self.data_version = DataVersion()
        self._rendered = EntryCache(depth=1)  # subscriptionGroupTable sits one level in

    def load(self) -> None:
        data = self.file.load()
        if not data:
            return
        for name, raw in (data.get("subscriptionGroupTable") or {}).items():
            self.table[name] = SubscriptionGroupConfig.from_json(raw)
        version = data.get("dataVersion") or {}
        self.data_version = DataVersion(int(version.get("counter", 0)), int(version.get("timestamp", 0)) or None)

    def to_json(self) -> dict:
        return {
            "dataVersion": self.data_version.to_json(),
            "subscriptionGroupTable": {name: g.to_json() for name, g in self.table.items()},
        }

    def file_json(self) -> dict:
        """``to_json`` with each group rendered once per change (what ``persist`` writes)."""
        return {
            "dataVersion": self.data_version.to_json(),
            "subscriptionGroupTable": self._rendered.render(self.table, SubscriptionGroupConfig.to_json),
        }

    def persist(self) -> defer.Deferred[None]:
        """Write the file in a thread; changes in a burst share one write (rendered when it starts)."""
        return self.file.save_latest(self.file_json)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created when auto-creation is on (as Java does)."""
        found = self.table.get(group)
        if found is None and self.config.autoCreateSubscriptionGroup:
            found = self.put(SubscriptionGroupConfig(groupName=group))
        return found

    def put(self, group: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        self.table[group.groupName] = group
        self.data_version.next()
        self.persist()
        return group

    def put_all(self, groups: list[SubscriptionGroupConfig]) -> None:
        """Several groups at once (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST): one version bump, one write."""
        for group in groups:
            self.table[group.groupName] = group
        self.data_version.next()
        self.persist()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self.data_version.next()
        self.persist()
        return True
