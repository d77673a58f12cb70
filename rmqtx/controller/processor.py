"""The controller's request handlers, answering as Apache 5.x's ControllerRequestProcessor does."""

from __future__ import annotations

from typing import Callable, Protocol

from twisted.internet import defer

from rmqtx.common.fastjson import FastjsonError, loads
from rmqtx.common.properties import parse_properties
from rmqtx.remoting import controller_headers as h
from rmqtx.controller.config import ControllerConfig
from rmqtx.controller.heartbeat import HeartbeatTable
from rmqtx.controller.replicas import ReplicasInfo, Result
from rmqtx.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.bodies import BodyError
from rmqtx.remoting.header import HeaderError
from rmqtx.remoting.protocol import Dispatcher, RemotingProtocol

#: Keys UPDATE_CONTROLLER_CONFIG may change: only what tunes elections, nothing naming a path, a peer or a port.
UPDATABLE_KEYS = frozenset({"notifyBrokerRoleChanged", "enableElectUncleanMaster", "electMasterMaxRetryCount"})


def respond(request: RemotingCommand, result: Result) -> RemotingCommand:
    """A Result as Java's createResponseCommandWithHeader + setBody + setRemark builds it."""
    response = request.make_response(result.code, result.remark, body=result.body or b"")
    if result.header is not None:
        result.header.apply_to(response)
    return response


class Node(Protocol):
    """What the handlers need of the node (rmqtx.controller.service.ControllerService)."""

    config: ControllerConfig
    heartbeats: HeartbeatTable

    def run(self, check: Callable[[ReplicasInfo], Result]) -> "defer.Deferred[Result]": ...

    def elect(self, header: h.ElectMasterRequestHeader) -> "defer.Deferred[Result]": ...

    def metadata(self) -> h.GetMetaDataResponseHeader: ...


class ControllerProcessor:
    def __init__(self, service: Node) -> None:
        self.service = service

    def install(self, dispatcher: Dispatcher) -> None:
        dispatcher.register_many({
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata,
            RequestCode.BROKER_HEARTBEAT: self.heartbeat,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_config,
            RequestCode.GET_CONTROLLER_CONFIG: self.get_config,
            RequestCode.CLEAN_BROKER_DATA: self.clean_broker_data,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
        })

    def _run(self, request: RemotingCommand, check: Callable[[ReplicasInfo], Result]) -> "defer.Deferred[RemotingCommand]":
        return self.service.run(check).addCallback(lambda result: respond(request, result))

    def alter_sync_state_set(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = h.AlterSyncStateSetRequestHeader.from_command(request)
        body = _json(request.body) if request.body else {}
        if not isinstance(body, dict):
            raise BodyError("a SyncStateSet body is a JSON object")
        new_set = [int(x) for x in body.get("syncStateSet") or []]
        epoch = int(body.get("syncStateSetEpoch") or 0)
        alive = self.service.heartbeats.is_alive
        return self._run(request, lambda s: s.alter_sync_state_set(header, new_set, epoch, alive))

    def elect_master(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = h.ElectMasterRequestHeader.from_command(request)
        return self.service.elect(header).addCallback(lambda result: respond(request, result))

    def get_replica_info(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = h.GetReplicaInfoRequestHeader.from_command(request)
        return self._run(request, lambda s: s.replica_info(header))

    def get_metadata(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return respond(request, Result(self.service.metadata()))

    def heartbeat(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = h.BrokerHeartbeatRequestHeader.from_command(request)
        if header.brokerId is None:
            return request.make_response(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        self.service.heartbeats.on_heartbeat(header, conn)
        return request.make_response(ResponseCode.SUCCESS, "Heart beat success")

    def get_sync_state_data(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred | RemotingCommand:
        names = _json(request.body) if request.body else None
        if not isinstance(names, list) or not names:
            return request.make_response(ResponseCode.SUCCESS)
        alive = self.service.heartbeats.is_alive
        return self._run(request, lambda s: s.sync_state_data([str(n) for n in names], alive))

    def clean_broker_data(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = h.CleanControllerBrokerDataRequestHeader.from_command(request)
        if header.brokerName is None:
            raise HeaderError("the custom field <brokerName> is null")
        alive = self.service.heartbeats.is_alive
        return self._run(request, lambda s: s.clean_broker_data(header, alive))

    def get_next_broker_id(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = h.GetNextBrokerIdRequestHeader.from_command(request)
        return self._run(request, lambda s: s.next_broker_id(header))

    def apply_broker_id(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = h.ApplyBrokerIdRequestHeader.from_command(request)
        return self._run(request, lambda s: s.apply_broker_id(header))

    def register_broker(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = h.RegisterBrokerToControllerRequestHeader.from_command(request)
        alive = self.service.heartbeats.is_alive
        return self._run(request, lambda s: s.register_broker(header, alive))

    def get_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self.service.config.format_properties().encode())

    def update_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        if not request.body:
            return request.make_response(ResponseCode.SUCCESS)
        try:
            props = parse_properties(request.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"string2Properties error {e}")
        refused = sorted(set(props) - UPDATABLE_KEYS)
        if refused:
            return request.make_response(ResponseCode.NO_PERMISSION, f"Can not update config in black list: {', '.join(refused)}")
        config = self.service.config
        for key, raw in props.items():
            if key == "electMasterMaxRetryCount":
                if not raw.strip().lstrip("-").isdigit():
                    return request.make_response(ResponseCode.SYSTEM_ERROR, f"{key}: not an integer: {raw!r}")
                config.electMasterMaxRetryCount = int(raw)
            else:
                setattr(config, key, raw.strip().lower() == "true")
        return request.make_response(ResponseCode.SUCCESS)


def _json(body: bytes) -> object:
    try:
        return loads(body)
    except FastjsonError as e:
        raise BodyError(f"bad JSON body: {e}") from None
