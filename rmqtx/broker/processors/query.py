"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12): reads by commit log offset and by key."""

from __future__ import annotations

from rmqtx.broker.context import BrokerContext
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader
from rmqtx.remoting.protocol import RemotingProtocol

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
#: Java's defaultQueryMaxNum, used for unique-key queries.
DEFAULT_QUERY_MAX_NUM = 32


class QueryProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {RequestCode.VIEW_MESSAGE_BY_ID: self.view_by_id, RequestCode.QUERY_MESSAGE: self.query_message}

    def view_by_id(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = ViewMessageRequestHeader.from_command(request)
        record = self.ctx.store.look_message_by_offset(header.offset) if header.offset >= 0 else None
        if record is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}")
        return request.make_response(ResponseCode.SUCCESS, body=record)

    def query_message(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = QueryMessageRequestHeader.from_command(request)
        max_num = DEFAULT_QUERY_MAX_NUM if request.field(UNIQUE_KEY_QUERY) == "true" else header.maxNum
        records, last_ts, last_phy = self.ctx.store.query_message(
            header.topic, header.key, max_num, header.beginTimestamp, header.endTimestamp
        )
        response = request.make_response(ResponseCode.SUCCESS)
        QueryMessageResponseHeader(last_ts, last_phy).apply_to(response)
        if not records:
            response.code = ResponseCode.QUERY_NOT_FOUND
            response.remark = "can not find message, maybe time range not correct"
            return response
        response.body = b"".join(records)
        return response
