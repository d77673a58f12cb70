"""The send lane: a plain SEND_MESSAGE_V2 stored and answered by ``send_lane`` in ``_accel.c``.

The ordinary path (``SendProcessor.process``) builds a command, a header, a properties dict, a
message, a put result and a dispatch request for every message, and that, not the interpreter, is
most of a send's CPU (docs/benchmarks.md). The lane reads the frame in place and writes the record,
the consume queue unit and the index entries from it, then the same counters the ordinary path
moves. It takes only its common case (docs/send-lane.md) and answers None for anything else, having
written nothing: the ordinary path then takes the frame. So the ordinary path is the lane's twin,
and ``tests/broker/test_send_lane.py`` compares the stores and answers the two leave.

A topic enters the lane once the ordinary path has stored a plain message to it (its checks passed);
the lane compares the topic's config object with the topic table's on every frame, as
``SendProcessor._checked`` is compared.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rmqtx.accel import accel
from rmqtx.broker.timer import REQUEST_KEYS
from rmqtx.common.message import PROPERTY_CLUSTER, PROPERTY_DELAY, PROPERTY_TRANSACTION_PREPARED
from rmqtx.common.topic_config import TopicConfig
from rmqtx.store.record import encode_host

if TYPE_CHECKING:
    from rmqtx.broker.context import BrokerContext
    from rmqtx.remoting.protocol import RemotingProtocol

#: properties that send a message the ordinary way: a half message, a delay level or a timer, a
#: cluster already named, a start-deliver time (the statistics count those as delay messages)
FALLBACK_PROPERTIES = (PROPERTY_TRANSACTION_PREPARED, PROPERTY_DELAY, PROPERTY_CLUSTER, "__STARTDELIVERTIME",
                       *REQUEST_KEYS)

#: where the ordinary path keeps a connection's (host, port), and where the lane keeps it encoded
BORN_HOST_KEY = "send.born_host"
BORN_V4_KEY = "send.born_v4"

MAX_TOPICS = 10000  # as SendProcessor._checked


class SendLane:
    """What ``send_lane`` reads: ``refs``, a tuple in the order of the LR_ names in ``_accel.c``."""

    __slots__ = ("refs", "topics")

    refs: tuple[Any, ...]

    def __init__(self, ctx: BrokerContext, synced: Callable[..., None] | None = None) -> None:
        """``synced``: under SYNC_FLUSH, what takes a stored send's answer until the group commit
        (``SendProcessor.lane_synced``); the lane then answers nothing at once."""
        store, cfg = ctx.store, ctx.config
        store_ip, _ = encode_host(cfg.brokerIP1)
        #: topic -> (its TopicConfig when admitted, the topic's bytes, "topic#" for its index keys)
        self.topics: dict[str, tuple[TopicConfig, bytes, str]] = {}
        self.refs = (
            self.topics, ctx.topics.table, cfg, store, store.commitlog,
            store.index if store.config.message_index_enable else None, store.dirty_cqs, ctx.stats, store.pipeline,
            cfg.brokerClusterName.encode(), store_ip, tuple(name.encode() for name in FALLBACK_PROPERTIES), {},
            BORN_HOST_KEY, BORN_V4_KEY, synced if store.sync_flush else None,
        )

    @staticmethod
    def fits(ctx: BrokerContext) -> bool:
        """The broker's settings the lane serves: the C accelerator built, a master that waits for
        no slave and no controller, IPv4, consume queues in files (not RocksDB)."""
        if accel is None:
            return False
        store, cfg = ctx.store, ctx.config
        ha = ctx.ha
        return (not store.config.is_slave and not store.config.rocksdb_queues
                and (ha is None or (not ha.sync_master and ha.replicas is None))
                and ":" not in cfg.brokerIP1)

    def admit(self, topic: str, tc: TopicConfig) -> None:
        """A topic the ordinary path just stored a plain message to, with the config it checked (a
        topic updated since it was admitted comes back with its new config)."""
        entry = self.topics.get(topic)
        if entry is not None and entry[0] is tc:
            return
        if entry is not None or len(self.topics) < MAX_TOPICS:
            self.topics[topic] = (tc, topic.encode(), topic + "#")

    def handler(self, module: ModuleType | None = None) -> Callable[[bytes, RemotingProtocol], Any]:
        """``send_lane`` of the accelerator (or of ``module``, a test's) bound to this lane, for
        ``Dispatcher.lane``."""
        module = module or accel
        assert module is not None
        return partial(module.send_lane, self)
