"""END_TRANSACTION (37): the producer's verdict on a half message (usually oneway)."""

from __future__ import annotations

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.transactions import TransactionError
from rmqtx.common.sysflag import TRANSACTION_COMMIT, TRANSACTION_ROLLBACK
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import EndTransactionRequestHeader
from rmqtx.remoting.protocol import RemotingProtocol


class EndTransactionProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    def end_transaction(self, request: RemotingCommand, conn: RemotingProtocol):
        header = EndTransactionRequestHeader.from_command(request)
        if header.commitOrRollback not in (TRANSACTION_COMMIT, TRANSACTION_ROLLBACK):
            return None  # UNKNOW (0): nothing to do until the check-back asks again
        d = self.ctx.transactions.end(header.producerGroup, header.commitLogOffset, header.tranStateTableOffset, header.commitOrRollback)
        d.addCallbacks(
            lambda _: request.make_response(ResponseCode.SUCCESS),
            lambda f: request.make_response(f.value.code, str(f.value)) if f.check(TransactionError) else f,
        )
        return d
