"""The HA keys the broker itself acts on, as a frozen settings section of BrokerConfig.

The store's HA keys (heartbeat interval, transfer batch size, ...) stay in StoreConfig, which
parses them; this section takes the two the broker's role needs from it rather than reading the
strings again.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqtx.store.config import StoreConfig


@dataclass(frozen=True, slots=True)
class HASettings:
    #: haListenPort: 0 (unset) means listenPort + 1, as Java's BrokerStartup forces. Once a master's
    #: HA listener is bound, the broker replaces the section with the port it took (REGISTER_BROKER
    #: and GET_BROKER_CONFIG show that one).
    listen_port: int = 0
    #: haMasterAddress: a slave's fixed master, or None to learn it from the NameServer's answers.
    master_address: str | None = None

    @classmethod
    def from_store(cls, store: StoreConfig) -> "HASettings":
        return cls(max(store.ha_listen_port, 0), store.ha_master_address)
