"""Blocking facades for plain scripts: the reactor runs in a background thread and each call waits.

    with BlockingProducer("127.0.0.1:9876", "P_script") as producer:
        producer.send("T", b"hello", tags="TagA", keys="k1")

    def handle(msgs, ctx):  # runs in a worker thread, may block
        print(msgs[0].body)
        return ConsumeStatus.CONSUME_SUCCESS

    with BlockingPushConsumer("127.0.0.1:9876", "C_script", handle, topics={"T": "*"}):
        time.sleep(60)

Call these from any thread but the reactor's own (under Twisted, use the Deferred APIs instead).
"""

from __future__ import annotations

import atexit
import threading
from typing import Any, Callable, Sequence, Self, cast

from twisted.internet import reactor, threads
from twisted.internet.interfaces import IReactorFromThreads
from twisted.python import threadable

from rmqtx.client.config import ClientConfig
from rmqtx.client.consumer import CLUSTERING, PullConsumer, PushConsumer
from rmqtx.common.subscription import TAG
from rmqtx.client.message import Message, MessageQueue, PullResult, SendResult
from rmqtx.client.producer import Producer

_lock = threading.Lock()
_thread: threading.Thread | None = None


def _ensure_reactor() -> None:
    """Start the global reactor in a daemon thread unless something already runs it."""
    global _thread
    with _lock:
        if reactor.running or _thread is not None:
            return
        threadable.init(1)
        started = threading.Event()
        reactor.callWhenRunning(started.set)
        _thread = threading.Thread(
            target=reactor.run, kwargs={"installSignalHandlers": False}, name="rmqtx-reactor", daemon=True
        )
        _thread.start()
        started.wait(10)
        atexit.register(_stop_reactor)


def _stop_reactor() -> None:
    if reactor.running:
        reactor.callFromThread(reactor.stop)  # type: ignore[attr-defined]
        if _thread is not None:
            _thread.join(5)


def _call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``func`` (returning a Deferred or a value) in the reactor thread and wait for its result."""
    if threadable.isInIOThread():
        raise RuntimeError("blocking client called from the reactor thread; use the Deferred API there")
    return threads.blockingCallFromThread(cast(IReactorFromThreads, reactor), func, *args, **kwargs)


class _Blocking:
    """Start on enter, shut down on exit."""

    _inner: Any  # the Deferred-based client each subclass wraps

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def start(self) -> None:
        _ensure_reactor()
        _call(self._inner.start)

    def shutdown(self) -> None:
        _call(self._inner.shutdown)


class BlockingProducer(_Blocking):
    """A Producer whose sends block until the broker answers."""

    def __init__(self, namesrv_addr: str, group: str, *, config: ClientConfig | None = None, **options: Any) -> None:
        self._inner = Producer(group, namesrv_addr, config=config, **options)

    def send(
        self, topic: str, body: bytes | str, *, tags: str | None = None, keys: str | Sequence[str] | None = None,
        properties: dict[str, str] | None = None, delay_level: int = 0, queue: MessageQueue | None = None,
    ) -> SendResult:
        return _call(self._inner.send, Message(topic, body, tags, keys, properties=properties, delay_level=delay_level), queue=queue)

    def send_message(self, msg: Message, **options: Any) -> SendResult:
        return _call(self._inner.send, msg, **options)

    def send_oneway(self, msg: Message) -> None:
        _call(self._inner.send_oneway, msg)

    def send_batch(self, msgs: Sequence[Message]) -> SendResult:
        return _call(self._inner.send_batch, msgs)


class BlockingPullConsumer(_Blocking):
    """A PullConsumer whose calls block."""

    def __init__(
        self, namesrv_addr: str, group: str, *, config: ClientConfig | None = None, message_model: str = CLUSTERING, **options: Any
    ) -> None:
        self._inner = PullConsumer(group, namesrv_addr, config=config, message_model=message_model, **options)

    def queues(self, topic: str) -> list[MessageQueue]:
        return _call(self._inner.fetch_queues, topic)

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*", *, block: bool = False) -> PullResult:
        return _call(self._inner.pull, mq, offset, max_nums, expression, block=block)

    def update_offset(self, mq: MessageQueue, offset: int) -> None:
        _call(self._inner.update_offset, mq, offset)

    def fetch_offset(self, mq: MessageQueue) -> int:
        return _call(self._inner.fetch_offset, mq)

    def max_offset(self, mq: MessageQueue) -> int:
        return _call(self._inner.max_offset, mq)

    def min_offset(self, mq: MessageQueue) -> int:
        return _call(self._inner.min_offset, mq)


class BlockingPushConsumer(_Blocking):
    """A PushConsumer for plain scripts: ``listener(msgs, ctx)`` runs in a worker thread and may block.

    As in Java's DefaultMQPushConsumer, the listener returns a ConsumeStatus (an OrderlyStatus with
    ``orderly=True``); an exception counts as RECONSUME_LATER. Messages arrive until ``shutdown``.
    """

    def __init__(
        self, namesrv_addr: str, group: str, listener: Callable[[list, Any], Any] | None = None, *,
        topics: dict[str, str] | None = None, config: ClientConfig | None = None, **options: Any,
    ) -> None:
        self._listener = listener
        self._started = False
        self._inner = PushConsumer(group, namesrv_addr, config=config, listener=self._consume, **options)
        for topic, expression in (topics or {}).items():
            self._inner.subscribe(topic, expression)

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = TAG) -> None:
        """Subscribe before start (or while running: the next rebalance picks it up)."""
        if self._started:
            _call(self._inner.subscribe, topic, expression, expression_type)
        else:
            self._inner.subscribe(topic, expression, expression_type)

    def register_listener(self, listener: Callable[[list, Any], Any]) -> None:
        self._listener = listener

    def start(self) -> None:
        if self._listener is None:
            raise ValueError("BlockingPushConsumer needs a listener before start")
        super().start()
        self._started = True

    def shutdown(self) -> None:
        super().shutdown()
        self._started = False

    def _consume(self, msgs: list, ctx: Any) -> Any:
        listener = self._listener
        assert listener is not None
        return threads.deferToThread(listener, msgs, ctx)
