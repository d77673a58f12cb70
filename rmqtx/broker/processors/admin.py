"""Topic admin: create/delete (one topic, or 5.x's list), the topic table (slave sync, mqadmin), stats,
system topics, cleanup."""

from __future__ import annotations

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.processors.admin_bodies import is_system_topic, mq_map, ok, system_topics, topic_remark
from rmqtx.broker.processors.admin_headers import GetTopicConfigRequestHeader
from rmqtx.common import fastjson, topic_attributes
from rmqtx.common.fastjson import JavaSet
from rmqtx.common.topic_config import TopicConfig
from rmqtx.common.topics import SCHEDULE_TOPIC, TIMER_TOPIC
from rmqtx.remoting.bodies import body_shape, json_object
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import CreateTopicRequestHeader, TopicRequestHeader
from rmqtx.remoting.protocol import RemotingProtocol


def topic_table_json(ctx: BrokerContext) -> dict:
    """TopicConfigSerializeWrapper as Java encodes it (GET_ALL_TOPIC_CONFIG)."""
    return ctx.topics.wire_json()


class TopicAdminProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.UPDATE_AND_CREATE_TOPIC_LIST: self.update_and_create_topic_list,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.system_topic_list,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
        }

    def _refuse_on_slave(self, request: RemotingCommand) -> RemotingCommand | None:
        if self.ctx.config.brokerRole == "SLAVE":
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                "Can't modify topic or subscription group from slave broker, please execute it from master broker.",
            )
        return None

    def _check_topic(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        """Refuse names that are unsafe as paths or that belong to the system, with Java's remarks."""
        refused = self._refuse_on_slave(request)
        if refused is not None:
            return refused
        why = topic_remark(topic)
        if why:
            return request.make_response(ResponseCode.SYSTEM_ERROR, why)
        if is_system_topic(topic, self.ctx.config):
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        return None

    def update_and_create_topic(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = CreateTopicRequestHeader.from_command(request)
        refused = self._check_topic(request, header.topic)
        if refused is not None:
            return refused
        try:  # 5.x's attributes; a header without them (4.x tools) keeps what the topic has
            modification = topic_attributes.parse_modification(header.attributes)
            if (modification.get("+" + topic_attributes.MESSAGE_TYPE) == topic_attributes.MIXED
                    and not self.ctx.config.switches.enable_mixed_message_type):
                return request.make_response(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
            existing = self.ctx.topics.get(header.topic)
            attributes = topic_attributes.alter(existing is None, existing.attributes if existing else {}, modification)
        except topic_attributes.AttributeRefusal as refusal:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(refusal))
        tc = TopicConfig(
            header.topic,
            header.readQueueNums,
            header.writeQueueNums,
            header.perm,
            header.topicFilterType,
            header.topicSysFlag or 0,
            header.order,
            attributes,
        )
        self.ctx.topics.put(tc)
        self.ctx.registrar.register_topic(tc)
        # Java's response starts as SYSTEM_ERROR "not set any response code"; only the code is reset
        return request.make_response(ResponseCode.SUCCESS, "not set any response code")

    def update_and_create_topic_list(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """5.x's bulk create (mqadmin updateTopicList): every name is checked first, with the remarks of
        Java's list handler (INVALID_PARAMETER); then all topics change together, topics.json is written
        once and the NameServers hear of them in one registration. A topic sent exactly as the broker
        has it is left alone; Java instead answers SUCCESS at the first such topic and applies none of
        the list, which rmqtx does not copy (the rest of the list is applied)."""
        refused = self._refuse_on_slave(request)
        if refused is not None:
            return refused
        data = json_object(request.body, "CreateTopicListRequestBody")
        with body_shape("CreateTopicListRequestBody"):
            wanted = [TopicConfig.from_json(item) for item in (data.get("topicConfigList") or [])]
        for tc in wanted:
            why = topic_remark(tc.topicName)
            if why is None and is_system_topic(tc.topicName, self.ctx.config):
                why = f"The topic[{tc.topicName}] is conflict with system topic."
            if (why is None and tc.attributes.get("+" + topic_attributes.MESSAGE_TYPE) == topic_attributes.MIXED
                    and not self.ctx.config.switches.enable_mixed_message_type):
                why = "MIXED message type is not supported."
            if why is not None:
                return request.make_response(ResponseCode.INVALID_PARAMETER, why)
        changed = []
        try:
            for tc in wanted:
                existing = self.ctx.topics.get(tc.topicName)
                if existing == tc:
                    continue
                tc.attributes = topic_attributes.alter(existing is None, existing.attributes if existing else {}, tc.attributes)
                changed.append(tc)
        except topic_attributes.AttributeRefusal as refusal:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(refusal))
        if changed:
            self.ctx.topics.put_all(changed)
            self.ctx.registrar.register_topics(changed)
        return request.make_response(ResponseCode.SUCCESS, "not set any response code")

    def delete_topic(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = TopicRequestHeader.from_command(request)
        refused = self._check_topic(request, header.topic)
        if refused is not None:
            return refused
        self.ctx.topics.delete(header.topic)
        self.ctx.offsets.remove_topic(header.topic)
        self.ctx.store.delete_topics({header.topic})
        self.ctx.registrar.register_all_soon()
        return ok(request)

    def all_topic_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return ok(request, fastjson.dumps(topic_table_json(self.ctx)))

    def topic_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetTopicConfigRequestHeader.from_command(request)
        tc = self.ctx.topics.get(header.topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {header.topic}")
        return ok(request, fastjson.dumps(tc.to_json()))

    def topic_stats(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = TopicRequestHeader.from_command(request)
        tc = self.ctx.topics.get(header.topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        store, broker = self.ctx.store, self.ctx.config.brokerName
        entries = []
        for qid in range(tc.writeQueueNums):
            low = max(0, store.get_min_offset_in_queue(header.topic, qid))
            high = max(0, store.get_max_offset_in_queue(header.topic, qid))
            last = store.get_message_store_timestamp(header.topic, qid, high - 1) if high > 0 else 0
            entries.append(((header.topic, broker, qid), {"lastUpdateTimestamp": last, "maxOffset": high, "minOffset": low}))
        return ok(request, fastjson.dumps({"offsetTable": mq_map(entries)}))

    def system_topic_list(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        return ok(request, fastjson.dumps({"topicList": JavaSet(sorted(system_topics(self.ctx.config)))}))

    def clean_unused_topic(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Drop consume queues of topics the topic table no longer has (Java's cleanUnusedTopic)."""
        stored = set(self.ctx.store.topics_and_queues())
        unused = {t for t in stored if t not in self.ctx.topics.table and t not in (SCHEDULE_TOPIC, TIMER_TOPIC)}
        self.ctx.store.delete_topics(unused)
        return ok(request)

    def clean_expired_consume_queue(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Drop topics whose every consume queue points only below the commit log's first offset."""
        store = self.ctx.store
        min_phy = store.min_phy_offset
        expired = set()
        for topic, queues in store.topics_and_queues().items():
            if topic in (SCHEDULE_TOPIC, TIMER_TOPIC):
                continue
            lasts = [store.get_commit_log_offset_in_queue(topic, q, store.get_max_offset_in_queue(topic, q) - 1) for q in queues]
            if lasts and all(store.get_max_offset_in_queue(topic, q) > 0 for q in queues) and max(lasts) < min_phy:
                expired.add(topic)
        store.delete_topics(expired)
        return ok(request)

    def delete_expired_commit_log(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        self.ctx.store.run_retention_now()
        return ok(request)
