"""The broker's side of the controller (Apache 5.x's ReplicasManager): id, registration, heartbeats, roles.

Start-up: find the controller leader (CONTROLLER_GET_METADATA_INFO on each ``controllerAddr``), get a
broker id (GET_NEXT_BROKER_ID, written to ``brokerIdentity-temp``, then APPLY_BROKER_ID and
``brokerIdentity``), REGISTER_BROKER_TO_CONTROLLER, and, when the group has no master yet, ask for an
election. From then on: BROKER_HEARTBEAT to every controller, GET_REPLICA_INFO every
``syncBrokerMetadataPeriod``, the master's sync-state set checked every ``checkSyncStateSetPeriod`` and
changes sent with ALTER_SYNC_STATE_SET, and NOTIFY_BROKER_ROLE_CHANGED from the controller acted on at
once. A role change re-registers with the NameServers, so clients' routes follow the new master.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from twisted.internet import defer, task, threads
from twisted.logger import Logger

from rmqtx.broker.controller.identity import identity_files
from rmqtx.broker.ha.autoswitch import ALL_ACK, AutoSwitchHAService
from rmqtx.common.fastjson import FastjsonError, JavaSet, dumps, loads
from rmqtx.remoting import controller_headers as h
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.store.results import PutResult, PutStatus

if TYPE_CHECKING:
    from rmqtx.broker.core import BrokerCore
    from rmqtx.broker.ha.sync import SlaveSynchronize
    from rmqtx.remoting.client import RemotingClient

log = Logger(namespace="rmqtx.broker.controller")

RETRY_SECONDS = 5.0
TIMEOUT_SECONDS = 3.0


class ControllerError(Exception):
    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"controller answered {code}: {remark}")
        self.code = code


def _sync_state_set(body: bytes | None) -> tuple[set[int], int]:
    if not body:
        return set(), 0
    try:
        data = loads(body)
    except FastjsonError:
        return set(), 0
    if not isinstance(data, dict):
        return set(), 0
    return {int(x) for x in data.get("syncStateSet") or []}, int(data.get("syncStateSetEpoch") or 0)


class ReplicasManager:
    """One per broker in controller mode; owns the AutoSwitch HA service's role."""

    def __init__(self, ctx: "BrokerCore", client: "RemotingClient", reactor: Any, ha: AutoSwitchHAService,
                 sync: "SlaveSynchronize", special: Callable[[bool], None]) -> None:
        self.ctx = ctx
        self.cfg = ctx.config
        self.settings = ctx.config.controller
        self.client = client
        self.reactor = reactor
        self.ha = ha
        self.sync = sync
        self.special = special  # start (True) or stop the master-only services
        self.identity, self.temp_identity = identity_files(self.cfg.storePathRootDir, self.settings.identity_file or None)
        self.leader = ""
        self.broker_id: Optional[int] = None
        self.master_id: Optional[int] = None
        self.master_addr = ""
        self.master_epoch = 0
        self.sss: set[int] = set()
        self.sss_epoch = 0
        self.running = False
        self.stopped = False
        self.registered_namesrv = False
        self._loops: list[task.LoopingCall] = []
        self._sss_loop: task.LoopingCall | None = None
        self._retry: Any = None

    # -- life ----------------------------------------------------------------------------------------
    def start(self) -> None:
        self.ha.listeners.append(self._report_sync_state_set)
        self._attempt()

    def _attempt(self) -> None:
        self._retry = None
        if self.stopped:
            return
        defer.ensureDeferred(self._start_basic()).addErrback(self._failed)

    def _failed(self, failure: Any) -> None:
        log.warn("controller mode: start-up step failed ({e}); retrying in {s} s", e=failure.value, s=RETRY_SECONDS)
        if not self.stopped:
            self._retry = self.reactor.callLater(RETRY_SECONDS, self._attempt)

    async def stop(self) -> None:
        self.stopped = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        for loop in self._loops + ([self._sss_loop] if self._sss_loop else []):
            if loop.running:
                loop.stop()
        self._loops = []

    def _every(self, ms: int, fn: Callable[[], Any], now: bool = False) -> None:
        loop = task.LoopingCall(lambda: defer.ensureDeferred(fn()).addErrback(
            lambda f: log.info("controller mode: {e}", e=f.value)))
        loop.clock = self.reactor
        loop.start(ms / 1000.0, now=now)
        self._loops.append(loop)

    async def _start_basic(self) -> None:
        if not await self.find_leader():
            raise RuntimeError(f"no controller leader among {';'.join(self.settings.controller_addrs)}")
        for attempt in range(5):
            try:
                await self.register()
                break
            except Exception as e:  # noqa: BLE001 - retried, as Java's five tries with random sleeps
                log.warn("controller mode: registration failed: {e}", e=e)
                if attempt == 4:
                    raise
                await task.deferLater(self.reactor, random.random(), lambda: None)
        await self.heartbeat()
        if self.master_id is None and not await self.elect():
            raise RuntimeError("no master in the broker set yet")
        self.running = True
        log.info("controller mode: running as broker id {bid}, master {mid} at {addr}, epoch {epoch}",
                 bid=self.broker_id, mid=self.master_id, addr=self.master_addr, epoch=self.master_epoch)
        self._every(self.settings.heartbeat_interval, self.heartbeat)
        self._every(self.settings.sync_broker_metadata_period, self.sync_broker_metadata)
        self._every(self.settings.sync_controller_metadata_period, self.find_leader)
        self._every(1000, self._ask_master_ha_address)

    # -- requests ------------------------------------------------------------------------------------
    async def _ask(self, code: int, header: Any = None, body: bytes | None = None, addr: str | None = None,
                   ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        request = RemotingCommand.request(code, header.to_fields() if header is not None else None, body or b"")
        resp = await self.client.invoke(addr or self.leader, request, timeout=TIMEOUT_SECONDS)
        if resp.code not in ok:
            if resp.code == ResponseCode.CONTROLLER_NOT_LEADER:
                self.reactor.callLater(0, lambda: defer.ensureDeferred(self.find_leader()))
            raise ControllerError(resp.code, resp.remark)
        return resp

    async def find_leader(self) -> bool:
        for addr in self.settings.controller_addrs:
            try:
                resp = await self.client.invoke(addr, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO),
                                                timeout=TIMEOUT_SECONDS)
            except Exception:  # noqa: BLE001 - that controller is down: try the next
                continue
            leader = (resp.ext_fields or {}).get("controllerLeaderAddress")
            if resp.code == ResponseCode.SUCCESS and leader:
                if leader != self.leader:
                    log.info("controller mode: controller leader is {addr}", addr=leader)
                self.leader = leader
                return True
        return False

    async def register(self) -> None:
        """Java's register(): the id files decide where the exchange resumes."""
        cfg = self.cfg
        await threads.deferToThread(self._read_identity)
        for f in (self.identity, self.temp_identity):
            if f.loaded and (f.cluster != cfg.brokerClusterName or f.name != cfg.brokerName):
                raise RuntimeError(f"{f.path} names {f.cluster}/{f.name}, broker.conf {cfg.brokerClusterName}/"
                                   f"{cfg.brokerName}: fix the config or remove the file")
        if not self.identity.loaded:
            if not self.temp_identity.loaded:
                resp = await self._ask(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                       h.GetNextBrokerIdRequestHeader(cfg.brokerClusterName, cfg.brokerName))
                next_id = int((resp.ext_fields or {})["nextBrokerId"])
                code = f"{cfg.broker_addr};{int(time.time() * 1000)}"
                await threads.deferToThread(self.temp_identity.save, cfg.brokerClusterName, cfg.brokerName, next_id, code)
            try:
                await self._ask(RequestCode.CONTROLLER_APPLY_BROKER_ID, h.ApplyBrokerIdRequestHeader(
                    cfg.brokerClusterName, cfg.brokerName, self.temp_identity.broker_id, self.temp_identity.check_code))
            except ControllerError:
                await threads.deferToThread(self.temp_identity.clear)
                raise
            bid = self.temp_identity.broker_id
            assert bid is not None
            await threads.deferToThread(self._promote_identity, bid)
        self.broker_id = self.identity.broker_id
        self.ha.local_id = self.broker_id
        resp = await self._ask(RequestCode.CONTROLLER_REGISTER_BROKER, h.RegisterBrokerToControllerRequestHeader(
            cfg.brokerClusterName, cfg.brokerName, self.broker_id, cfg.broker_addr, int(time.time() * 1000)))
        head = h.RegisterBrokerToControllerResponseHeader.from_command(resp)
        sss, _ = _sync_state_set(resp.body)
        if head.masterBrokerId is None:
            return
        self._apply_role(head.masterBrokerId, head.masterAddress or "", head.masterEpoch or 0,
                         head.syncStateSetEpoch or 0, sss)

    def _read_identity(self) -> None:
        self.identity.read()
        if not self.identity.loaded:
            self.temp_identity.read()

    def _promote_identity(self, bid: int) -> None:
        self.identity.save(self.cfg.brokerClusterName, self.cfg.brokerName, bid)
        self.temp_identity.clear()

    async def elect(self) -> bool:
        cfg = self.cfg
        resp = await self._ask(RequestCode.CONTROLLER_ELECT_MASTER, h.ElectMasterRequestHeader(
            cfg.brokerClusterName, cfg.brokerName, self.broker_id, False, int(time.time() * 1000)),
            ok=(ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST))
        head = h.ElectMasterResponseHeader.from_command(resp)
        if head.masterBrokerId is None or not head.masterAddress:
            return False
        sss, _ = _sync_state_set(resp.body)
        self._apply_role(head.masterBrokerId, head.masterAddress, head.masterEpoch or 0, head.syncStateSetEpoch or 0, sss)
        return True

    async def heartbeat(self) -> None:
        cfg, s = self.cfg, self.settings
        if self.broker_id is None:
            return
        header = h.BrokerHeartbeatRequestHeader(
            cfg.brokerClusterName, cfg.broker_addr, cfg.brokerName, self.broker_id, self.ha.last_epoch,
            self.ctx.store.max_phy_offset, self.confirm_offset(), s.heartbeat_timeout_ms, s.election_priority)
        for addr in s.controller_addrs:
            request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, header.to_fields(), oneway=True)
            self.client.invoke_oneway(addr, request).addErrback(lambda f: None)

    def confirm_offset(self) -> int:
        """Java's getConfirmOffset: a master waiting for no one (not allAckInSyncStateSet, or alone in its set)
        confirms everything it has; otherwise the lowest ack of the set (a slave: what its master sent)."""
        store = self.ctx.store
        if self.is_master and (not self.settings.all_ack_in_sync_state_set or len(self.ha.sync_state_set) <= 1):
            return store.max_phy_offset
        return min(self.ha.confirm_offset, store.max_phy_offset)

    async def sync_broker_metadata(self) -> None:
        """GET_REPLICA_INFO: a newer master epoch means a role change we were not told of."""
        try:
            resp = await self._ask(RequestCode.CONTROLLER_GET_REPLICA_INFO, h.GetReplicaInfoRequestHeader(self.cfg.brokerName))
        except ControllerError as e:
            if e.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                await self.register()
            raise
        head = h.GetReplicaInfoResponseHeader.from_command(resp)
        sss, sss_epoch = _sync_state_set(resp.body)
        epoch = head.masterEpoch or 0
        if epoch > self.master_epoch:
            if head.masterAddress and head.masterBrokerId is not None:
                self._apply_role(head.masterBrokerId, head.masterAddress, epoch, sss_epoch, sss)
            else:
                await self.elect()
        elif epoch == self.master_epoch and self.is_master:
            self._change_sync_state_set(sss, sss_epoch)

    async def check_sync_state_set(self) -> None:
        new = self.ha.maybe_shrink()
        if self.broker_id is not None:
            new.add(self.broker_id)
        if new != self.sss:
            await self._alter(new)

    def _report_sync_state_set(self, new: set[int]) -> None:
        if self.is_master:
            defer.ensureDeferred(self._alter(new)).addErrback(
                lambda f: log.warn("controller mode: ALTER_SYNC_STATE_SET failed: {e}", e=f.value))

    async def _alter(self, new: set[int]) -> None:
        if self.broker_id is not None:
            new = set(new) | {self.broker_id}
        body = dumps({"syncStateSet": JavaSet(sorted(new)), "syncStateSetEpoch": self.sss_epoch})
        resp = await self._ask(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, h.AlterSyncStateSetRequestHeader(
            self.cfg.brokerName, self.broker_id, self.master_epoch, int(time.time() * 1000)), body)
        sss, epoch = _sync_state_set(resp.body)
        self._change_sync_state_set(sss, epoch)

    async def _ask_master_ha_address(self) -> None:
        """A slave without its master's HA address registers again: the NameServer's answer names it."""
        ha_client = self.ha.client
        if not self.is_master and ha_client is not None and not ha_client.connected and self.registered_namesrv:
            self.ctx.registrar.register_all()

    # -- roles ---------------------------------------------------------------------------------------
    @property
    def is_master(self) -> bool:
        return self.ha.is_master

    def on_notify(self, request: RemotingCommand) -> RemotingCommand:
        """NOTIFY_BROKER_ROLE_CHANGED from the controller after an election."""
        head = h.NotifyBrokerRoleChangedRequestHeader.from_command(request)
        sss, sss_epoch = _sync_state_set(request.body)
        if head.masterBrokerId is not None and head.masterEpoch is not None:
            self._apply_role(head.masterBrokerId, head.masterAddress or "", head.masterEpoch,
                             head.syncStateSetEpoch or sss_epoch, sss)
        return request.make_response(ResponseCode.SUCCESS)

    def _apply_role(self, master_id: int, master_addr: str, epoch: int, sss_epoch: int, sss: set[int]) -> None:
        if epoch <= self.master_epoch:
            return
        if master_id == self.broker_id:
            self.change_to_master(epoch, sss_epoch, sss)
        else:
            self.change_to_slave(master_addr, epoch, master_id)

    def _change_sync_state_set(self, sss: set[int], epoch: int) -> None:
        if epoch > self.sss_epoch:
            log.info("controller mode: sync-state set {old} -> {new} (epoch {e})", old=sorted(self.sss),
                     new=sorted(sss), e=epoch)
            self.sss_epoch, self.sss = epoch, set(sss)
            self.ha.set_sync_state_set(set(sss))

    def change_to_master(self, epoch: int, sss_epoch: int, sss: set[int]) -> None:
        log.info("controller mode: becoming master, epoch {epoch}", epoch=epoch)
        was_master = self.is_master and self.master_id == self.broker_id
        self.master_epoch = epoch
        self._change_sync_state_set(sss, sss_epoch)
        if was_master:
            self.ha.change_to_master_again(epoch)
        else:
            self.sync.master_addr = None
            self.sync.stop()
            self.ha.change_to_master(epoch)
            self.cfg.update(brokerId=0, brokerRole="SYNC_MASTER")
            self.ctx.store.set_slave(False)
            self.special(True)
            self.master_addr, self.master_id = self.cfg.broker_addr, self.broker_id
            if self._sss_loop is None or not self._sss_loop.running:
                self._sss_loop = task.LoopingCall(lambda: defer.ensureDeferred(self.check_sync_state_set()).addErrback(
                    lambda f: log.info("controller mode: sync-state set check: {e}", e=f.value)))
                self._sss_loop.clock = self.reactor
                self._sss_loop.start(self.settings.check_sync_state_set_period / 1000.0, now=False)
        self.ctx.topics.data_version.next()
        self.reactor.callLater(0, lambda: defer.ensureDeferred(self.check_sync_state_set()).addErrback(lambda f: None))
        self._register_namesrv()

    def change_to_slave(self, master_addr: str, epoch: int, master_id: int) -> None:
        log.info("controller mode: becoming slave of {mid} at {addr}, epoch {epoch}", mid=master_id, addr=master_addr,
                 epoch=epoch)
        self.master_epoch = epoch
        if master_id == self.master_id and not self.is_master and self.ha.client is not None:
            self._register_namesrv()
            return
        if self._sss_loop is not None and self._sss_loop.running:
            self._sss_loop.stop()
        self.cfg.update(brokerRole="SLAVE", brokerId=self.broker_id)
        self.ctx.store.set_slave(True)
        self.special(False)
        self.master_addr, self.master_id = master_addr, master_id
        self.sync.master_addr = master_addr
        if not self.sync.running:
            self.sync.start()
        self.ha.change_to_slave(epoch, self.broker_id if self.broker_id is not None else -1)
        self._register_namesrv()

    def _register_namesrv(self) -> None:
        """Register with the new role at once; the first time also starts the periodic registration."""
        if not self.cfg.namesrv_addrs:
            return
        registrar = self.ctx.registrar
        if not self.registered_namesrv:
            self.registered_namesrv = True
            registrar.start()
        else:
            registrar.register_all()

    # -- SYNC sends ----------------------------------------------------------------------------------
    def after_put(self, result: PutResult) -> "PutResult | defer.Deferred":
        """Java's controller-mode SYNC send: minInSyncReplicas first, then inSyncReplicas or the whole set."""
        s = self.settings
        if not self.is_master:
            return result
        if self.ha.in_sync_replicas() < s.min_in_sync_replicas:
            result.status = PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
            return result
        acks = ALL_ACK if s.all_ack_in_sync_state_set else s.in_sync_replicas
        return self.ha.wait_for_replicas(result, acks)

    def status(self) -> dict:
        return {"brokerId": self.broker_id, "masterBrokerId": self.master_id, "masterAddress": self.master_addr,
                "masterEpoch": self.master_epoch, "syncStateSet": sorted(self.sss), "syncStateSetEpoch": self.sss_epoch,
                "controllerLeader": self.leader, **self.ha.status()}
