"""Admin codes of RocketMQ 5.3 around POP and the timer that 4.9.8 lacks.

POP_ROLLBACK (200056): mqadmin's exportPopRecord; Java moves POP records from its RocksDB store back to
the file store, and with that store off (its default, and rmqtx keeps POP state in files only) answers
SUCCESS having nothing to move. GET_ALL_MESSAGE_REQUEST_MODE (402), GET_TIMER_CHECK_POINT (60) and
GET_TIMER_METRICS (61): what a 5.x slave reads from its master to follow POP modes and the timer.

The 5.x mqadmin's broker commands: the cold-read flow control table (2001-2003) holds per-group
thresholds as Java's ColdDataCgCtrService does, in memory; with ``coldDataFlowControlEnable`` off (Java's
default, and rmqtx has no cold-read control) Java keeps and reports them without acting on them, which
is what rmqtx does. GET_BROKER_EPOCH_CACHE (1007) is for brokers in controller mode, which rmqtx has
not: Java's answer for a broker outside it. RESET_MASTER_FLUSH_OFFSET (908): Java records the offset
on a slave for controller-mode truncation only, so outside controller mode it is SUCCESS doing nothing.
"""

from __future__ import annotations

import re
import struct

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.processors.admin_bodies import ok
from rmqtx.common import fastjson
from rmqtx.common.properties import parse_properties
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.timer import TimerFiles

#: Java's TimerCheckpoint.encode: seven longs (no rmqtx slot progress).
CHECKPOINT_WIRE = struct.Struct(">7q")
LONG = re.compile(r"[+-]?[0-9]{1,18}")
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
        return request.make_response(ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")

    def reset_master_flush_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return ok(request)


__all__ = ["Admin5xProcessor", "CHECKPOINT_WIRE"]
