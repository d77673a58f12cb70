"""Registration with every NameServer: at start, every registerNameServerPeriod (30 s; 10-60 s), after
topic changes; unregister at stop."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from twisted.internet import defer, task
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqtx.common import fastjson
from rmqtx.common.fastjson import JavaMap
from rmqtx.common.topic_config import TopicConfig
from rmqtx.remoting.client import RemotingClient
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import BrokerIdentityRequestHeader, RegisterBrokerRequestHeader

if TYPE_CHECKING:
    from rmqtx.broker.config import BrokerConfig
    from rmqtx.broker.topics import TopicConfigManager

log = Logger(namespace="rmqtx.broker.registration")

#: A failed registration is retried this soon, not only at the next 30 s period.
RETRY_SECONDS = 2.0
#: Changes that need the whole table registered (topics deleted) within this long share one registration.
COALESCE_SECONDS = 0.2


def register_period(config: BrokerConfig) -> float:
    """Seconds between periodic registrations: Java keeps registerNameServerPeriod within 10-60 s, so a
    NameServer that restarts empty hears from every broker within that bound, and no sooner a flood."""
    return max(10_000, min(int(config.registerNameServerPeriod), 60_000)) / 1000


class NamesrvRegistrar:
    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, client: RemotingClient) -> None:
        self.config = config
        self.topics = topics
        self.client = client
        self._loop: task.LoopingCall | None = None
        self._retrying: set[str] = set()
        self._retry_calls: dict[str, IDelayedCall] = {}
        self._soon: IDelayedCall | None = None
        #: Called with each NameServer's REGISTER_BROKER answer (a slave learns its master from it).
        self.on_registered: list = []

    def _body(self, only: list[TopicConfig] | None = None) -> bytes:
        """RegisterBrokerBody in fastjson's bytes, as Java's broker sends it: the whole topic table in its
        bucket order, or (``registerIncrementBrokerData``) only the topics just created or changed."""
        wrapper = self.topics.wire_json() if only is None else {
            "dataVersion": self.topics.data_version.to_json(),
            "topicConfigTable": JavaMap({tc.topicName: tc.to_json() for tc in only})}
        return fastjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": wrapper})

    def _register_request(self, oneway: bool, only: list[TopicConfig] | None = None) -> RemotingCommand:
        body = self._body(only)
        header = RegisterBrokerRequestHeader(
            brokerName=self.config.brokerName,
            brokerAddr=self.config.broker_addr,
            clusterName=self.config.brokerClusterName,
            haServerAddr=self.config.ha_server_addr,
            brokerId=self.config.brokerId,
            compressed=False,
            bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_fields(), body, oneway=oneway)

    def register_all(self, oneway: bool = False) -> "defer.Deferred[list]":
        """Register with each NameServer; failures are logged and retried soon, never raised."""
        return defer.gatherResults([self._register(addr, oneway) for addr in self.config.namesrv_addrs])

    def register_all_soon(self) -> None:
        """One whole-table registration (oneway) shortly, shared by every change until then: deleting
        N topics one request each registered N whole tables, O(N^2) with 100,000 topics."""
        if self._soon is None or not self._soon.active():
            from twisted.internet import reactor

            self._soon = reactor.callLater(COALESCE_SECONDS, self.register_all, True)

    def register_topic(self, topic_config: TopicConfig) -> "defer.Deferred[list]":
        """Tell each NameServer about one new or changed topic only, with the new data version (Java's
        registerIncrementBrokerData after UPDATE_AND_CREATE_TOPIC): a NameServer keeps the broker's
        other topics, and sending the whole table per created topic made creating N topics O(N^2)."""
        return self.register_topics([topic_config])

    def register_topics(self, topic_configs: list[TopicConfig]) -> "defer.Deferred[list]":
        """The same for several topics in one registration (after UPDATE_AND_CREATE_TOPIC_LIST)."""
        return defer.gatherResults([self._register(addr, True, topic_configs) for addr in self.config.namesrv_addrs])

    def _register(self, addr: str, oneway: bool, only: list[TopicConfig] | None = None) -> "defer.Deferred":
        request = self._register_request(oneway, only)
        d: defer.Deferred[Any]
        if oneway:
            d = self.client.invoke_oneway(addr, request)
        else:
            d = self.client.invoke(addr, request, timeout=self.config.registerBrokerTimeoutMills / 1000)
            d.addCallback(self._answered)
        d.addErrback(self._failed, addr)
        return d

    def _answered(self, response: RemotingCommand) -> RemotingCommand:
        for fn in self.on_registered:
            try:
                fn(response)
            except Exception:  # noqa: BLE001 - a listener bug must not look like a failed registration
                log.failure("registration listener failed")
        return response

    def _failed(self, failure: Failure, addr: str) -> None:
        """A NameServer that is not up yet (started after us) is tried again in a few seconds."""
        log.warn("register to {addr} failed: {why}", addr=addr, why=failure.getErrorMessage())
        running = self._loop is not None and self._loop.running
        if running and addr not in self._retrying:
            from twisted.internet import reactor

            self._retrying.add(addr)

            def retry() -> None:
                self._retrying.discard(addr)
                if self._loop is not None and self._loop.running:
                    self._register(addr, False)

            self._retry_calls[addr] = reactor.callLater(RETRY_SECONDS, retry)

    def start(self) -> "defer.Deferred":
        self._loop = task.LoopingCall(self.register_all)
        return self._loop.start(register_period(self.config), now=True)

    async def stop(self) -> None:
        """Stop the timer and unregister from each NameServer (best effort, short timeout)."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        for call in [*self._retry_calls.values(), self._soon]:
            if call is not None and call.active():
                call.cancel()
        header = BrokerIdentityRequestHeader(
            brokerName=self.config.brokerName,
            brokerAddr=self.config.broker_addr,
            clusterName=self.config.brokerClusterName,
            brokerId=self.config.brokerId,
        )
        calls = []
        for addr in self.config.namesrv_addrs:
            d = self.client.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_fields()), timeout=2)
            d.addErrback(lambda f: None)
            calls.append(d)
        await defer.gatherResults(calls)
