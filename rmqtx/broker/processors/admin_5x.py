"""Admin codes of RocketMQ 5.3 around POP and the timer that 4.9.8 lacks.

POP_ROLLBACK (200056): mqadmin's exportPopRecord; Java moves POP records from its RocksDB store back to
the file store, and with that store off (its default, and rmqtx keeps POP state in files only) answers
SUCCESS having nothing to move. GET_ALL_MESSAGE_REQUEST_MODE (402), GET_TIMER_CHECK_POINT (60) and
GET_TIMER_METRICS (61): what a 5.x slave reads from its master to follow POP modes and the timer.
"""

from __future__ import annotations

import struct

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.processors.admin_bodies import ok
from rmqtx.common import fastjson
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.timer import TimerFiles

#: Java's TimerCheckpoint.encode: seven longs (no rmqtx slot progress).
CHECKPOINT_WIRE = struct.Struct(">7q")


class Admin5xProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.POP_ROLLBACK: self.pop_rollback,
            RequestCode.GET_ALL_MESSAGE_REQUEST_MODE: self.all_request_modes,
            RequestCode.GET_TIMER_CHECK_POINT: self.timer_checkpoint,
            RequestCode.GET_TIMER_METRICS: self.timer_metrics,
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


__all__ = ["Admin5xProcessor", "CHECKPOINT_WIRE"]
