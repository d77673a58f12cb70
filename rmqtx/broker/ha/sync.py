"""A slave's copy of the master's tables (Java's SlaveSynchronize), fetched every 10 s.

Topics and subscription groups are replaced when the master's data version differs, consumer
offsets are merged per topic@group, the delay offsets file is overwritten and reloaded. The timer's
checkpoint (how far the master delivered and linked) is read every second, as Java reads it more often.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import task
from twisted.logger import Logger

from rmqtx.broker.groups import SubscriptionGroupConfig
from rmqtx.broker.jsonfiles import loads_fastjson
from rmqtx.broker.topics import DataVersion
from rmqtx.common.topic_config import TopicConfig
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.store.timer import CHECKPOINT_WIRE

if TYPE_CHECKING:
    from rmqtx.broker.core import BrokerCore
    from rmqtx.remoting.client import RemotingClient

log = Logger(namespace="rmqtx.broker.ha.sync")

#: Java: first run 3 s after start, then every 10 s.
FIRST_SECONDS = 3.0
PERIOD_SECONDS = 10.0
TIMEOUT_SECONDS = 3.0
#: Java reads it every 3 s; each second here: a slave that takes over repeats what the master delivered since.
TIMER_PERIOD_SECONDS = 1.0


def _version(data: dict) -> tuple[int, int]:
    v = data.get("dataVersion") or {}
    return int(v.get("counter", 0)), int(v.get("timestamp", 0))


class SlaveSynchronize:
    def __init__(self, ctx: "BrokerCore", client: "RemotingClient", reactor: Any) -> None:
        self.ctx = ctx
        self.client = client
        self.reactor = reactor
        self.master_addr: str | None = None
        self.rounds = 0
        self._loop: task.LoopingCall | None = None
        self._first: Any = None
        self._timer_loop: task.LoopingCall | None = None
        self._timer_refused: int | None = None

    def start(self) -> None:
        self._loop = task.LoopingCall(self.sync_all)
        self._loop.clock = self.reactor
        self._first = self.reactor.callLater(FIRST_SECONDS, self._loop.start, PERIOD_SECONDS, True)
        if self.ctx.config.timer.timerWheelEnable:
            self._timer_loop = task.LoopingCall(self.sync_timer_checkpoint)
            self._timer_loop.clock = self.reactor
            self._timer_loop.start(TIMER_PERIOD_SECONDS, now=False)

    @property
    def running(self) -> bool:
        """Started and not stopped (controller mode starts and stops it at each role change)."""
        return (self._first is not None and self._first.active()) or (self._loop is not None and self._loop.running)

    def stop(self) -> None:
        if self._first is not None and self._first.active():
            self._first.cancel()
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._timer_loop is not None and self._timer_loop.running:
            self._timer_loop.stop()

    async def _get(self, code: int) -> bytes | None:
        addr = self.master_addr
        if not addr:
            return None
        try:
            resp = await self.client.invoke(addr, RemotingCommand.request(code), timeout=TIMEOUT_SECONDS)
        except Exception as e:  # noqa: BLE001 - a master that is down is normal for a slave
            log.info("slave sync {code} from {addr} failed: {e}", code=code, addr=addr, e=e)
            return None
        if resp.code != ResponseCode.SUCCESS:
            log.warn("slave sync {code}: master answered {rc} {remark}", code=code, rc=resp.code, remark=resp.remark)
            return None
        return resp.body or b""

    def sync_all(self) -> Any:
        from twisted.internet import defer

        return defer.ensureDeferred(self._sync_all()).addErrback(lambda f: log.failure("slave sync failed", f))

    async def _sync_all(self) -> None:
        await self.sync_topics()
        await self.sync_offsets()
        await self.sync_delay_offsets()
        await self.sync_groups()
        self.rounds += 1

    async def sync_topics(self) -> None:
        body = await self._get(RequestCode.GET_ALL_TOPIC_CONFIG)
        if not body:
            return
        data = loads_fastjson(body)
        topics = self.ctx.topics
        if _version(data) == (topics.data_version.counter, topics.data_version.timestamp):
            return
        topics.table.clear()
        for name, raw in (data.get("topicConfigTable") or {}).items():
            topics.table[name] = TopicConfig.from_json(raw)
        topics.data_version = DataVersion(*_version(data))
        topics.persist()
        log.info("slave sync: {n} topics from master", n=len(topics.table))

    async def sync_offsets(self) -> None:
        body = await self._get(RequestCode.GET_ALL_CONSUMER_OFFSET)
        if not body:
            return
        offsets = self.ctx.offsets
        for key, queues in (loads_fastjson(body).get("offsetTable") or {}).items():
            offsets.table[key] = {int(q): int(o) for q, o in queues.items()}
        offsets.persist(force=True)

    async def sync_delay_offsets(self) -> None:
        body = await self._get(RequestCode.GET_ALL_DELAY_OFFSET)
        if not body:
            return
        schedule = self.ctx.schedule
        data = loads_fastjson(body)
        schedule.offsets = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}
        schedule.file.save(schedule.to_json())

    async def sync_groups(self) -> None:
        body = await self._get(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        if not body:
            return
        data = loads_fastjson(body)
        groups = self.ctx.groups
        if _version(data) == (groups.data_version.counter, groups.data_version.timestamp):
            return
        groups.table.clear()
        for name, raw in (data.get("subscriptionGroupTable") or {}).items():
            groups.table[name] = SubscriptionGroupConfig.from_json(raw)
        groups.data_version = DataVersion(*_version(data))
        groups.persist()

    def sync_timer_checkpoint(self) -> Any:
        from twisted.internet import defer

        return defer.ensureDeferred(self._sync_timer_checkpoint()).addErrback(
            lambda f: log.failure("slave sync of the timer checkpoint failed", f))

    async def _sync_timer_checkpoint(self) -> None:
        timer, addr = self.ctx.timer, self.master_addr
        if not timer.following or not addr:
            return
        try:
            resp = await self.client.invoke(addr, RemotingCommand.request(RequestCode.GET_TIMER_CHECK_POINT),
                                            timeout=TIMEOUT_SECONDS)
        except Exception:  # noqa: BLE001 - a master that is down is normal for a slave; sync_all says so
            return
        if resp.code != ResponseCode.SUCCESS or len(resp.body or b"") < CHECKPOINT_WIRE.size:
            if resp.code != self._timer_refused:  # a 4.x master (code 3) or one with the wheel off: said once
                self._timer_refused = resp.code
                log.info("slave sync: the master has no timer checkpoint ({rc} {remark}); a promoted slave "
                         "delivers timer messages from its own read time", rc=resp.code, remark=resp.remark)
            if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and self._timer_loop is not None:
                self._timer_loop.stop()  # a 4.x master logs each request it does not know: asked no more
            return
        self._timer_refused = None
        last_read_time_ms, _, _, master_queue_offset = CHECKPOINT_WIRE.unpack_from(resp.body)[:4]
        timer.follow_master(last_read_time_ms, master_queue_offset)
