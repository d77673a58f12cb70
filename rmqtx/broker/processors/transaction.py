"""END_TRANSACTION (37): the producer's verdict on a half message (usually oneway)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.transactions import TransactionError
from rmqtx.common.message import PROPERTY_REAL_TOPIC, parse_properties
from rmqtx.common.sysflag import TRANSACTION_COMMIT, TRANSACTION_ROLLBACK
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import EndTransactionRequestHeader
from rmqtx.remoting.protocol import RemotingProtocol

if TYPE_CHECKING:
    from twisted.internet import defer


class EndTransactionProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    def end_transaction(self, request: RemotingCommand, conn: RemotingProtocol) -> defer.Deferred[Any] | None:
        header = EndTransactionRequestHeader.from_command(request)
        if header.commitOrRollback not in (TRANSACTION_COMMIT, TRANSACTION_ROLLBACK):
            return None  # UNKNOW (0): nothing to do until the check-back asks again
        d = self.ctx.transactions.end(header.producerGroup, header.commitLogOffset, header.tranStateTableOffset, header.commitOrRollback)
        d.addCallbacks(
            lambda half: self._resolved(half, header.commitOrRollback, request),
            lambda f: request.make_response(f.value.code, str(f.value)) if f.check(TransactionError) else f,
        )
        return d

    def _resolved(self, half: Any, state: int, request: RemotingCommand) -> RemotingCommand:
        """SUCCESS; a half message this request resolved is counted for the 5.x metrics (by its real topic)."""
        if half is not None:
            topic = parse_properties(half.properties).get(PROPERTY_REAL_TOPIC, "")
            self.ctx.stats.on_end_transaction(topic, state == TRANSACTION_COMMIT, half.born_timestamp)
        return request.make_response(ResponseCode.SUCCESS)
