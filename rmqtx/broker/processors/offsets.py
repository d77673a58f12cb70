"""Consumer offsets and queue positions: codes 14, 15, 29, 30, 31, 32."""

from __future__ import annotations

from rmqtx.broker.context import BrokerContext
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import (
    GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmqtx.remoting.protocol import RemotingProtocol


class OffsetProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_time,
        }

    @staticmethod
    def _offset(request: RemotingCommand, offset: int) -> RemotingCommand:
        return OffsetResponseHeader(offset).apply_to(request.make_response(ResponseCode.SUCCESS))

    def query_consumer_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_command(request)
        offset = self.ctx.offsets.query(header.consumerGroup, header.topic, header.queueId)
        if offset >= 0:
            return self._offset(request, offset)
        if header.setZeroIfNotFound is False:  # a 5.x client's choice; 4.x clients never send the field
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first", ext_fields={}
            )
        if self._starts_in_memory(header.topic, header.queueId):
            return self._offset(request, 0)
        return request.make_response(
            ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first", ext_fields={}
        )

    def _starts_in_memory(self, topic: str, queue_id: int) -> bool:
        """A group with no offset yet starts at 0 only while the queue still begins at 0 and that first
        message is not swapped out (Java 4.9.8); otherwise QUERY_NOT_FOUND lets the client choose."""
        store = self.ctx.store
        return store.get_min_offset_in_queue(topic, queue_id) <= 0 and not store.check_in_disk_by_consume_offset(topic, queue_id, 0)

    def update_consumer_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_command(request)
        self.ctx.offsets.commit(header.consumerGroup, header.topic, header.queueId, header.commitOffset)
        return request.make_response(ResponseCode.SUCCESS, ext_fields={})

    def max_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = TopicQueueRequestHeader.from_command(request)
        return self._offset(request, self.ctx.store.get_max_offset_in_queue(header.topic, header.queueId))

    def min_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = TopicQueueRequestHeader.from_command(request)
        return self._offset(request, self.ctx.store.get_min_offset_in_queue(header.topic, header.queueId))

    def search_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = SearchOffsetRequestHeader.from_command(request)
        return self._offset(request, self.ctx.store.get_offset_in_queue_by_time(header.topic, header.queueId, header.timestamp))

    def earliest_time(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = TopicQueueRequestHeader.from_command(request)
        timestamp = self.ctx.store.get_earliest_message_time(header.topic, header.queueId)
        return GetEarliestMsgStoretimeResponseHeader(timestamp).apply_to(request.make_response(ResponseCode.SUCCESS))
