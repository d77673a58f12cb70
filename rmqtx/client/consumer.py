"""Consumers: PushConsumer (long-poll pulls, rebalance, listener, retry, orderly locks) and
PullConsumer (the application pulls queues itself), speaking the Java client's wire format."""

from __future__ import annotations

import enum
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from twisted.internet import defer, task
from twisted.logger import Logger

from rmqtx.client import queue_ops
from rmqtx.client.config import ClientConfig
from rmqtx.client.errors import NO_CODE, MQBrokerError, MQClientError
from rmqtx.client.message import MessageExt, MessageQueue, PullResult, PullStatus, mq_set_json
from rmqtx.client.mq_client import MQClientInstance, get_client_instance
from rmqtx.client.offset_store import NOT_FOUND, LocalOffsetStore, OffsetStore, RemoteOffsetStore
from rmqtx.client.pull_api import allocate_averagely, pull
from rmqtx.client.route import MASTER_ID
from rmqtx.common.subscription import TAG, SubscriptionData
from rmqtx.client.util import call_user, deferred, java_fields
from rmqtx.common import fastjson
from rmqtx.common.message import PROPERTY_CONSUME_START_TIME, PROPERTY_RETRY_TOPIC
from rmqtx.common.topics import RETRY_PREFIX
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.headers import ConsumerGroupRequestHeader, ConsumerSendMsgBackRequestHeader

log = Logger(namespace="rmqtx.client.consumer")

CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"
CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"

PULL_DELAY_ON_ERROR = 3.0  # Java's pullTimeDelayMillsWhenException
PULL_DELAY_FLOW_CONTROL = 0.05
RETRY_LOCAL_DELAY = 5.0  # a message the broker would not take back is consumed again locally
LOCK_INTERVAL = 20.0
LOCK_TIMEOUT = 1.0


class ConsumeStatus(enum.Enum):
    """A concurrent listener's answer; anything but CONSUME_SUCCESS (None, an exception) retries."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class OrderlyStatus(enum.Enum):
    """An orderly listener's answer; SUSPEND re-delivers the same messages after ``ctx.suspend_seconds``."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass
class ConsumeContext:
    """Passed to listeners: the queue, and knobs for what happens on failure."""

    message_queue: MessageQueue
    delay_level: int = 0
    suspend_seconds: float = 1.0


Listener = Callable[[list[MessageExt], ConsumeContext], Any]


