"""Admin codes of RocketMQ 5.3 around POP and the timer that 4.9.8 lacks.

POP_ROLLBACK (200056): mqadmin's exportPopRecord; Java moves POP records from its RocksDB store back to
the file store, and with that store off (its default, and rmqtx keeps POP state in files only) answers
SUCCESS having nothing to move. GET_ALL_MESSAGE_REQUEST_MODE (402), GET_TIMER_CHECK_POINT (60) and
GET_TIMER_METRICS (61): what a 5.x slave reads from its master to follow POP modes and the timer.

The 5.x mqadmin's broker commands: the cold-read flow control table (2001-2003) holds per-group
thresholds as Java's ColdDataCgCtrService does, in memory; with ``coldDataFlowControlEnable`` off (Java's
default, and rmqtx has no cold-read control) Java keeps and reports them without acting on them, which
is what rmqtx does. GET_BROKER_EPOCH_CACHE (1007) answers the epoch list in controller mode and,
outside it, Java's refusal. RESET_MASTER_FLUSH_OFFSET (908): Java records the offset
on a slave for controller-mode truncation only, so outside controller mode it is SUCCESS doing nothing.
GET_BROKER_HA_STATUS (907): Java's HARuntimeInfo from rmqtx's HA master or slave (mqadmin haStatus).
SET_COMMITLOG_READ_MODE (2004): the kernel's readahead on the commit log's mappings, switched as Java does.
EXPORT_ROCKSDB_CONFIG_TO_JSON (355) and CHECK_ROCKSDB_CQ_WRITE_PROGRESS (354): Java's answers for a broker
whose metadata and consume queues are files, not RocksDB (its default, and rmqtx's only store);
SWITCH_TIMER_ENGINE (5001): Java's refusal for a broker started without ``timerUseRocksDB``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.processors.admin_bodies import ok
from rmqtx.common import fastjson
from rmqtx.common.properties import parse_properties
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.timer import CHECKPOINT_WIRE, TimerFiles

if TYPE_CHECKING:
    from rmqtx.broker.ha.autoswitch import AutoSwitchHAService

LONG = re.compile(r"[+-]?[0-9]{1,18}")
#: MessageStoreConfig.haMaxGapNotInSync: a slave further behind than this is not in sync.
HA_MAX_GAP_NOT_IN_SYNC = 256 * 1024 * 1024
#: The ext field of SET_COMMITLOG_READ_MODE and its two values (LibC.MADV_NORMAL, LibC.MADV_RANDOM).
READ_AHEAD_MODE = "READ_AHEAD_MODE"
MADV_NORMAL, MADV_RANDOM = 0, 1
#: CheckRocksdbCqWriteResult.CheckStatus.CHECK_IN_PROGRESS
CHECK_IN_PROGRESS = 2
#: BrokerConfig's cgColdReadThreshold and globalColdReadThreshold defaults (bytes), as Java reports them.
CG_COLD_READ_THRESHOLD = 3 * 1024 * 1024
GLOBAL_COLD_READ_THRESHOLD = 100 * 1024 * 1024


class Admin5xProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        #: consumer group -> cold-read threshold set with updateColdDataFlowCtrGroupConfig
        self.cold_thresholds: dict[str, int] = {}

    def table(self) -> dict:
        return {
            RequestCode.POP_ROLLBACK: self.pop_rollback,
            RequestCode.GET_ALL_MESSAGE_REQUEST_MODE: self.all_request_modes,
            RequestCode.GET_TIMER_CHECK_POINT: self.timer_checkpoint,
            RequestCode.GET_TIMER_METRICS: self.timer_metrics,
            RequestCode.UPDATE_COLD_DATA_FLOW_CTR_CONFIG: self.update_cold_config,
            RequestCode.REMOVE_COLD_DATA_FLOW_CTR_CONFIG: self.remove_cold_config,
            RequestCode.GET_COLD_DATA_FLOW_CTR_INFO: self.cold_info,
            RequestCode.GET_BROKER_EPOCH_CACHE: self.epoch_cache,
            RequestCode.RESET_MASTER_FLUSH_OFFSET: self.reset_master_flush_offset,
            RequestCode.GET_BROKER_HA_STATUS: self.ha_status,
            RequestCode.SET_COMMITLOG_READ_MODE: self.set_read_ahead_mode,
            RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS: self.check_rocksdb_cq,
            RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON: self.export_rocksdb_config,
            RequestCode.SWITCH_TIMER_ENGINE: self.switch_timer_engine,
        }

    def pop_rollback(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return ok(request)

    def all_request_modes(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        modes = self.ctx.pop.modes.table
        body = {"messageRequestModeMap": fastjson.JavaMap({t: fastjson.JavaMap(g) for t, g in modes.items()})}
        return ok(request, fastjson.dumps(body))

    def _wheel(self) -> TimerFiles | None:
        timer = self.ctx.timer
        if timer is None or not timer.cfg.timerWheelEnable or timer.files is None:
            return None
        return timer.files

    def timer_checkpoint(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        files = self._wheel()
        if files is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        return ok(request, CHECKPOINT_WIRE.pack(*files.check.values[:7]))

    def timer_metrics(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        files = self._wheel()
        if files is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
        return ok(request, files.metrics.encode().encode("utf-8"))


    def update_cold_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Body: ``group=threshold`` properties; an entry that is not a number is skipped, as Java logs and skips it."""
        for group, value in parse_properties((request.body or b"").decode("utf-8", "replace")).items():
            if LONG.fullmatch(value):  # Long.valueOf's digits
                self.cold_thresholds[group] = int(value)
        return ok(request)

    def remove_cold_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Body: the group's name."""
        if request.body:
            self.cold_thresholds.pop(request.body.decode("utf-8", "replace"), None)
        return ok(request)

    def cold_info(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Java's JSONObject of the tables: no group has read cold data (runtimeTable stays empty)."""
        info = fastjson.JavaMap({
            "runtimeTable": fastjson.JavaMap(),
            "configTable": fastjson.JavaMap(self.cold_thresholds),
            "cgColdReadThreshold": CG_COLD_READ_THRESHOLD,
            "globalColdReadThreshold": GLOBAL_COLD_READ_THRESHOLD,
            "globalAcc": 0,
        })
        return ok(request, fastjson.dumps(info))

    def epoch_cache(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """EpochEntryCache of a broker in controller mode (mqadmin getBrokerEpoch)."""
        auto, cfg = self.ctx.ha.auto, self.ctx.config
        if auto is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")
        entries = [{"endOffset": e.end, "epoch": e.epoch, "startOffset": e.start} for e in auto.epochs.entries]
        body = {"brokerId": cfg.brokerId, "brokerName": cfg.brokerName, "clusterName": cfg.brokerClusterName,
                "epochList": entries, "maxOffset": self.ctx.store.max_phy_offset}
        return ok(request, fastjson.dumps(body))

    def reset_master_flush_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return ok(request)


    def ha_status(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """HARuntimeInfo: a master's slave connections, or a slave's view of its master."""
        ha, store = self.ctx.ha, self.ctx.store
        put_where = store.max_phy_offset
        client_info: dict = {"activated": False, "lastReadTimestamp": 0, "lastWriteTimestamp": 0, "masterFlushOffset": 0,
                             "maxOffset": 0, "transferredByteInSecond": 0}
        connections = []
        auto = ha.auto
        if auto is not None:  # controller mode: the AutoSwitch HA links
            return ok(request, fastjson.dumps(_auto_switch_status(auto, put_where, client_info)))
        if ha.is_slave:
            client_link = ha.client.conn if ha.client is not None else None
            if ha.client is not None and ha.client.master_addr:
                client_info["masterAddr"] = ha.client.master_addr
            client_info["maxOffset"] = put_where
            if client_link is not None:
                client_info["lastReadTimestamp"], client_info["lastWriteTimestamp"] = client_link.last_read, client_link.last_write
            info = {"haClientRuntimeInfo": dict(sorted(client_info.items())), "haConnectionInfo": [],
                    "inSyncSlaveNums": 0, "master": False, "masterCommitLogMaxOffset": 0}
            return ok(request, fastjson.dumps(info))
        for link in sorted(ha.master.connections if ha.master is not None else (), key=lambda c: c.peer):
            in_sync = put_where - link.slave_ack_offset < HA_MAX_GAP_NOT_IN_SYNC
            connections.append({"addr": link.peer, "diff": put_where - link.slave_ack_offset, "inSync": in_sync,
                                "slaveAckOffset": link.slave_ack_offset, "transferFromWhere": link.next_transfer,
                                "transferredByteInSecond": 0})
        info = {"haClientRuntimeInfo": client_info, "haConnectionInfo": connections,
                "inSyncSlaveNums": sum(1 for c in connections if c["inSync"]), "master": True,
                "masterCommitLogMaxOffset": put_where}
        return ok(request, fastjson.dumps(info))

    def set_read_ahead_mode(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        fields = request.ext_fields
        if not fields:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode param error")
        try:
            mode = int(fields.get(READ_AHEAD_MODE) or "")
        except ValueError:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode failed")
        if mode not in (MADV_NORMAL, MADV_RANDOM):
            return request.make_response(ResponseCode.INVALID_PARAMETER, "set commitlog readahead mode param value error")
        self.ctx.store.commitlog.queue.set_readahead(mode == MADV_NORMAL)
        return request.make_response(ResponseCode.SUCCESS, f"set commitlog readahead mode success, mode: {mode}")

    def check_rocksdb_cq(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Java answers at once and checks later, logging the result; on a file store there is nothing to check."""
        return ok(request, fastjson.dumps({"checkStatus": CHECK_IN_PROGRESS}))

    def export_rocksdb_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Java exports only tables kept in RocksDB; rmqtx keeps them in JSON files, so nothing is exported."""
        return request.make_response(ResponseCode.SUCCESS, "export done.")

    def switch_timer_engine(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return request.make_response(ResponseCode.INVALID_PARAMETER, "timerUseRocksDB muse be configured true when broker start")


__all__ = ["Admin5xProcessor"]


def _auto_switch_status(auto: "AutoSwitchHAService", put_where: int, client_info: dict) -> dict:
    """HARuntimeInfo in controller mode: in sync means in the sync-state set, as Java's AutoSwitchHAService says."""
    if not auto.is_master:
        link = auto.client.conn if auto.client is not None else None
        if auto.client is not None and auto.client.master_addr:
            client_info["masterAddr"] = auto.client.master_addr
        client_info["maxOffset"] = put_where
        if link is not None:
            client_info["lastReadTimestamp"], client_info["lastWriteTimestamp"] = link.last_read, link.last_write
        return {"haClientRuntimeInfo": dict(sorted(client_info.items())), "haConnectionInfo": [],
                "inSyncSlaveNums": 0, "master": False, "masterCommitLogMaxOffset": 0}
    members = auto.sync_state_set
    connections = [{"addr": c.peer, "diff": put_where - c.ack_offset, "inSync": c.slave_id in members,
                    "slaveAckOffset": c.ack_offset, "transferFromWhere": c.next_transfer, "transferredByteInSecond": 0}
                   for c in sorted(auto.connections, key=lambda c: c.peer)]
    return {"haClientRuntimeInfo": client_info, "haConnectionInfo": connections,
            "inSyncSlaveNums": max(len(members) - 1, 0), "master": True, "masterCommitLogMaxOffset": put_where}
