"""Security and durability settings rmqtx does not implement: start-up stops on them.

A broker that ignored ``enableDLegerCommitLog=true`` would not replicate as its operator believes. So a key below that asks for such a feature ends start-up with one line naming it. The same keys at
their defaults (feature off) are accepted, as Apache's brokers accept them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping


def _true(value: str) -> bool:
    return value.strip().lower() == "true"


def _above(limit: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        text = value.strip()
        return text.lstrip("-").isdigit() and int(text) > limit

    return check


def _not(*allowed: str) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return value.strip() not in allowed

    return check


@dataclass(frozen=True)
class Unimplemented:
    """A key whose value asks for something rmqtx lacks."""

    key: str
    asks: Callable[[str], bool]
    what: str


#: Broker keys (Apache 5.3-5.5's BrokerConfig, AuthConfig and MessageStoreConfig).
BROKER: tuple[Unimplemented, ...] = (
    Unimplemented("enableSlaveActingMaster", _true, "slave-acting-master mode"),
    Unimplemented("enableAutoInSyncReplicas", _true, "automatic in-sync replicas"),
    Unimplemented("inSyncReplicas", _above(2), "a SYNC_MASTER waiting for more than one slave"),
    Unimplemented("haFlowControlEnable", _true, "HA transfer flow control (maxHaTransferByteInSecond)"),
    Unimplemented("enableDLegerCommitLog", _true, "DLedger commit log mode"),
    Unimplemented("storeType", _not("default", "defaultRocksDB"),
                  "a store other than the file store or RocksDB consume queues (storeType=default or defaultRocksDB)"),
    Unimplemented("timerUseRocksDB", _true, "the RocksDB timer store (timer messages are kept in the timer wheel's files)"),
)

#: NameServer keys (Apache 5.x's NamesrvConfig).
NAMESRV: tuple[Unimplemented, ...] = ()  # enableControllerInNamesrv is honoured: the launcher embeds rmqtx.controller

#: The other Apache 5.x keys of the same features: harmless while the features above are off.
BROKER_COMPANION_KEYS = frozenset(
    {
        "authenticationEnabled", "authorizationEnabled", "migrateAuthFromV1Enabled",  # ACL 2.0: rmqtx.acl2.settings
        "authConfigPath", "authenticationProvider", "authenticationMetadataProvider", "authenticationStrategy",
        "authenticationWhitelist", "initAuthenticationUser", "innerClientAuthenticationCredentials",
        "authorizationProvider", "authorizationMetadataProvider", "authorizationStrategy", "authorizationWhitelist",
        "userCacheMaxNum", "userCacheExpiredSecond", "userCacheRefreshSecond", "aclCacheMaxNum",
        "aclCacheExpiredSecond", "aclCacheRefreshSecond", "statefulAuthenticationCacheMaxNum",
        "statefulAuthenticationCacheExpiredSecond", "statefulAuthorizationCacheMaxNum",
        "statefulAuthorizationCacheExpiredSecond", "controllerAddr", "totalReplicas",
    }
) | frozenset(u.key for u in BROKER)


def refuse(props: Mapping[str, str], keys: Iterable[Unimplemented], file: str) -> None:
    """Raise ValueError naming the first key of ``props`` that asks for what rmqtx lacks."""
    for item in keys:
        value = props.get(item.key)
        if value is not None and item.asks(value):
            raise ValueError(f"{file}: {item.key}={value.strip()} asks for {item.what}, which rmqtx does not implement;"
                             f" remove the key to start")
