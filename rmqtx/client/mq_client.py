"""The client instance shared by every producer and consumer with the same client id.

It owns the connections, the route cache (refreshed every 30 s), the heartbeats to all brokers
(every 30 s), the periodic rebalance and offset persistence of its consumers, and answers the
requests brokers send to clients.
"""

from __future__ import annotations

import random
from typing import Any, Awaitable, Callable, Coroutine, Iterable, Protocol

from twisted.internet import defer, error, task
from twisted.logger import Logger

from rmqtx.client.config import ClientConfig
from rmqtx.client.errors import NO_CODE, MQBrokerError, MQClientError
from rmqtx.client.message import MessageExt, MessageQueue
from rmqtx.client.request_reply import ReplyWaiters
from rmqtx.client.route import MASTER_ID, TopicRoute
from rmqtx.common import fastjson
from rmqtx.common.message import PROPERTY_PRODUCER_GROUP
from rmqtx.common.topics import DEFAULT_TOPIC
from rmqtx.remoting import Dispatcher, RemotingClient, RemotingCommand, RemotingError, RemotingProtocol
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import (
    CheckTransactionStateRequestHeader,
    GetRouteInfoRequestHeader,
    UnregisterClientRequestHeader,
)

log = Logger(namespace="rmqtx.client")

#: The producer group every Java client instance carries for its own sends.
INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
#: The default topic the inner producer routes (auto-creation template).


class ConsumerHandle(Protocol):
    """What the instance needs from a consumer."""

    def subscribed_topics(self) -> Iterable[str]: ...
    def consumer_data(self) -> dict: ...
    def rebalance(self) -> Awaitable[None]: ...
    def persist_offsets(self) -> Awaitable[None]: ...
    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> Coroutine[Any, Any, None]: ...
    def running_info(self) -> dict: ...
    def consume_directly(self, msg: MessageExt) -> Awaitable[dict]: ...


class ProducerHandle(Protocol):
    """What the instance needs from a producer."""

    def published_topics(self) -> Iterable[str]: ...


