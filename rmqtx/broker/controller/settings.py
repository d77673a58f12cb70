"""The broker keys of 5.x controller mode (Apache's BrokerConfig and MessageStoreConfig names and defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from rmqtx.common.properties import bool_setting, int_setting

KEYS = frozenset({
    "enableControllerMode", "controllerAddr", "fetchControllerAddrByDnsLookup", "syncBrokerMetadataPeriod",
    "checkSyncStateSetPeriod", "syncControllerMetadataPeriod", "controllerHeartBeatTimeoutMills",
    "brokerElectionPriority", "brokerHeartbeatInterval", "sendHeartbeatTimeoutMillis", "haMaxTimeSlaveNotCatchup",
    "inSyncReplicas", "minInSyncReplicas", "allAckInSyncStateSet", "syncFromLastFile", "asyncLearner",
    "storePathEpochFile", "storePathBrokerIdentity", "readUnCommitted",
})


@dataclass(frozen=True, slots=True)
class ControllerModeSettings:
    enabled: bool = False
    controller_addrs: tuple[str, ...] = ()
    sync_broker_metadata_period: int = 5000
    check_sync_state_set_period: int = 5000
    sync_controller_metadata_period: int = 10000
    heartbeat_timeout_ms: int = 10000  # controllerHeartBeatTimeoutMills: sent in each heartbeat
    election_priority: int = 2**31 - 1
    heartbeat_interval: int = 1000  # brokerHeartbeatInterval
    send_heartbeat_timeout: int = 1000  # sendHeartbeatTimeoutMillis
    ha_max_time_slave_not_catchup: int = 15000
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    all_ack_in_sync_state_set: bool = False
    sync_from_last_file: bool = False
    epoch_file: str = ""
    identity_file: str = ""
    #: readUnCommitted: dispatch to consume queues without waiting for the confirm offset
    read_uncommitted: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "ControllerModeSettings":
        """Raises ValueError for a value that does not parse, or controller mode without a controller address."""
        d = cls()
        enabled = bool_setting(props, "enableControllerMode", False)
        addrs = tuple(a.strip() for a in (props.get("controllerAddr") or "").split(";") if a.strip())
        if enabled and not addrs:
            raise ValueError("broker.conf: enableControllerMode=true needs controllerAddr (host:port, ';'-separated)")
        if bool_setting(props, "fetchControllerAddrByDnsLookup", False):
            raise ValueError("broker.conf: fetchControllerAddrByDnsLookup=true asks for controller addresses from DNS,"
                             " which rmqtx does not implement; remove the key to start")
        if bool_setting(props, "asyncLearner", False):
            raise ValueError("broker.conf: asyncLearner=true asks for an asynchronous learner replica, which rmqtx"
                             " does not implement; remove the key to start")
        return cls(
            enabled, addrs,
            int_setting(props, "syncBrokerMetadataPeriod", d.sync_broker_metadata_period),
            int_setting(props, "checkSyncStateSetPeriod", d.check_sync_state_set_period),
            int_setting(props, "syncControllerMetadataPeriod", d.sync_controller_metadata_period),
            int_setting(props, "controllerHeartBeatTimeoutMills", d.heartbeat_timeout_ms),
            int_setting(props, "brokerElectionPriority", d.election_priority),
            int_setting(props, "brokerHeartbeatInterval", d.heartbeat_interval),
            int_setting(props, "sendHeartbeatTimeoutMillis", d.send_heartbeat_timeout),
            int_setting(props, "haMaxTimeSlaveNotCatchup", d.ha_max_time_slave_not_catchup),
            int_setting(props, "inSyncReplicas", d.in_sync_replicas),
            int_setting(props, "minInSyncReplicas", d.min_in_sync_replicas),
            bool_setting(props, "allAckInSyncStateSet", False),
            bool_setting(props, "syncFromLastFile", False),
            (props.get("storePathEpochFile") or "").strip(),
            (props.get("storePathBrokerIdentity") or "").strip(),
            bool_setting(props, "readUnCommitted", False),
        )
