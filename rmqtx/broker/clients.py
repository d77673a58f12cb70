"""Producers and consumers known from heartbeats, per group and connection."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from twisted.logger import Logger

from rmqtx.common.subscription import SubscriptionData
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.message_filter import MessageFilter

log = Logger(namespace="rmqtx.broker.clients")

_MESSAGE_MODELS = {0: "BROADCASTING", 1: "CLUSTERING"}
_CONSUME_TYPES = {0: "CONSUME_ACTIVELY", 1: "CONSUME_PASSIVELY"}
_CONSUME_FROM = {0: "CONSUME_FROM_LAST_OFFSET", 1: "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                 2: "CONSUME_FROM_MIN_OFFSET", 3: "CONSUME_FROM_MAX_OFFSET", 4: "CONSUME_FROM_FIRST_OFFSET",
                 5: "CONSUME_FROM_TIMESTAMP"}


def _enum_name(value: object, names: dict[int, str], default: str) -> str:
    """C++ sends enums as ordinals, Java and Node as names: accept both."""
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value, default)
    if isinstance(value, str) and value:
        return names.get(int(value), default) if value.isascii() and value.isdigit() else value
    return default


def tags_filter(sub: SubscriptionData) -> MessageFilter | None:
    """The store's filter for a tag subscription (its tags' hash codes), None when every message matches."""
    if not sub.is_tag or sub.matches_all:
        return None
    return MessageFilter(sub.codes)


@dataclass
class ClientChannel:
    client_id: str
    language: str
    version: int
    conn: RemotingProtocol
    last_update: float = field(default_factory=time.time)


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[RemotingProtocol, ClientChannel] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]


class ClientManager:
    """Producer and consumer groups; tells a consumer group when its members change."""

    def __init__(self, notify: Callable[[str, list[RemotingProtocol]], None]) -> None:
        self.producers: dict[str, dict[RemotingProtocol, ClientChannel]] = {}
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self._notify = notify

    def register_producer(self, group: str, channel: ClientChannel) -> None:
        members = self.producers.setdefault(group, {})
        existing = members.get(channel.conn)
        if existing is None:
            members[channel.conn] = channel
        else:
            existing.last_update = time.time()

    def unregister_producer(self, group: str, conn: RemotingProtocol) -> None:
        members = self.producers.get(group)
        if members is not None:
            members.pop(conn, None)
            if not members:
                del self.producers[group]

    def register_consumer(self, group: str, channel: ClientChannel, consume_type: object, message_model: object,
                          consume_from_where: object, subscriptions: list[SubscriptionData], notify_enabled: bool) -> bool:
        """Record a consumer heartbeat; notifies the group when its members or subscribed topics changed."""
        info = self.consumers.get(group)
        if info is None:
            info = self.consumers[group] = ConsumerGroupInfo(group)
        info.consume_type = _enum_name(consume_type, _CONSUME_TYPES, info.consume_type)
        info.message_model = _enum_name(message_model, _MESSAGE_MODELS, info.message_model)
        info.consume_from_where = _enum_name(consume_from_where, _CONSUME_FROM, info.consume_from_where)
        existing = info.channels.get(channel.conn)
        changed = existing is None or existing.client_id != channel.client_id
        if existing is None:
            info.channels[channel.conn] = channel
        else:
            existing.last_update = time.time()
        new_subs = {s.topic: s for s in subscriptions}
        # Java also tells the group when a topic joins or leaves its subscriptions, so the members
        # rebalance that topic at once rather than at their next 20 s round
        changed = changed or any(t not in info.subscriptions for t in new_subs) or any(t not in new_subs for t in info.subscriptions)
        for topic, sub in new_subs.items():
            old = info.subscriptions.get(topic)
            if old is None or old.sub_version < sub.sub_version or old.sub_string != sub.sub_string:
                info.subscriptions[topic] = sub
        for topic in [t for t in info.subscriptions if t not in new_subs]:
            del info.subscriptions[topic]
        if changed and notify_enabled:
            self._notify(group, list(info.channels))
        return changed

    def unregister_consumer(self, group: str, conn: RemotingProtocol, notify_enabled: bool = True) -> None:
        info = self.consumers.get(group)
        if info is None or info.channels.pop(conn, None) is None:
            return
        if not info.channels:
            del self.consumers[group]
        elif notify_enabled:
            self._notify(group, list(info.channels))

    def connection_closed(self, conn: RemotingProtocol) -> None:
        """A client went away: forget it everywhere and tell its consumer groups."""
        for group in list(self.producers):
            self.unregister_producer(group, conn)
        for group in list(self.consumers):
            self.unregister_consumer(group, conn)

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumers.get(group)

    def producer_by_client_id(self, client_id: str) -> ClientChannel | None:
        """The live connection of the client instance ``client_id`` as a producer (a reply goes there)."""
        for members in self.producers.values():
            for channel in members.values():
                if channel.client_id == client_id and not channel.conn.closed:
                    return channel
        return None

    def producer_channel(self, group: str) -> ClientChannel | None:
        """A live producer of ``group`` (transaction check-back goes there)."""
        for channel in self.producers.get(group, {}).values():
            if not channel.conn.closed:
                return channel
        return None