class MQClientInstance:
    """Connections, routes, heartbeats and background tasks of one client id."""

    def __init__(self, config: ClientConfig, reactor: Any = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config
        self.reactor = reactor
        self.client_id = config.client_id
        self.replies = ReplyWaiters()  # Producer.request calls waiting for the broker's push
        dispatcher = Dispatcher()
        dispatcher.register_many(
            {
                RequestCode.CHECK_TRANSACTION_STATE: self._on_check_transaction_state,
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: self._on_consumer_ids_changed,
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET: self._on_reset_offset,
                RequestCode.GET_CONSUMER_RUNNING_INFO: self._on_running_info,
                RequestCode.CONSUME_MESSAGE_DIRECTLY: self._on_consume_directly,
                RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: self.replies.on_push,
            }
        )
        self.remoting = RemotingClient(reactor, dispatcher=dispatcher, signer=config.signer(), tls=config.tls_options())
        self.routes: dict[str, TopicRoute] = {}
        #: The broker id each queue's last pull answer suggested (Java's pullFromWhichNodeTable).
        self.pull_from_node: dict[Any, int] = {}
        self.producers: dict[str, ProducerHandle | None] = {INNER_PRODUCER_GROUP: None}
        self.consumers: dict[str, ConsumerHandle] = {}
        self._loops: list[task.LoopingCall] = []
        self._first_runs: list[Any] = []
        self._namesrv_index = random.randrange(1 << 16)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the periodic tasks (Java's first runs: routes at once, heartbeat after 1 s)."""
        if self._loops:
            return
        c = self.config
        for interval, func, first_delay in (
            (c.poll_namesrv_interval, self.update_all_routes, 0.01),
            (c.heartbeat_interval, self.send_heartbeat, 1.0),
            (c.persist_offset_interval, self.persist_all_offsets, c.persist_offset_interval),
            (c.rebalance_interval, self.rebalance_all, c.rebalance_interval),
        ):
            loop = task.LoopingCall(self._guarded, func)
            loop.clock = self.reactor
            self._loops.append(loop)
            self._first_runs.append(self.reactor.callLater(first_delay, loop.start, interval, now=True))

    async def _guarded(self, func: Callable[[], Awaitable[None]]) -> None:
        """A failing periodic task is logged and runs again next period."""
        try:
            await func()
        except Exception:
            log.failure("periodic client task {name} failed", name=getattr(func, "__name__", func))

    async def shutdown(self) -> None:
        """Stop the tasks, unregister the inner producer and close every connection."""
        for call in self._first_runs:
            if call.active():
                call.cancel()
        loops, self._loops, self._first_runs = self._loops, [], []
        for loop in loops:
            if loop.running:
                loop.stop()
        await self.unregister_client(producer_group=INNER_PRODUCER_GROUP)
        await self.remoting.close()
        _instances.pop(self.client_id, None)

    # -- registration -------------------------------------------------------------------------
    def register_producer(self, group: str, producer: ProducerHandle) -> None:
        if group in self.producers:
            raise MQClientError(NO_CODE, f"The producer group[{group}] has been created before, specify another name please.")
        self.producers[group] = producer

    def register_consumer(self, group: str, consumer: ConsumerHandle) -> None:
        if group in self.consumers:
            raise MQClientError(NO_CODE, f"The consumer group[{group}] has been created before, specify another name please.")
        self.consumers[group] = consumer

    async def unregister_producer(self, group: str) -> None:
        self.producers.pop(group, None)
        await self.unregister_client(producer_group=group)
        await self._release()

    async def unregister_consumer(self, group: str) -> None:
        self.consumers.pop(group, None)
        await self.unregister_client(consumer_group=group)
        await self._release()

    async def _release(self) -> None:
        """Shut down once only the inner producer is left."""
        if not self.consumers and set(self.producers) == {INNER_PRODUCER_GROUP}:
            await self.shutdown()

    async def unregister_client(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """UNREGISTER_CLIENT to every known broker; failures are only logged, as in Java."""
        header = UnregisterClientRequestHeader(self.client_id, producer_group, consumer_group)
        for addr in self.all_broker_addrs():
            try:
                await self.call(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_fields()))
            except (MQClientError, MQBrokerError) as exc:
                log.info("unregister client at {addr} failed: {exc}", addr=addr, exc=exc)

    # -- remote calls -------------------------------------------------------------------------
    async def call(
        self, addr: str, request: RemotingCommand, timeout: float | None = None, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)
    ) -> RemotingCommand:
        """Invoke and wait; answers outside ``ok`` raise MQBrokerError, transport failures MQClientError."""
        try:
            response = await self.remoting.invoke(addr, request, self.config.rpc_timeout if timeout is None else timeout)
        except (RemotingError, error.ConnectError) as exc:
            raise MQClientError(NO_CODE, f"{addr}: {exc}") from exc
        if response.code not in ok:
            raise MQBrokerError(response.code, response.remark, addr)
        return response

    async def oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send without an answer; a connection failure raises MQClientError."""
        try:
            await self.remoting.invoke_oneway(addr, request)
        except (RemotingError, error.ConnectError) as exc:
            raise MQClientError(NO_CODE, f"{addr}: {exc}") from exc

    async def call_namesrv(self, request: RemotingCommand, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """Invoke on a name server, moving on to the next one when it cannot be reached."""
        addrs = self.config.namesrv_addrs
        if not addrs:
            raise MQClientError(NO_CODE, "No name server address, please set it.")
        last: Exception | None = None
        for _ in addrs:
            addr = addrs[self._namesrv_index % len(addrs)]
            try:
                response = await self.remoting.invoke(addr, request, self.config.rpc_timeout)
            except (RemotingError, error.ConnectError) as exc:
                last = exc
                self._namesrv_index += 1
                continue
            if response.code not in ok:
                raise MQClientError(response.code, response.remark)
            return response
        raise MQClientError(NO_CODE, f"connect to name server failed: {last}")

    # -- routes -------------------------------------------------------------------------------
    async def fetch_route(self, topic: str) -> TopicRoute:
        """Ask the name server for ``topic``'s route and cache it; TOPIC_NOT_EXIST raises (code 17)."""
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_fields())
        response = await self.call_namesrv(request)
        route = TopicRoute.from_body(response.body)
        self.routes[topic] = route
        return route

    async def route(self, topic: str) -> TopicRoute:
        """The cached route, fetched on first use."""
        cached = self.routes.get(topic)
        return cached if cached is not None else await self.fetch_route(topic)

    async def update_all_routes(self) -> None:
        """Refresh every topic a producer or consumer of this instance uses."""
        topics = {DEFAULT_TOPIC}
        for producer in self.producers.values():
            if producer is not None:
                topics.update(producer.published_topics())
        for consumer in self.consumers.values():
            topics.update(consumer.subscribed_topics())
        for topic in sorted(topics):
            try:
                await self.fetch_route(topic)
            except MQClientError as exc:
                log.debug("route of {topic}: {exc}", topic=topic, exc=exc)

    def master_addr(self, broker_name: str) -> str | None:
        for route in self.routes.values():
            addr = route.master_addr(broker_name)
            if addr:
                return addr
        return None

    async def find_master_addr(self, broker_name: str, topic: str) -> str:
        """The master of ``broker_name``, refreshing ``topic``'s route when it is unknown."""
        addr = self.master_addr(broker_name)
        if addr is None:
            await self.fetch_route(topic)
            addr = self.master_addr(broker_name)
        if addr is None:
            raise MQClientError(NO_CODE, f"The broker[{broker_name}] not exist")
        return addr

    async def find_subscribe_addr(self, broker_name: str, broker_id: int, topic: str) -> str:
        """Java's findBrokerAddressInSubscribe: the suggested broker, else the next slave, else any of the
        group (lowest id first); so pulls go to a slave while the master is out of the route."""
        addrs = self.broker_table().get(broker_name)
        if not addrs:
            await self.fetch_route(topic)
            addrs = self.broker_table().get(broker_name)
        if not addrs:
            raise MQClientError(NO_CODE, f"The broker[{broker_name}] not exist")
        addr = addrs.get(broker_id)
        if addr is None and broker_id != MASTER_ID:
            addr = addrs.get(broker_id + 1)
        return addr if addr is not None else addrs[min(addrs)]

    def broker_table(self) -> dict[str, dict[int, str]]:
        table: dict[str, dict[int, str]] = {}
        for route in self.routes.values():
            for name, addrs in route.broker_addrs.items():
                table.setdefault(name, {}).update(addrs)
        return table

    def all_broker_addrs(self) -> list[str]:
        return sorted({addr for addrs in self.broker_table().values() for addr in addrs.values()})

    # -- heartbeats ---------------------------------------------------------------------------
    def heartbeat_body(self) -> bytes:
        """HeartbeatData as fastjson writes it (bean keys sorted)."""
        data = {
            "clientID": self.client_id,
            "consumerDataSet": [c.consumer_data() for c in self.consumers.values()],
            "producerDataSet": [{"groupName": g} for g in self.producers],
        }
        return fastjson.dumps(data)

    async def send_heartbeat(self) -> None:
        """HEART_BEAT to every master (and, with consumers, every slave)."""
        body = self.heartbeat_body()
        with_consumers = bool(self.consumers)
        for name, addrs in sorted(self.broker_table().items()):
            for broker_id, addr in sorted(addrs.items()):
                if broker_id != MASTER_ID and not with_consumers:
                    continue
                try:
                    await self.call(addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, body))
                except (MQClientError, MQBrokerError) as exc:
                    log.info("heartbeat to {name} {addr} failed: {exc}", name=name, addr=addr, exc=exc)

    # -- consumers ----------------------------------------------------------------------------
    async def rebalance_all(self) -> None:
        for consumer in list(self.consumers.values()):
            await consumer.rebalance()

    async def persist_all_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            await consumer.persist_offsets()

    def rebalance_soon(self) -> None:
        """Java's rebalanceImmediately: wake every consumer's rebalance."""
        self.reactor.callLater(0, lambda: defer.ensureDeferred(self._guarded(self.rebalance_all)))

    # -- requests from brokers ----------------------------------------------------------------
    def _on_consumer_ids_changed(self, request: RemotingCommand, conn: RemotingProtocol) -> None:
        log.debug("consumer ids of {group} changed", group=request.field("consumerGroup"))
        self.rebalance_soon()

    def _on_check_transaction_state(self, request: RemotingCommand, conn: RemotingProtocol) -> None:
        msg = MessageExt.from_stored(request.body)
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP)
        producer = self.producers.get(group or "")
        check = getattr(producer, "check_transaction_state", None)
        if check is None:
            log.warn("transaction check for unknown producer group {group}", group=group)
            return None
        check(CheckTransactionStateRequestHeader.from_command(request), msg, conn)
        return None

    def _on_reset_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> None:
        consumer = self.consumers.get(request.field("group") or "")
        if consumer is None or not request.body:
            return None
        table = fastjson.loads(request.body).get("offsetTable") or {}
        offsets = {MessageQueue.from_json(dict(key)): int(value) for key, value in table.items()}
        defer.ensureDeferred(consumer.reset_offsets(request.field("topic") or "", offsets))
        return None

    def _on_running_info(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        group = request.field("consumerGroup") or ""
        consumer = self.consumers.get(group)
        if consumer is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")
        return request.make_response(ResponseCode.SUCCESS, body=fastjson.dumps(consumer.running_info()))

    async def _on_consume_directly(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        group = request.field("consumerGroup") or ""
        consumer = self.consumers.get(group)
        if consumer is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")
        msg = MessageExt.from_stored(request.body, broker_name=request.field("brokerName"))
        result = await consumer.consume_directly(msg)
        return request.make_response(ResponseCode.SUCCESS, body=fastjson.dumps(result))


_instances: dict[str, MQClientInstance] = {}


def get_client_instance(config: ClientConfig, reactor: Any = None) -> MQClientInstance:
    """The instance for ``config``'s client id, created on first use (Java's MQClientManager)."""
    instance = _instances.get(config.client_id)
    if instance is None:
        instance = _instances[config.client_id] = MQClientInstance(config, reactor)
    return instance
