"""The 5.x controller's request and response headers, with Apache's field names in declared order.

Optional fields default to None so a header a broker leaves short decodes, and None fields stay
off the wire on the way out, as Java leaves null fields out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rmqtx.remoting.header import CommandHeader


@dataclass(slots=True)
class GetNextBrokerIdRequestHeader(CommandHeader):
    clusterName: Optional[str] = None
    brokerName: Optional[str] = None


@dataclass(slots=True)
class GetNextBrokerIdResponseHeader(CommandHeader):
    clusterName: Optional[str] = None
    brokerName: Optional[str] = None
    nextBrokerId: Optional[int] = None


@dataclass(slots=True)
class ApplyBrokerIdRequestHeader(CommandHeader):
    clusterName: Optional[str] = None
    brokerName: Optional[str] = None
    appliedBrokerId: Optional[int] = None
    registerCheckCode: Optional[str] = None


@dataclass(slots=True)
class ApplyBrokerIdResponseHeader(CommandHeader):
    clusterName: Optional[str] = None
    brokerName: Optional[str] = None


@dataclass(slots=True)
class RegisterBrokerToControllerRequestHeader(CommandHeader):
    clusterName: Optional[str] = None
    brokerName: Optional[str] = None
    brokerId: Optional[int] = None
    brokerAddress: Optional[str] = None
    invokeTime: Optional[int] = None


@dataclass(slots=True)
class RegisterBrokerToControllerResponseHeader(CommandHeader):
    clusterName: Optional[str] = None
    brokerName: Optional[str] = None
    masterBrokerId: Optional[int] = None
    masterAddress: Optional[str] = None
    masterEpoch: Optional[int] = None
    syncStateSetEpoch: Optional[int] = None


@dataclass(slots=True)
class ElectMasterRequestHeader(CommandHeader):
    clusterName: Optional[str] = ""
    brokerName: Optional[str] = ""
    brokerId: Optional[int] = -1
    designateElect: Optional[bool] = False
    invokeTime: Optional[int] = None


@dataclass(slots=True)
class ElectMasterResponseHeader(CommandHeader):
    masterBrokerId: Optional[int] = None
    masterAddress: Optional[str] = None
    masterEpoch: Optional[int] = None
    syncStateSetEpoch: Optional[int] = None


@dataclass(slots=True)
class AlterSyncStateSetRequestHeader(CommandHeader):
    brokerName: Optional[str] = None
    masterBrokerId: Optional[int] = None
    masterEpoch: Optional[int] = None
    invokeTime: Optional[int] = None


@dataclass(slots=True)
class AlterSyncStateSetResponseHeader(CommandHeader):
    newSyncStateSetEpoch: Optional[int] = None


@dataclass(slots=True)
class GetReplicaInfoRequestHeader(CommandHeader):
    brokerName: Optional[str] = None


@dataclass(slots=True)
class GetReplicaInfoResponseHeader(CommandHeader):
    masterBrokerId: Optional[int] = None
    masterAddress: Optional[str] = None
    masterEpoch: Optional[int] = None


@dataclass(slots=True)
class GetMetaDataResponseHeader(CommandHeader):
    group: Optional[str] = None
    controllerLeaderId: Optional[str] = None
    controllerLeaderAddress: Optional[str] = None
    isLeader: Optional[bool] = False
    peers: Optional[str] = None


@dataclass(slots=True)
class BrokerHeartbeatRequestHeader(CommandHeader):
    clusterName: str
    brokerAddr: str
    brokerName: str
    brokerId: Optional[int] = None
    epoch: Optional[int] = None
    maxOffset: Optional[int] = None
    confirmOffset: Optional[int] = None
    heartbeatTimeoutMills: Optional[int] = None
    electionPriority: Optional[int] = None


@dataclass(slots=True)
class CleanControllerBrokerDataRequestHeader(CommandHeader):
    clusterName: Optional[str] = None
    brokerName: Optional[str] = None
    brokerControllerIdsToClean: Optional[str] = None
    isCleanLivingBroker: Optional[bool] = False
    invokeTime: Optional[int] = None


@dataclass(slots=True)
class NotifyBrokerRoleChangedRequestHeader(CommandHeader):
    masterAddress: Optional[str] = None
    masterEpoch: Optional[int] = None
    syncStateSetEpoch: Optional[int] = None
    masterBrokerId: Optional[int] = None
