"""Small admin helpers: routes, topic creation, messages by offset id, key or UNIQ_KEY."""

from __future__ import annotations

from typing import Any

from rmqtx.client.config import ClientConfig
from rmqtx.client.errors import NO_CODE, MQBrokerError, MQClientError
from rmqtx.client.message import MessageExt, decode_messages
from rmqtx.client.mq_client import MQClientInstance
from rmqtx.client.msgid import nearly_time_from_id
from rmqtx.client.route import MASTER_ID, TopicRoute
from rmqtx.client.util import deferred
from rmqtx.common import fastjson
from rmqtx.common.topics import DEFAULT_TOPIC
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import (
    CreateTopicRequestHeader,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
)
from rmqtx.store.record import decode_offset_msg_id

LONG_MAX = 2**63 - 1
QUERY_TIMEOUT = 10.0


class MQAdmin:
    """Admin calls over a private client instance (no heartbeats, no group)."""

    def __init__(
        self,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        reactor: Any = None,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        config = ClientConfig.resolve(namesrv_addr, config, access_key, secret_key)
        self.client = MQClientInstance(config, reactor)

    @deferred
    async def close(self) -> None:
        await self.client.remoting.close()

    @deferred
    async def route(self, topic: str) -> TopicRoute:
        """GET_ROUTEINFO_BY_TOPIC; an unknown topic raises MQClientError code 17."""
        return await self.client.fetch_route(topic)

    @deferred
    async def cluster_masters(self, cluster: str) -> dict[str, str]:
        """broker name -> master address for ``cluster`` (GET_BROKER_CLUSTER_INFO)."""
        response = await self.client.call_namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        info = fastjson.loads(response.body)
        names = info.get("clusterAddrTable", {}).get(cluster) or []
        table = info.get("brokerAddrTable", {})
        masters = {}
        for name in names:
            addrs = {int(k): v for k, v in (table.get(name, {}).get("brokerAddrs") or {}).items()}
            if MASTER_ID in addrs:
                masters[name] = addrs[MASTER_ID]
        return masters

    @deferred
    async def create_topic(self, topic: str, cluster: str = "DefaultCluster", queues: int = 8, perm: int = 6, order: bool = False) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on every master of ``cluster``; the brokers it was created on."""
        header = CreateTopicRequestHeader(topic, DEFAULT_TOPIC, queues, queues, perm, "SINGLE_TAG", 0, order)
        masters = await self.cluster_masters(cluster)
        if not masters:
            raise MQClientError(NO_CODE, f"no master broker in cluster {cluster}")
        for addr in masters.values():
            await self.client.call(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_fields()))
        return sorted(masters)

    @deferred
    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the broker and commit log offset are inside the offset id."""
        host, port, offset = decode_offset_msg_id(offset_msg_id)
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset).to_fields())
        response = await self.client.call(addr, request, QUERY_TIMEOUT)
        return MessageExt.from_stored(response.body)

    @deferred
    async def query_message(self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = LONG_MAX) -> list[MessageExt]:
        """QUERY_MESSAGE by key on every master of ``topic``, keeping messages that really carry the key."""
        found = await self._query(topic, key, max_num, begin, end, unique=False)
        return [m for m in found if key in m.keys]

    @deferred
    async def query_by_uniq_key(self, topic: str, uniq_key: str) -> MessageExt | None:
        """QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY``, from a second before the id's own time."""
        found = await self._query(topic, uniq_key, 32, nearly_time_from_id(uniq_key) - 1000, LONG_MAX, unique=True)
        matching = [m for m in found if m.msg_id == uniq_key]
        return matching[0] if matching else None

    async def _query(self, topic: str, key: str, max_num: int, begin: int, end: int, unique: bool) -> list[MessageExt]:
        route = await self.client.fetch_route(topic)
        header = QueryMessageRequestHeader(topic, key, max_num, begin, end)
        out: list[MessageExt] = []
        for name in sorted(route.broker_addrs):
            addr = route.master_addr(name)
            if addr is None:
                continue
            request = header.apply_to(RemotingCommand.request(RequestCode.QUERY_MESSAGE), {"_UNIQUE_KEY_QUERY": "true" if unique else "false"})
            try:
                response = await self.client.call(addr, request, QUERY_TIMEOUT)
            except MQBrokerError as exc:
                if exc.code == ResponseCode.QUERY_NOT_FOUND:
                    continue
                raise
            out += decode_messages(response.body, name)
        return out
