"""What a broker's role adds: the HA listener and SYNC_MASTER waits on a master, on a slave the
HA client, the table sync and the master address learnt from NameServer registrations."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.error import CannotListenError
from twisted.logger import Logger

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
        self.is_slave = cfg.is_slave
        self.sync_master = cfg.brokerRole == "SYNC_MASTER"
        self.master: HAMasterService | None = None
        self.client: HAClient | None = None
        self.sync: SlaveSynchronize | None = None
        self._fixed_master = False
        if self.is_slave:
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

    def start(self, ephemeral: bool = False) -> None:
        """ephemeral: the broker port was 0 (tests), so the HA port is any free one unless haListenPort is set."""
        cfg = self.ctx.config
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
        if self.client is not None and not self._fixed_master and ha_addr:
            self.client.update_master_address(ha_addr)
        if self.sync is not None and master_addr:
            self.sync.master_addr = master_addr

    def after_put(self, result: PutResult, properties: str) -> "PutResult | defer.Deferred":
        """SYNC_MASTER: hold a stored message's answer until a slave has it (Java's submitReplicaRequest)."""
        if self.master is None or not self.sync_master or result.status not in _WAITED:
            return result
        if not wait_store_msg_ok(properties):
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
