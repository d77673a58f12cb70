"""The requests rmqadmin sends, shaped as Apache's mqadmin sends them, over one RemotingClient.

Works against any RocketMQ-compatible NameServer and broker: JSON headers, language JAVA,
version 409, Java's header field names; bodies are read with the fastjson-tolerant parser.
"""

from __future__ import annotations

from typing import Any

from rmqtx.common import fastjson
from rmqtx.remoting import RemotingClient, RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import CreateTopicRequestHeader

TIMEOUT = 5.0
MASTER_ID = 0


class AdminError(Exception):
    """A request failed; the message is the one line rmqadmin prints."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.code = code


def _mq(key: Any) -> tuple[str, str, int]:
    """A MessageQueue map key (an object key read back as sorted items) as (topic, broker, queueId)."""
    d = dict(key)
    return str(d["topic"]), str(d["brokerName"]), int(d["queueId"])


def mq_table(table: dict | None) -> dict[tuple[str, str, int], Any]:
    """A ``{MessageQueue: value}`` body map keyed by (topic, broker, queueId)."""
    return {_mq(k): v for k, v in (table or {}).items()}


class AdminOps:
    """mqadmin's DefaultMQAdminExt calls, async."""

    def __init__(self, namesrv_addrs: list[str], client: RemotingClient | None = None, timeout: float = TIMEOUT) -> None:
        if not namesrv_addrs:
            raise AdminError("no name server address: pass -n host:port or set NAMESRV_ADDR")
        self.namesrv_addrs = namesrv_addrs
        self.client = client or RemotingClient()
        self.timeout = timeout

    async def close(self) -> None:
        await self.client.close()

    # -- plumbing -------------------------------------------------------------------------------
    async def call(self, addr: str, code: int, fields: dict | None = None, body: bytes = b"",
                   ok: tuple[int, ...] = (ResponseCode.SUCCESS,), timeout: float | None = None) -> RemotingCommand:
        """One request; an answer code outside ``ok`` raises AdminError with Java's wording."""
        request = RemotingCommand.request(code, fields, body)
        try:
            response = await self.client.invoke(addr, request, timeout or self.timeout)
        except Exception as exc:
            raise AdminError(f"connect to {addr} failed: {exc}") from None
        if response.code not in ok:
            raise AdminError(f"CODE: {response.code}  DESC: {response.remark}  BROKER: {addr}", response.code)
        return response

    async def call_namesrv(self, code: int, fields: dict | None = None) -> RemotingCommand:
        """Ask the name servers in turn until one answers."""
        failure: AdminError | None = None
        for addr in self.namesrv_addrs:
            try:
                return await self.call(addr, code, fields)
            except AdminError as exc:
                if exc.code is not None:
                    raise
                failure = exc
        assert failure is not None
        raise failure

    @staticmethod
    def body(response: RemotingCommand) -> Any:
        return fastjson.loads(response.body) if response.body else {}

    # -- name server ----------------------------------------------------------------------------
    async def cluster_info(self) -> dict:
        return self.body(await self.call_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO))

    async def masters(self, cluster: str) -> list[str]:
        """Master addresses of ``cluster`` (CommandUtil.fetchMasterAddrByClusterName)."""
        info = await self.cluster_info()
        names = (info.get("clusterAddrTable") or {}).get(cluster)
        if names is None:
            raise AdminError(f"Make sure the specified clusterName exists or the name server connected to is correct: {cluster}")
        out = []
        for name in sorted(names):
            addrs = {int(k): v for k, v in ((info.get("brokerAddrTable") or {}).get(name, {}).get("brokerAddrs") or {}).items()}
            if MASTER_ID in addrs:
                out.append(addrs[MASTER_ID])
        return out

    async def route(self, topic: str) -> dict:
        return self.body(await self.call_namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))

    async def broker_addrs_of(self, topic: str) -> list[tuple[str, str]]:
        """(broker name, address) of each broker serving ``topic``: master first (selectBrokerAddr)."""
        out = []
        for bd in sorted((await self.route(topic)).get("brokerDatas") or [], key=lambda b: b.get("brokerName", "")):
            addrs = {int(k): v for k, v in (bd.get("brokerAddrs") or {}).items()}
            if addrs:
                out.append((bd.get("brokerName", ""), addrs.get(MASTER_ID) or addrs[min(addrs)]))
        return out

    async def all_topics(self) -> list[str]:
        return list(self.body(await self.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).get("topicList") or [])

    async def delete_topic_in_namesrv(self, topic: str, cluster: str) -> None:
        for addr in self.namesrv_addrs:
            await self.call(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})

    # -- brokers --------------------------------------------------------------------------------
    async def create_topic(self, addr: str, header: CreateTopicRequestHeader) -> None:
        await self.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_fields())

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        await self.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})

    async def topic_stats(self, addr: str, topic: str) -> dict:
        return mq_table(self.body(await self.call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})).get("offsetTable"))

    async def runtime_info(self, addr: str) -> dict[str, str]:
        return dict(self.body(await self.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)).get("table") or {})

    async def consume_stats(self, addr: str, group: str, topic: str | None = None) -> dict:
        fields = {"consumerGroup": group, "topic": topic}
        return self.body(await self.call(addr, RequestCode.GET_CONSUME_STATS, fields, timeout=self.timeout * 3))

    async def consumer_connection(self, addr: str, group: str) -> dict:
        return self.body(await self.call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}))

    async def create_group(self, addr: str, config: dict) -> None:
        await self.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, fastjson.dumps(config))

    async def broker_config(self, addr: str) -> list[tuple[str, str]]:
        text = (await self.call(addr, RequestCode.GET_BROKER_CONFIG)).body.decode("utf-8")
        out = []
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out.append((key, value))
        return out

    async def view_message(self, addr: str, offset: int) -> bytes:
        return (await self.call(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})).body

    async def query_message(self, addr: str, topic: str, key: str, max_num: int, begin: int, end: int) -> bytes:
        fields = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin, "endTimestamp": end,
                  "_UNIQUE_KEY_QUERY": "false"}
        response = await self.call(addr, RequestCode.QUERY_MESSAGE, fields, ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        return response.body if response.code == ResponseCode.SUCCESS else b""

    async def consumed_by_who(self, addr: str, topic: str) -> list[str]:
        return list(self.body(await self.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})).get("groupList") or [])

    async def reset_offset(self, addr: str, topic: str, group: str, timestamp: int, force: bool) -> dict:
        fields = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force}
        return mq_table(self.body(await self.call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)).get("offsetTable"))

    async def queue_offset(self, addr: str, code: int, topic: str, queue_id: int, timestamp: int | None = None) -> int:
        """GET_MAX_OFFSET or SEARCH_OFFSET_BY_TIMESTAMP of one queue."""
        fields: dict = {"topic": topic, "queueId": queue_id}
        if timestamp is not None:
            fields["timestamp"] = timestamp
        return int((await self.call(addr, code, fields)).field("offset", "0") or 0)

    async def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
        await self.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields)
