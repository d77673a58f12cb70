"""The NameServer's request handlers, answering as Java's DefaultRequestProcessor (4.9.8) does."""

from __future__ import annotations

import zlib
from typing import Callable

from twisted.internet import defer
from twisted.logger import Logger

from rmqtx.common.properties import parse_properties
from rmqtx.namesrv.config import UPDATABLE_KEYS, NamesrvConfig
from rmqtx.namesrv.headers import RouteInfoRequestHeader
from rmqtx.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rmqtx.namesrv.register_body import BodyError, DataVersion, RegisterBrokerBody
from rmqtx.namesrv.route_info import RouteInfoManager
from rmqtx.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.codes import V4_9_4
from rmqtx.remoting.headers import (
    AddWritePermOfBrokerResponseHeader,
    BrokerIdentityRequestHeader,
    BrokerNameRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetTopicsByClusterRequestHeader,
    KVConfigKeyRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rmqtx.remoting.protocol import Dispatcher, RemotingProtocol

log = Logger(namespace="rmqtx.namesrv.processor")

FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_REMOTING_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException: "


def java_crc32(data: bytes) -> int:
    """Java's ``UtilAll.crc32``: CRC-32 with the sign bit cleared."""
    return zlib.crc32(data) & 0x7FFFFFFF


def _java_str(value: object) -> str:
    """String concatenation as Java does it: null prints as ``null``."""
    return "null" if value is None else str(value)


def _ok(request: RemotingCommand, body: bytes = b"") -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, body=body)


