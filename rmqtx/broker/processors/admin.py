"""Admin requests on topics (mqadmin updateTopic / deleteTopic / the slave sync of topic configs)."""

from __future__ import annotations

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.topics import DEFAULT_TOPIC, TopicConfig, validate_name
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import CreateTopicRequestHeader, TopicRequestHeader
from rmqtx.remoting.protocol import RemotingProtocol

import orjson


class TopicAdminProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topic_config,
        }

    def update_and_create_topic(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = CreateTopicRequestHeader.from_command(request)
        why = validate_name(header.topic)
        if why:
            return request.make_response(ResponseCode.SYSTEM_ERROR, why)
        if header.topic == DEFAULT_TOPIC or header.topic == self.ctx.config.brokerClusterName:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"The topic[{header.topic}] is conflict with system topic.")
        self.ctx.topics.put(
            TopicConfig(
                header.topic,
                header.readQueueNums,
                header.writeQueueNums,
                header.perm,
                header.topicFilterType,
                header.topicSysFlag or 0,
                header.order,
            )
        )
        self.ctx.registrar.register_all(oneway=True)
        return request.make_response(ResponseCode.SUCCESS)

    def delete_topic(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = TopicRequestHeader.from_command(request)
        why = validate_name(header.topic)
        if why:
            return request.make_response(ResponseCode.SYSTEM_ERROR, why)
        self.ctx.topics.delete(header.topic)
        self.ctx.offsets.remove_topic(header.topic)
        self.ctx.store.delete_topics({header.topic})
        self.ctx.registrar.register_all(oneway=True)
        return request.make_response(ResponseCode.SUCCESS)

    def all_topic_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        body = orjson.dumps(self.ctx.topics.to_json())
        return request.make_response(ResponseCode.SUCCESS, body=body)
