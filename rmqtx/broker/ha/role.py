"""What a broker's role adds: the HA listener and SYNC_MASTER waits on a master, on a slave the
HA client, the table sync and the master address learnt from NameServer registrations."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.error import CannotListenError
from twisted.logger import Logger

from rmqtx.broker.controller.replicas import ReplicasManager
from rmqtx.broker.ha.autoswitch import AutoSwitchHAService
from rmqtx.broker.ha.master import HAMasterService
from rmqtx.broker.ha.slave import HAClient
from rmqtx.broker.ha.sync import SlaveSynchronize
from rmqtx.store.results import PutResult, PutStatus

if TYPE_CHECKING:
    from rmqtx.broker.core import BrokerCore
    from rmqtx.remoting.client import RemotingClient
    from rmqtx.remoting.command import RemotingCommand

log = Logger(namespace="rmqtx.broker.ha")

_WAITED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT)


def wait_store_msg_ok(properties: str) -> bool:
    """Java's isWaitStoreMsgOK: WAIT absent or "true" (any case)."""
    if "WAIT\x01" not in properties:
        return True
    for item in properties.split("\x02"):
        key, _, value = item.partition("\x01")
        if key == "WAIT":
            return value.lower() == "true"
    return True


class HARole:
    """Created for every broker; its parts depend on brokerRole."""

    def __init__(self, ctx: "BrokerCore", client: "RemotingClient", reactor: Any) -> None:
        self.ctx = ctx
        self.reactor = reactor
        cfg = ctx.config
        self.sync_master = cfg.brokerRole == "SYNC_MASTER"
        self.master: HAMasterService | None = None
        self.client: HAClient | None = None
        self.sync: SlaveSynchronize | None = None
        self.auto: AutoSwitchHAService | None = None
        self.replicas: ReplicasManager | None = None
        self.pop_revive: Any = None  # set by build_context: POP's revive runs on a master only
        self._fixed_master = False
        if cfg.controller.enabled:
            self._controller_mode(client)
        elif self.is_slave:
            self.client = HAClient(ctx.store, reactor)
            self.sync = SlaveSynchronize(ctx, client, reactor)
            addr = cfg.ha.master_address
            if addr and len(addr) >= 6:  # Java ignores shorter values and waits for the NameServer's answer
                self.client.update_master_address(addr)
                self._fixed_master = True
        else:
            self.master = HAMasterService(ctx.store, reactor, self.sync_master)
            if self.sync_master:  # a commit's put waits as a send's does (END_TRANSACTION)
                ctx.transactions.after_put = lambda d, properties: wait_for_replica(self, d, properties)

    @property
    def is_slave(self) -> bool:
        return self.ctx.config.is_slave

    def _controller_mode(self, client: "RemotingClient") -> None:
        """5.x controller mode: the broker waits as a fenced slave until the controller gives it a role."""
        ctx, cfg = self.ctx, self.ctx.config
        cfg.update(brokerRole="SLAVE", brokerId=-1)
        ctx.store.set_slave(True)
        self.sync_master = True  # every SYNC send asks after_put; a slave's store refuses the put first
        epoch_path = cfg.controller.epoch_file or os.path.join(cfg.storePathRootDir, "epochFileCheckpoint")
        self.auto = AutoSwitchHAService(ctx.store, self.reactor, cfg.controller, epoch_path)
        self.sync = SlaveSynchronize(ctx, client, self.reactor)
        self.replicas = ReplicasManager(ctx, client, self.reactor, self.auto, self.sync, self._special_services)
        self.auto.store_confirm_offset = self.replicas.confirm_offset
        if not cfg.controller.read_uncommitted:  # consumers see only what the sync-state set has
            ctx.store.set_confirm_gate(self.replicas.confirm_offset)
        ctx.transactions.after_put = lambda d, properties: wait_for_replica(self, d, properties)

    def _special_services(self, master: bool) -> None:
        """Java's changeSpecialServiceStatus: delay levels, timer, transaction checks and POP revive run on the master."""
        ctx = self.ctx
        parts: list[Any] = [ctx.schedule, ctx.timer, ctx.transactions]
        if self.pop_revive is not None:
            parts.append(self.pop_revive)
        for part in parts:
            try:
                if master:
                    part.start()
                elif part is ctx.timer:
                    part.follow()  # links what the new master links, to deliver if this broker takes over again
                else:
                    part.stop()
            except Exception as e:  # noqa: BLE001 - one part failing must not stop the role change
                log.error("controller mode: cannot {what} {part}: {e}", what="start" if master else "stop",
                          part=type(part).__name__, e=e)

    def before_put(self, properties: str) -> PutResult | None:
        """Controller mode: Java refuses a SYNC send before storing it when the sync-state set is below minInSyncReplicas."""
        if self.replicas is None or self.auto is None or not self.auto.is_master or not wait_store_msg_ok(properties):
            return None
        if self.auto.in_sync_replicas() < self.ctx.config.controller.min_in_sync_replicas:
            return PutResult(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH)
        return None

    def start(self, ephemeral: bool = False) -> None:
        """ephemeral: the broker port was 0 (tests), so the HA port is any free one unless haListenPort is set."""
        cfg = self.ctx.config
        if self.auto is not None and self.replicas is not None:
            explicit = cfg.ha.listen_port > 0
            port = 0 if ephemeral and not explicit else cfg.ha_listen_port
            self.auto.load()
            self.auto.start(port, cfg.listenAddress)  # CannotListenError stops start-up: no replication without it
            cfg.update(ha=dataclasses.replace(cfg.ha, listen_port=self.auto.listen_port))
            cfg.list_setting("haListenPort", str(self.auto.listen_port))
            self.replicas.start()
            return
        if self.master is not None:
            explicit = cfg.ha.listen_port > 0
            port = 0 if ephemeral and not explicit else cfg.ha_listen_port
            try:
                self.master.start(port, cfg.listenAddress)
            except CannotListenError as e:
                # Java's broker would not start; here the broker serves on, without slaves (SYNC_MASTER
                # sends then answer SLAVE_NOT_AVAILABLE), and says so loudly.
                log.error("HA: cannot listen on {port} ({why}); no slave can replicate from this master",
                          port=port, why=e.socketError)
                return
            cfg.update(ha=dataclasses.replace(cfg.ha, listen_port=self.master.listen_port))  # REGISTER_BROKER's
            cfg.list_setting("haListenPort", str(self.master.listen_port))
        if self.client is not None:
            cfg.list_setting("haListenPort", str(cfg.ha_listen_port), replace=False)  # GET_BROKER_CONFIG shows it, as Java
            self.client.start()
        if self.sync is not None:
            self.sync.start()

    async def stop(self) -> None:
        if self.replicas is not None:
            await self.replicas.stop()
        if self.auto is not None:
            await self.auto.stop()
        if self.sync is not None:
            self.sync.stop()
        if self.client is not None:
            self.client.stop()
        if self.master is not None:
            await self.master.stop()

    def on_registered(self, response: "RemotingCommand") -> None:
        """A NameServer's REGISTER_BROKER answer names the master (broker and HA address) to a slave."""
        if not self.is_slave or response is None:
            return
        fields = response.ext_fields or {}
        ha_addr, master_addr = fields.get("haServerAddr"), fields.get("masterAddr")
        if self.auto is not None:
            if ha_addr:
                self.auto.update_master_ha_address(ha_addr)
            if self.sync is not None and master_addr:
                self.sync.master_addr = master_addr
            return
        if self.client is not None and not self._fixed_master and ha_addr:
            self.client.update_master_address(ha_addr)
        if self.sync is not None and master_addr:
            self.sync.master_addr = master_addr

    def after_put(self, result: PutResult, properties: str) -> "PutResult | defer.Deferred":
        """SYNC_MASTER: hold a stored message's answer until a slave has it (Java's submitReplicaRequest)."""
        if not self.sync_master or result.status not in _WAITED or not wait_store_msg_ok(properties):
            return result
        if self.replicas is not None:
            return self.replicas.after_put(result)
        if self.master is None:
            return result
        return self.master.wait_for_slave(result)


def wait_for_replica(role: HARole, d: defer.Deferred, properties: str) -> defer.Deferred:
    """The send path's one hook: on a SYNC_MASTER the put's Deferred also waits for the slave."""
    if not role.sync_master:
        return d
    return d.addCallback(role.after_put, properties)


def disk_util(store_root: str, commit_log_dir: str) -> str:
    """Java's diskUtil() for remarks: used fractions of the commit log, consume queue and index partitions."""

    def used(path: str) -> float:
        if not os.path.exists(path):
            return -1.0
        st = os.statvfs(path)
        total = st.f_blocks * st.f_frsize
        if total <= 0:
            return -1.0
        used_b = total - st.f_bfree * st.f_frsize
        entire = used_b + st.f_bavail * st.f_frsize
        pct = used_b * 100 // entire + (1 if used_b * 100 % entire else 0)
        return pct / 100.0

    return "CL: %5.2f CQ: %5.2f INDEX: %5.2f" % (
        min(100.0, used(commit_log_dir)), used(os.path.join(store_root, "consumequeue")), used(os.path.join(store_root, "index")))