class NamesrvProcessor:
    """Binds the route tables, the KV config and the config to the request codes."""

    def __init__(self, config: NamesrvConfig, route_info: RouteInfoManager, kv_config: KVConfigManager) -> None:
        self.config = config
        self.route_info = route_info
        self.kv_config = kv_config

    def handlers(self) -> dict[int, Callable]:
        return {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.simple(self.route_info.system_topic_list_body),
            RequestCode.GET_UNIT_TOPIC_LIST: self.simple(self.route_info.unit_topics_body),
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.simple(self.route_info.has_unit_sub_topics_body),
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.simple(self.route_info.has_unit_sub_ununit_topics_body),
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
        }

    def install(self, dispatcher: Dispatcher) -> None:
        dispatcher.register_many(self.handlers())

    @staticmethod
    def simple(body: Callable[[], bytes]) -> Callable:
        def handler(request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
            return _ok(request, body())

        return handler

    # -- KV config -------------------------------------------------------------------------------
    def put_kv_config(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = PutKVConfigRequestHeader.from_command(request)
        d = self.kv_config.put(header.namespace, header.key, header.value)
        return d.addCallback(lambda _: _ok(request))

    def get_kv_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = KVConfigKeyRequestHeader.from_command(request)
        value = self.kv_config.get(header.namespace, header.key)
        if value is not None:
            return GetKVConfigResponseHeader(value).apply_to(_ok(request))
        response = request.make_response(
            ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace} Key: {header.key}"
        )
        return GetKVConfigResponseHeader().apply_to(response)

    def delete_kv_config(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred:
        header = KVConfigKeyRequestHeader.from_command(request)
        return self.kv_config.delete(header.namespace, header.key).addCallback(lambda _: _ok(request))

    def get_kv_list(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetKVListByNamespaceRequestHeader.from_command(request)
        body = self.kv_config.list_body(header.namespace)
        if body is not None:
            return _ok(request, body)
        return request.make_response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")

    # -- brokers ---------------------------------------------------------------------------------
    def register_broker(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_command(request)
        body = request.body or b""
        if header.bodyCrc32 != 0 and java_crc32(body) != header.bodyCrc32:
            log.warn("receive registerBroker request, crc32 not match, from {peer}", peer=conn.peer)
            return request.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if body:
            try:
                parsed = RegisterBrokerBody.decode(body, header.compressed)
            except BodyError as exc:
                log.warn("bad register body from {peer}: {exc}", peer=conn.peer, exc=exc)
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR, _REMOTING_EXCEPTION + "Failed to decode RegisterBrokerBody"
                )
        else:
            parsed = RegisterBrokerBody(DataVersion(0, 0), [], [])
        result = self.route_info.register_broker(
            header.clusterName,
            header.brokerAddr,
            header.brokerName,
            header.brokerId,
            header.haServerAddr,
            parsed.data_version,
            parsed.topic_configs,
            parsed.filter_server_list,
            conn,
        )
        response = _ok(request, self.kv_config.list_body(NAMESPACE_ORDER_TOPIC_CONFIG) or b"")
        return RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr).apply_to(response)

    def unregister_broker(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        # Java answers SUCCESS even for a broker it does not know; so do we (tables unchanged).
        header = BrokerIdentityRequestHeader.from_command(request)
        self.route_info.unregister_broker(header.clusterName, header.brokerAddr, header.brokerName, header.brokerId)
        return _ok(request)

    def query_data_version(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = BrokerIdentityRequestHeader.from_command(request)
        if not request.body:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "QUERY_DATA_VERSION without a DataVersion body")
        try:
            version = DataVersion.decode(request.body)
        except BodyError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad DataVersion body: {exc}")
        changed = self.route_info.is_broker_topic_config_changed(header.brokerAddr, version)
        if not changed:
            self.route_info.update_broker_info_update_timestamp(header.brokerAddr)
        ours = self.route_info.query_broker_topic_config(header.brokerAddr)
        response = _ok(request, ours.encode() if ours is not None else b"")
        return QueryDataVersionResponseHeader(changed).apply_to(response)

    def wipe_write_perm(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = BrokerNameRequestHeader.from_command(request)
        count = self.route_info.wipe_write_perm_of_broker(header.brokerName)
        log.info("wipe write perm of broker[{name}], client: {peer}, {n}", name=header.brokerName, peer=conn.peer, n=count)
        return WipeWritePermOfBrokerResponseHeader(count).apply_to(_ok(request))

    def add_write_perm(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = BrokerNameRequestHeader.from_command(request)
        count = self.route_info.add_write_perm_of_broker(header.brokerName)
        log.info("add write perm of broker[{name}], client: {peer}, {n}", name=header.brokerName, peer=conn.peer, n=count)
        return AddWritePermOfBrokerResponseHeader(count).apply_to(_ok(request))

    # -- topics ----------------------------------------------------------------------------------
    def get_route_info(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = RouteInfoRequestHeader.from_command(request)
        order_conf = None
        if self.config.orderMessageEnable and header.topic is not None:
            order_conf = self.kv_config.get(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
        standard = request.version >= V4_9_4 or bool(header.acceptStandardJsonOnly)
        body = self.route_info.topic_route_body(header.topic, standard, order_conf)
        if body is not None:
            return _ok(request, body)
        return request.make_response(
            ResponseCode.TOPIC_NOT_EXIST,
            f"No topic route info in name server for the topic: {_java_str(header.topic)}{FAQ_SUFFIX}",
        )

    def get_broker_cluster_info(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return _ok(request, self.route_info.cluster_info_body())

    def get_all_topic_list(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return _ok(request, self.route_info.all_topic_list_body())

    def delete_topic(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_command(request)
        self.route_info.delete_topic(header.topic, header.clusterName)
        return _ok(request)

    def get_topics_by_cluster(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetTopicsByClusterRequestHeader.from_command(request)
        return _ok(request, self.route_info.topics_by_cluster_body(header.cluster))

    # -- configuration ---------------------------------------------------------------------------
    def update_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Off unless enabled; then only :data:`UPDATABLE_KEYS` (never files, paths, commands)."""
        log.info("updateConfig called by {peer}", peer=conn.peer)
        if not self.config.enableUpdateNamesrvConfig:
            return request.make_response(
                ResponseCode.NO_PERMISSION, "Updating the name server config is disabled (enableUpdateNamesrvConfig=false)."
            )
        if not request.body:
            return _ok(request)
        try:
            props = parse_properties(request.body.decode("utf-8"))
        except UnicodeDecodeError:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        refused = sorted(k for k in props if k not in UPDATABLE_KEYS)
        if refused:
            log.warn("updateConfig from {peer} refused for keys {keys}", peer=conn.peer, keys=refused)
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"Can not update config in black list: {', '.join(refused)}"
            )
        try:
            self.config.apply(props)
        except ValueError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("name server config updated: {props}", props=props)
        return _ok(request)

    def get_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return _ok(request, self.config.format_properties().encode("utf-8"))