class ProcessQueue:
    """Messages pulled from one queue and not yet consumed; the next pull offset; lock state."""

    def __init__(self, mq: MessageQueue, next_offset: int) -> None:
        self.mq = mq
        self.next_offset = next_offset
        self.msgs: dict[int, MessageExt] = {}
        self.consuming: dict[int, MessageExt] = {}
        self.max_offset = -1
        self.dropped = False
        self.locked = False
        self.busy = False  # an orderly consume loop runs
        now = int(time.time() * 1000)
        self.last_pull = self.last_consume = self.last_lock = now  # ms, as Java's ProcessQueue starts them

    def info(self, commit_offset: int) -> dict:
        """ProcessQueueInfo (mqadmin consumerStatus, consumerProgress -s): what is cached, locks, last activity."""
        cached = {**self.msgs, **self.consuming}
        size = sum(len(m.body) for m in cached.values())
        return {
            "cachedMsgCount": len(cached), "cachedMsgMaxOffset": max(cached, default=0),
            "cachedMsgMinOffset": min(cached, default=0), "cachedMsgSizeInMiB": size // (1024 * 1024),
            "commitOffset": commit_offset, "droped": self.dropped, "lastConsumeTimestamp": self.last_consume,
            "lastLockTimestamp": self.last_lock, "lastPullTimestamp": self.last_pull, "locked": self.locked,
            "transactionMsgCount": 0, "transactionMsgMaxOffset": 0, "transactionMsgMinOffset": 0, "tryUnlockTimes": 0,
        }

    def put(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            self.msgs[m.queue_offset] = m
            self.max_offset = max(self.max_offset, m.queue_offset)

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget consumed messages; the offset that is now safe to commit."""
        for m in msgs:
            self.msgs.pop(m.queue_offset, None)
        return min(self.msgs) if self.msgs else self.max_offset + 1

    def take(self, n: int) -> list[MessageExt]:
        """Orderly: move the ``n`` oldest messages to the consuming set."""
        taken = [self.msgs.pop(o) for o in sorted(self.msgs)[:n]]
        for m in taken:
            self.consuming[m.queue_offset] = m
        return taken

    def commit(self) -> int:
        """Orderly: the consuming set is done; the offset after it (-1 if it was empty)."""
        offset = max(self.consuming) + 1 if self.consuming else -1
        self.consuming.clear()
        return offset

    def rollback(self) -> None:
        """Orderly: put the consuming set back to be consumed again."""
        self.msgs.update(self.consuming)
        self.consuming.clear()

    @property
    def count(self) -> int:
        return len(self.msgs) + len(self.consuming)


class _ConsumerBase:
    """What both consumers share: client instance, offsets, subscriptions for the heartbeat."""

    consume_type = "CONSUME_PASSIVELY"

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None,
        config: ClientConfig | None,
        reactor: Any,
        message_model: str,
        consume_from: str,
        offset_store_dir: str | None,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        config = ClientConfig.resolve(namesrv_addr, config, access_key, secret_key)
        if message_model not in (CLUSTERING, BROADCASTING):
            raise MQClientError(NO_CODE, f"unknown message model {message_model!r}")
        self.group = group
        self.config = config
        self.reactor = reactor
        self.message_model = message_model
        self.consume_from = consume_from
        self.offset_store_dir = offset_store_dir or os.path.join(os.path.expanduser("~"), ".rocketmq_offsets")
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.client: MQClientInstance | None = None
        self.offsets: OffsetStore = OffsetStore()

    async def _join(self) -> MQClientInstance:
        client = get_client_instance(self.config, self.reactor)
        client.register_consumer(self.group, self)
        self.client = client
        if self.message_model == BROADCASTING:
            self.offsets = LocalOffsetStore(self.offset_store_dir, self.config.client_id, self.group)
        else:
            self.offsets = RemoteOffsetStore(client, self.group)
        await self.offsets.load()
        return client

    def _running(self) -> MQClientInstance:
        if self.client is None:
            raise MQClientError(NO_CODE, "The consumer service state not OK")
        return self.client

    # -- what the client instance asks ---------------------------------------------------------
    def subscribed_topics(self) -> Iterable[str]:
        return list(self.subscriptions)

    def consumer_data(self) -> dict:
        return {
            "consumeFromWhere": self.consume_from,
            "consumeType": self.consume_type,
            "groupName": self.group,
            "messageModel": self.message_model,
            "subscriptionDataSet": [s.client_json() for s in self.subscriptions.values()],
            "unitMode": False,
        }

    def running_info(self) -> dict:
        """ConsumerRunningInfo, the parts mqadmin's consumerStatus shows."""
        return {
            "mqTable": {},
            "properties": {
                "PROP_CONSUME_TYPE": self.consume_type,
                "PROP_NAMESERVER_ADDR": self.config.namesrv_addr,
                "PROP_CLIENT_VERSION": "V4_9_8",
                "PROP_CONSUMEORDERLY": str(getattr(self, "orderly", False)).lower(),
            },
            "statusTable": {},
            "subscriptionSet": [s.client_json() for s in self.subscriptions.values()],
        }

    async def persist_offsets(self) -> None:
        await self.offsets.persist(list(self.offsets.table))

    async def rebalance(self) -> None:
        """Pull consumers pick their queues themselves."""

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            self.offsets.update(mq, offset)
        await self.offsets.persist(list(offsets))

    async def consume_directly(self, msg: MessageExt) -> dict:
        return {"autoCommit": True, "consumeResult": "CR_THROW_EXCEPTION", "order": False, "remark": "not a push consumer", "spentTimeMills": 0}


class PushConsumer(_ConsumerBase):
    """DefaultMQPushConsumer: subscribe, register a listener, start; queues are shared by rebalance.

    ``listener(msgs, ctx)`` returns ConsumeStatus (OrderlyStatus when ``orderly``), or a Deferred or
    awaitable of one. It runs in the reactor thread: hand slow work to a thread yourself.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        reactor: Any = None,
        listener: Listener | None = None,
        orderly: bool = False,
        message_model: str = CLUSTERING,
        consume_from: str = CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | None = None,
        pull_batch_size: int = 32,
        consume_batch_size: int = 1,
        max_reconsume_times: int = 16,
        pull_threshold: int = 1000,
        suspend_timeout: float = 15.0,
        pull_timeout: float = 30.0,
        offset_store_dir: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        super().__init__(group, namesrv_addr, config, reactor, message_model, consume_from, offset_store_dir, access_key, secret_key)
        self.started_at = 0  # ms; PROP_CONSUMER_START_TIMESTAMP
        self.listener = listener
        self.orderly = orderly
        self.consume_timestamp = consume_timestamp if consume_timestamp is not None else int(time.time() * 1000) - 30 * 60 * 1000
        self.pull_batch_size = pull_batch_size
        self.consume_batch_size = consume_batch_size
        self.max_reconsume_times = max_reconsume_times
        self.pull_threshold = pull_threshold
        self.suspend_timeout = suspend_timeout
        self.pull_timeout = pull_timeout
        self.pqs: dict[MessageQueue, ProcessQueue] = {}
        self._rebalance_lock = defer.DeferredLock()
        self._sleeps: set[defer.Deferred[None]] = set()
        self._lock_loop: task.LoopingCall | None = None
        self._running_flag = False

    # -- setup --------------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str = "*", expression_type: str = TAG) -> None:
        """Subscribe ``topic`` with a tag expression (``"TagA || TagB"``) or an SQL92 one."""
        self.subscriptions[topic] = SubscriptionData.build(topic, expression, expression_type)

    def register_listener(self, listener: Listener) -> None:
        self.listener = listener

    def running_info(self) -> dict:
        """Java's push consumer adds its start time (consumerStatus parses it), the queues it holds and per-topic stats."""
        info = super().running_info()
        info["properties"]["PROP_CONSUMER_START_TIMESTAMP"] = str(self.started_at)
        info["properties"]["PROP_THREADPOOL_CORE_SIZE"] = "1"  # listeners run in the reactor thread
        info["mqTable"] = fastjson.OrderedMap(
            (tuple(sorted(mq.to_json().items())), pq.info(self.offsets.read_memory(mq))) for mq, pq in sorted(self.pqs.items())
        )
        # rmqtx does not time pulls or consumption; the rates read 0 rather than being absent
        zero = {"consumeFailedMsgs": 0, "consumeFailedTPS": 0.0, "consumeOKTPS": 0.0, "consumeRT": 0.0, "pullRT": 0.0, "pullTPS": 0.0}
        info["statusTable"] = fastjson.OrderedMap((topic, dict(zero)) for topic in sorted(self.subscriptions))
        return info

    @deferred
    async def start(self) -> None:
        """Register, check filters with the brokers, heartbeat, then rebalance and start pulling."""
        if self.listener is None:
            raise MQClientError(NO_CODE, "messageListener is null")
        if self.message_model == CLUSTERING:
            retry = RETRY_PREFIX + self.group
            self.subscriptions.setdefault(retry, SubscriptionData.build(retry, "*"))
        client = await self._join()
        try:
            for topic in self.subscriptions:
                try:
                    await client.fetch_route(topic)
                except MQClientError as exc:
                    log.info("no route for {topic} yet: {exc}", topic=topic, exc=exc)
            await self._check_client_in_broker(client)
        except Exception:
            self.client = None
            await client.unregister_consumer(self.group)
            raise
        self._running_flag = True
        self.started_at = int(time.time() * 1000)
        client.start()
        await client.send_heartbeat()
        if self.orderly and self.message_model == CLUSTERING:
            self._lock_loop = task.LoopingCall(self._lock_all)
            self._lock_loop.clock = client.reactor
            self._lock_loop.start(LOCK_INTERVAL, now=False)
        await self.rebalance()

    async def _check_client_in_broker(self, client: MQClientInstance) -> None:
        """CHECK_CLIENT_CONFIG for non-tag subscriptions: fail fast where the broker cannot filter."""
        for sub in self.subscriptions.values():
            if sub.is_tag:
                continue
            body = fastjson.dumps({"clientId": client.client_id, "group": self.group, "subscriptionData": sub.client_json()})
            for name, addrs in client.broker_table().items():
                addr = addrs.get(MASTER_ID)
                if addr is None:
                    continue
                try:
                    await client.call(addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, None, body))
                except MQBrokerError as exc:
                    raise MQClientError(exc.code, f"Check client in broker error, maybe because you use {sub.expression_type} to filter message, "
                                        f"but server has not been upgraded to support!{exc.remark}") from exc

    @deferred
    async def shutdown(self) -> None:
        """Stop pulling, unlock orderly queues, persist offsets, UNREGISTER_CLIENT."""
        client = self.client
        if client is None:
            return
        self._running_flag = False
        if self._lock_loop is not None and self._lock_loop.running:
            self._lock_loop.stop()
        await self._rebalance_lock.acquire()  # let a rebalance under way finish first
        self._rebalance_lock.release()
        for pq in self.pqs.values():
            pq.dropped = True
        for d in list(self._sleeps):
            d.cancel()
        if self.orderly and self.message_model == CLUSTERING:
            await self._unlock(list(self.pqs), oneway=False)
        await self.offsets.persist(list(self.pqs))
        self.pqs.clear()
        self.client = None
        await client.unregister_consumer(self.group)

    async def persist_offsets(self) -> None:
        """Java's persistAll: commit the queues this member holds; offsets of queues it no longer
        holds are forgotten, never sent (their new owner commits them)."""
        held = list(self.pqs)
        for mq in [mq for mq in self.offsets.table if mq not in self.pqs]:
            self.offsets.remove(mq)
        await self.offsets.persist(held)

    async def _sleep(self, seconds: float) -> None:
        """A cancellable pause (shutdown cancels it)."""
        d = task.deferLater(self._running().reactor, seconds, lambda: None)
        self._sleeps.add(d)
        try:
            await d
        except defer.CancelledError:
            pass
        finally:
            self._sleeps.discard(d)

    # -- rebalance ----------------------------------------------------------------------------
    async def rebalance(self) -> None:
        """Share each topic's queues among the group (CLUSTERING) or take them all (BROADCASTING)."""
        if not self._running_flag:
            return
        await self._rebalance_lock.acquire()
        try:
            started: list[ProcessQueue] = []
            for topic, sub in list(self.subscriptions.items()):
                mine = await self._allocate(topic)
                if mine is None:
                    continue
                new, changed = await self._update_queues(topic, set(mine))
                if changed:
                    sub.sub_version = int(time.time() * 1000)
                    await self._running().send_heartbeat()
                started += new
            for mq in [mq for mq in self.pqs if mq.topic not in self.subscriptions]:
                await self._drop(mq)
        finally:
            self._rebalance_lock.release()
        for pq in started:
            defer.ensureDeferred(self._pull_loop(pq)).addErrback(lambda f: log.failure("pull loop failed", f))

    async def _allocate(self, topic: str) -> list[MessageQueue] | None:
        client = self._running()
        route = client.routes.get(topic)
        if route is None:
            try:
                route = await client.fetch_route(topic)
            except MQClientError:
                return None
        mqs = sorted(route.subscribe_queues(topic))
        if self.message_model == BROADCASTING:
            return mqs
        cids = await self._consumer_ids(topic)
        if not cids:
            return None
        return allocate_averagely(mqs, sorted(cids), client.client_id)

    async def _consumer_ids(self, topic: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP at a random broker of ``topic``."""
        client = self._running()
        route = client.routes.get(topic)
        if route is None or not route.broker_addrs:
            return []
        addrs = random.choice(list(route.broker_addrs.values()))
        addr = addrs.get(MASTER_ID) or next(iter(addrs.values()))
        header = ConsumerGroupRequestHeader(self.group)
        try:
            response = await client.call(addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, java_fields(header)))
        except (MQClientError, MQBrokerError) as exc:
            log.info("consumer ids of {group}: {exc}", group=self.group, exc=exc)
            return []
        return [str(c) for c in fastjson.loads(response.body).get("consumerIdList") or []] if response.body else []

    async def _update_queues(self, topic: str, mine: set[MessageQueue]) -> tuple[list[ProcessQueue], bool]:
        changed = False
        for mq in [mq for mq in self.pqs if mq.topic == topic and mq not in mine]:
            await self._drop(mq)
            changed = True
        new = []
        for mq in sorted(mine - set(self.pqs)):
            if self.orderly and self.message_model == CLUSTERING and not await self._lock(mq):
                continue
            self.offsets.remove(mq)
            offset = await self._compute_pull_from_where(mq)
            if offset < 0:
                continue
            pq = ProcessQueue(mq, offset)
            pq.locked = self.orderly and self.message_model == CLUSTERING
            self.pqs[mq] = pq
            new.append(pq)
            changed = True
        return new, changed

    async def _drop(self, mq: MessageQueue) -> None:
        pq = self.pqs.pop(mq)
        pq.dropped = True
        await self.offsets.persist([mq])
        self.offsets.remove(mq)
        if self.orderly and self.message_model == CLUSTERING:
            await self._unlock([mq], oneway=True)

    async def _compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Java's computePullFromWhere: the stored offset, else per ``consume_from``; -1 skips the queue."""
        stored = await self.offsets.read_store(mq)
        if stored >= 0:
            return stored
        if stored != NOT_FOUND:
            return -1
        client = self._running()
        if self.consume_from == CONSUME_FROM_FIRST_OFFSET or mq.topic.startswith(RETRY_PREFIX):
            return 0
        try:
            if self.consume_from == CONSUME_FROM_TIMESTAMP:
                return await queue_ops.search_offset(client, mq, self.consume_timestamp)
            return await queue_ops.max_offset(client, mq)
        except (MQClientError, MQBrokerError) as exc:
            log.warn("offset lookup of {mq} failed: {exc}", mq=mq, exc=exc)
            return -1

    # -- pulling ------------------------------------------------------------------------------
    async def _pull_loop(self, pq: ProcessQueue) -> None:
        """Long-poll ``pq``'s queue until it is dropped, handing messages to the listener."""
        while not pq.dropped:
            if pq.count > self.pull_threshold:
                await self._sleep(PULL_DELAY_FLOW_CONTROL)
                continue
            if not pq.locked and self.orderly and self.message_model == CLUSTERING:
                await self._sleep(PULL_DELAY_ON_ERROR)
                continue
            sub = self.subscriptions.get(pq.mq.topic)
            if sub is None:
                return
            commit = self.offsets.read_memory(pq.mq) if self.message_model == CLUSTERING else 0
            try:
                result = await pull(
                    self._running(), self.group, pq.mq, sub, pq.next_offset, self.pull_batch_size,
                    commit_offset=max(commit, 0), suspend=True, send_subscription=False,
                    suspend_timeout=self.suspend_timeout, timeout=self.pull_timeout, sub_version=sub.sub_version,
                )
            except (MQClientError, MQBrokerError) as exc:
                if pq.dropped:
                    return
                log.info("pull {mq} failed: {exc}", mq=pq.mq, exc=exc)
                await self._sleep(PULL_DELAY_ON_ERROR)
                continue
            if pq.dropped:
                return
            self._handle_pull(pq, result)

    def _handle_pull(self, pq: ProcessQueue, result: PullResult) -> None:
        pq.next_offset = result.next_begin_offset
        pq.last_pull = int(time.time() * 1000)
        if result.status is PullStatus.FOUND and result.messages:
            pq.put(result.messages)
            if self.orderly:
                defer.ensureDeferred(self._consume_orderly(pq))
            else:
                msgs = result.messages
                for i in range(0, len(msgs), self.consume_batch_size):
                    defer.ensureDeferred(self._consume_concurrently(pq, msgs[i : i + self.consume_batch_size]))
        elif not pq.count:
            # nothing cached and nothing (matching) found: the offset may move past filtered messages
            self.offsets.update(pq.mq, result.next_begin_offset, increase_only=True)

    # -- consuming ----------------------------------------------------------------------------
    def _prepare(self, msgs: list[MessageExt]) -> None:
        """Show retried messages under their original topic, as Java's resetRetryAndNamespace does."""
        retry_topic = RETRY_PREFIX + self.group
        now = str(int(time.time() * 1000))
        for m in msgs:
            origin = m.properties.get(PROPERTY_RETRY_TOPIC)
            if origin and m.topic == retry_topic:
                m.topic = origin
            m.properties[PROPERTY_CONSUME_START_TIME] = now

    async def _call_listener(self, msgs: list[MessageExt], ctx: ConsumeContext) -> Any:
        try:
            return await call_user(self.listener, msgs, ctx)  # type: ignore[arg-type]
        except Exception:
            log.failure("consume listener failed on {n} messages of {mq}", n=len(msgs), mq=ctx.message_queue)
            return None

    async def _consume_concurrently(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if pq.dropped:
            return
        self._prepare(msgs)
        ctx = ConsumeContext(pq.mq)
        status = await self._call_listener(msgs, ctx)
        pq.last_consume = int(time.time() * 1000)
        if pq.dropped:
            return
        keep: list[MessageExt] = []
        if status is not ConsumeStatus.CONSUME_SUCCESS and self.message_model == CLUSTERING:
            for m in msgs:
                try:
                    await self.send_back(m, ctx.delay_level)
                except (MQClientError, MQBrokerError) as exc:
                    log.info("send back {id} failed, consuming it again here: {exc}", id=m.msg_id, exc=exc)
                    m.reconsume_times += 1
                    keep.append(m)
        offset = pq.remove([m for m in msgs if m not in keep])
        if not pq.dropped:  # the queue may have moved to another member during the sends back
            self.offsets.update(pq.mq, offset, increase_only=True)
        if keep:
            await self._sleep(RETRY_LOCAL_DELAY)
            await self._consume_concurrently(pq, keep)

    async def send_back(self, msg: MessageExt, delay_level: int = 0) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-delivers ``msg`` through ``%RETRY%group`` later."""
        client = self._running()
        broker = msg.broker_name
        addr = await client.find_master_addr(broker, msg.topic) if broker else msg.store_host
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=self.group,
            delayLevel=delay_level,
            originMsgId=msg.msg_id,
            originTopic=msg.topic,
            unitMode=False,
            maxReconsumeTimes=self.max_reconsume_times,
            bname=broker,
        )
        await client.call(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, java_fields(header)), 5.0)

    async def _consume_orderly(self, pq: ProcessQueue) -> None:
        """One loop per queue: messages in offset order, one batch at a time, only while locked."""
        if pq.busy:
            return
        pq.busy = True
        try:
            while not pq.dropped and (pq.locked or self.message_model == BROADCASTING):
                msgs = pq.take(self.consume_batch_size)
                if not msgs:
                    return
                self._prepare(msgs)
                ctx = ConsumeContext(pq.mq)
                status = await self._call_listener(msgs, ctx)
                pq.last_consume = int(time.time() * 1000)
                if pq.dropped:
                    return
                if status is OrderlyStatus.SUCCESS or await self._give_up(msgs):
                    offset = pq.commit()
                    if offset >= 0:
                        self.offsets.update(pq.mq, offset)
                else:
                    for m in msgs:
                        m.reconsume_times += 1
                    pq.rollback()
                    await self._sleep(ctx.suspend_seconds)
        finally:
            pq.busy = False

    async def _give_up(self, msgs: list[MessageExt]) -> bool:
        """Orderly: messages retried too often go back to the broker (and on to the DLQ)."""
        if self.message_model != CLUSTERING or any(m.reconsume_times < self.max_reconsume_times for m in msgs):
            return False
        try:
            for m in msgs:
                await self.send_back(m)
        except (MQClientError, MQBrokerError):
            return False
        return True

    async def consume_directly(self, msg: MessageExt) -> dict:
        """CONSUME_MESSAGE_DIRECTLY from mqadmin: run the listener on one message."""
        started = time.monotonic()
        mq = MessageQueue(msg.topic, msg.broker_name or "", msg.queue_id)
        self._prepare([msg])
        try:
            status = await call_user(self.listener, [msg], ConsumeContext(mq))  # type: ignore[arg-type]
            ok = status in (ConsumeStatus.CONSUME_SUCCESS, OrderlyStatus.SUCCESS)
            result, remark = ("CR_SUCCESS" if ok else "CR_LATER"), None
        except Exception as exc:
            result, remark = "CR_THROW_EXCEPTION", repr(exc)
        return {
            "autoCommit": True,
            "consumeResult": result,
            "order": self.orderly,
            "remark": remark,
            "spentTimeMills": int((time.monotonic() - started) * 1000),
        }

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the queues, store the new offsets, rebalance again."""
        for mq in [mq for mq in self.pqs if mq.topic == topic]:
            self.pqs.pop(mq).dropped = True
        await super().reset_offsets(topic, offsets)
        await self.rebalance()

    # -- orderly locks ------------------------------------------------------------------------
    async def _lock_request(self, broker: str, mqs: list[MessageQueue], code: int, oneway: bool = False) -> set[MessageQueue]:
        client = self._running()
        body = fastjson.dumps({"clientId": client.client_id, "consumerGroup": self.group, "mqSet": mq_set_json(mqs)})
        addr = await client.find_master_addr(broker, mqs[0].topic)
        request = RemotingCommand.request(code, None, body, oneway=oneway)
        if oneway:
            await client.oneway(addr, request)
            return set()
        response = await client.call(addr, request, LOCK_TIMEOUT)
        if code != RequestCode.LOCK_BATCH_MQ or not response.body:
            return set()
        return {MessageQueue.from_json(d) for d in fastjson.loads(response.body).get("lockOKMQSet") or []}

    async def _lock(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for one queue before it is consumed orderly."""
        try:
            return mq in await self._lock_request(mq.broker_name, [mq], RequestCode.LOCK_BATCH_MQ)
        except (MQClientError, MQBrokerError) as exc:
            log.info("lock {mq} failed: {exc}", mq=mq, exc=exc)
            return False

    async def _lock_all(self) -> None:
        """Renew the locks of every queue held, one LOCK_BATCH_MQ per broker."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.pqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, mqs in by_broker.items():
            try:
                ok = await self._lock_request(broker, mqs, RequestCode.LOCK_BATCH_MQ)
            except (MQClientError, MQBrokerError) as exc:
                log.info("lock renewal at {broker} failed: {exc}", broker=broker, exc=exc)
                continue
            for mq in mqs:
                pq = self.pqs.get(mq)
                if pq is not None:
                    was = pq.locked
                    pq.locked = mq in ok
                    if pq.locked:
                        pq.last_lock = int(time.time() * 1000)
                    if pq.locked and not was and pq.msgs:
                        defer.ensureDeferred(self._consume_orderly(pq))

    async def _unlock(self, mqs: list[MessageQueue], oneway: bool) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, group in by_broker.items():
            try:
                await self._lock_request(broker, group, RequestCode.UNLOCK_BATCH_MQ, oneway=oneway)
            except (MQClientError, MQBrokerError) as exc:
                log.info("unlock at {broker} failed: {exc}", broker=broker, exc=exc)


class PullConsumer(_ConsumerBase):
    """DefaultMQPullConsumer: the application picks queues and offsets and pulls itself."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        reactor: Any = None,
        message_model: str = CLUSTERING,
        offset_store_dir: str | None = None,
        suspend_timeout: float = 20.0,
        pull_timeout: float = 10.0,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        super().__init__(
            group, namesrv_addr, config, reactor, message_model, CONSUME_FROM_LAST_OFFSET, offset_store_dir, access_key, secret_key
        )
        self.suspend_timeout = suspend_timeout
        self.pull_timeout = pull_timeout

    @deferred
    async def start(self) -> None:
        client = await self._join()
        client.start()

    @deferred
    async def shutdown(self) -> None:
        """Persist the offsets held, then UNREGISTER_CLIENT."""
        client, self.client = self.client, None
        if client is not None:
            await self.offsets.persist(list(self.offsets.table))
            await client.unregister_consumer(self.group)

    @deferred
    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, fresh from the name server."""
        route = await self._running().fetch_route(topic)
        return sorted(route.subscribe_queues(topic))

    @deferred
    async def pull(
        self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*",
        expression_type: str = TAG, *, block: bool = False, timeout: float | None = None,
    ) -> PullResult:
        """Pull up to ``max_nums`` messages from ``offset``; ``block`` long-polls when none are there."""
        client = self._running()
        if mq.topic not in self.subscriptions:
            self.subscriptions[mq.topic] = SubscriptionData.build(mq.topic, "*")  # Java's subscriptionAutomatically
        sub = SubscriptionData.build(mq.topic, expression, expression_type)
        return await pull(
            client, self.group, mq, sub, offset, max_nums, suspend=block, send_subscription=True,
            suspend_timeout=self.suspend_timeout,
            timeout=timeout if timeout is not None else (self.suspend_timeout + 10 if block else self.pull_timeout),
        )

    @deferred
    async def update_offset(self, mq: MessageQueue, offset: int) -> None:
        """Remember ``offset`` as consumed; it reaches the broker with the next persist (every 5 s)."""
        self.offsets.update(mq, offset)

    @deferred
    async def fetch_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        """The committed offset (-1 when the group has none for ``mq``)."""
        if not from_store:
            return self.offsets.read_memory(mq)
        return await self.offsets.read_store(mq)

    @deferred
    async def max_offset(self, mq: MessageQueue) -> int:
        return await queue_ops.max_offset(self._running(), mq)

    @deferred
    async def min_offset(self, mq: MessageQueue) -> int:
        return await queue_ops.min_offset(self._running(), mq)

    @deferred
    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        return await queue_ops.search_offset(self._running(), mq, timestamp)

    @deferred
    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        return await queue_ops.earliest_msg_store_time(self._running(), mq)
