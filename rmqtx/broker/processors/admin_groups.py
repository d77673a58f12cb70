"""Subscription groups, committed offsets and consume progress (codes 200, 201, 207, 352, 43, 208, 317, 300, 303, 308, 314, 321)."""

from __future__ import annotations

from typing import Callable

from rmqtx.broker.context import BrokerContext
from rmqtx.broker.groups import SubscriptionGroupConfig
from rmqtx.broker.offsets import SEPARATOR
from rmqtx.broker.processors.admin_bodies import mq_json, mq_map, ok
from rmqtx.broker.processors.admin_headers import (
    CloneGroupOffsetRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from rmqtx.common import fastjson
from rmqtx.common.fastjson import JavaMap, JavaSet
from rmqtx.common.javacompat import hashmap_order
from rmqtx.common.topic_config import TopicConfig
from rmqtx.common.topics import validate_name
from rmqtx.remoting.bodies import body_shape, json_object
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol

#: Capacities of Java's ConcurrentHashMaps (``new ConcurrentHashMap<>(n)`` sizes its table up).
GROUP_TABLE_CAPACITY = 2048
OFFSET_TABLE_CAPACITY = 1024
QUEUE_TABLE_CAPACITY = 64
LONG_MAX = 2**63 - 1


class GroupAdminProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: self.update_group_list,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.group_config,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.all_offsets,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_BROKER_CONSUME_STATS: self.broker_consume_stats,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by_who,
            RequestCode.QUERY_CONSUME_TIME_SPAN: self.consume_time_span,
            RequestCode.QUERY_CORRECTION_OFFSET: self.correction_offset,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_offset,
            RequestCode.QUERY_CONSUME_QUEUE: self.consume_queue,
        }

    # -- subscription groups ------------------------------------------------------------------
    def update_group(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        if self.ctx.config.brokerRole == "SLAVE":
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                "Can't modify topic or subscription group from slave broker, please execute it from master broker.",
            )
        data = json_object(request.body, "SubscriptionGroupConfig")
        if data:
            with body_shape("SubscriptionGroupConfig"):
                group = SubscriptionGroupConfig.from_json(data)
            why = validate_name(group.groupName, "group")
            if why:
                return request.make_response(ResponseCode.SYSTEM_ERROR, why)
            self.ctx.groups.put(group)
        return ok(request)

    def update_group_list(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """5.x's bulk form (mqadmin updateSubGroupList): ``{"groupConfigList": [...]}``, every name checked
        first (INVALID_PARAMETER, as Java's list handler), then one version bump and one write."""
        if self.ctx.config.brokerRole == "SLAVE":
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                "Can't modify topic or subscription group from slave broker, please execute it from master broker.",
            )
        data = json_object(request.body, "SubscriptionGroupList") or {}
        with body_shape("SubscriptionGroupList"):
            groups = [SubscriptionGroupConfig.from_json(item) for item in (data.get("groupConfigList") or [])]
        for group in groups:
            why = validate_name(group.groupName, "group")
            if why:
                return request.make_response(ResponseCode.INVALID_PARAMETER, why)
        if groups:
            self.ctx.groups.put_all(groups)
        return ok(request)

    def all_groups(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        groups = self.ctx.groups
        table = JavaMap(((name, g.to_json()) for name, g in groups.table.items()), capacity=GROUP_TABLE_CAPACITY)
        body = {"dataVersion": groups.data_version.to_json(), "subscriptionGroupTable": table}
        return ok(request, fastjson.dumps(body))

    def delete_group(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = DeleteSubscriptionGroupRequestHeader.from_command(request)
        self.ctx.groups.delete(header.groupName)
        if header.removeOffset:
            offsets = self.ctx.offsets
            for key in [k for k in offsets.table if k.split(SEPARATOR, 1)[1] == header.groupName]:
                del offsets.table[key]
            offsets.dirty = True
        return ok(request)

    def group_config(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetSubscriptionGroupConfigRequestHeader.from_command(request)
        found = self.ctx.groups.find(header.group)
        if found is None:
            return request.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return ok(request, fastjson.dumps(found.to_json()))

    # -- offsets and progress -----------------------------------------------------------------
    def all_offsets(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        table = JavaMap(
            ((key, JavaMap(queues, capacity=QUEUE_TABLE_CAPACITY)) for key, queues in self.ctx.offsets.table.items()),
            capacity=OFFSET_TABLE_CAPACITY,
        )
        return ok(request, fastjson.dumps({"offsetTable": table}))

    def _consume_stats(self, group: str, topics: list[str], queue_count: Callable[[TopicConfig], int]) -> tuple[dict, int]:
        """A ConsumeStats bean of ``group`` over ``topics`` and its total lag (Java's computeTotalDiff)."""
        ctx, broker = self.ctx, self.ctx.config.brokerName
        info = ctx.clients.consumer_group(group)
        subscriptions = info.subscriptions if info is not None else {}
        entries, diff = [], 0
        for topic in topics:
            tc = ctx.topics.get(topic)
            if tc is None or (subscriptions and topic not in subscriptions):
                continue
            for qid in range(queue_count(tc)):
                broker_offset = max(0, ctx.store.get_max_offset_in_queue(topic, qid))
                consumer_offset = max(0, ctx.offsets.query(group, topic, qid))
                last = 0
                if consumer_offset > 0:
                    last = max(0, ctx.store.get_message_store_timestamp(topic, qid, consumer_offset - 1))
                entries.append(
                    ((topic, broker, qid), {"brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": last})
                )
                diff += broker_offset - consumer_offset
        return {"consumeTps": 0.0, "offsetTable": mq_map(entries)}, diff

    def consume_stats(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetConsumeStatsRequestHeader.from_command(request)
        if header.topic and header.topic.strip():
            topics = [header.topic]
        else:
            # Java's whichTopicByConsumer: a HashSet<String>, so its bucket order
            topics = list(hashmap_order(tuple(sorted(self.ctx.offsets.topics_of_group(header.consumerGroup)))))
        stats, _ = self._consume_stats(header.consumerGroup, topics, lambda tc: tc.readQueueNums)
        return ok(request, fastjson.dumps(stats))

    def broker_consume_stats(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = GetConsumeStatsInBrokerHeader.from_command(request)
        listing, total = [], 0
        for group in self.ctx.groups.table:
            per_topic = []
            for topic in sorted(self.ctx.offsets.topics_of_group(group)):
                tc = self.ctx.topics.get(topic)
                if tc is None or (header.isOrder and not tc.order):
                    continue
                stats, diff = self._consume_stats(group, [topic], lambda tc: tc.writeQueueNums)
                if stats["offsetTable"]:
                    per_topic.append(stats)
                    total += diff
            listing.append(JavaMap({group: per_topic}))
        body = {"brokerAddr": self.ctx.config.broker_addr, "consumeStatsList": listing, "totalDiff": total}
        return ok(request, fastjson.dumps(body))

    def consumed_by_who(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = QueryTopicConsumeByWhoRequestHeader.from_command(request)
        groups = {g for g, info in self.ctx.clients.consumers.items() if header.topic in info.subscriptions}
        groups |= self.ctx.offsets.groups_of_topic(header.topic)
        return ok(request, fastjson.dumps({"groupList": JavaSet(sorted(groups))}))

    def consume_time_span(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = QueryConsumeTimeSpanRequestHeader.from_command(request)
        tc = self.ctx.topics.get(header.topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        store, topic = self.ctx.store, header.topic
        spans = []
        for qid in range(tc.writeQueueNums):
            min_time = store.get_earliest_message_time(topic, qid)
            top = store.get_max_offset_in_queue(topic, qid)
            consumer_offset = self.ctx.offsets.query(header.group, topic, qid)
            consume_time = store.get_message_store_timestamp(topic, qid, consumer_offset - 1) if consumer_offset > 0 else min_time
            delay = 0
            if consumer_offset < top:
                delay = int(self.ctx.store.clock() * 1000) - store.get_message_store_timestamp(topic, qid, consumer_offset)
            spans.append(
                {
                    "consumeTimeStamp": consume_time,
                    "delayTime": delay,
                    "maxTimeStamp": store.get_message_store_timestamp(topic, qid, top - 1),
                    "messageQueue": mq_json((topic, self.ctx.config.brokerName, qid)),
                    "minTimeStamp": min_time,
                }
            )
        return ok(request, fastjson.dumps({"consumeTimeSpanSet": spans}))

    def correction_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        """Per queue, the lowest offset of every group but ``filterGroups``; LONG_MAX where compareGroup is behind it."""
        header = QueryCorrectionOffsetHeader.from_command(request)
        skip = {g.strip() for g in (header.filterGroups or "").split(",") if g.strip()}
        lowest: dict[int, int] = {}
        for key, queues in self.ctx.offsets.table.items():
            topic, group = key.split(SEPARATOR, 1)
            if topic != header.topic or group in skip:
                continue
            for qid, offset in queues.items():
                lowest[qid] = min(offset, lowest.get(qid, offset))
        for qid, offset in self.ctx.offsets.queues_of(header.compareGroup, header.topic).items():
            if qid in lowest:
                lowest[qid] = LONG_MAX if lowest[qid] > offset else lowest[qid]
        return ok(request, fastjson.dumps({"correctionOffsets": JavaMap(lowest)}))

    def clone_offset(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = CloneGroupOffsetRequestHeader.from_command(request)
        why = validate_name(header.destGroup, "group")
        if why:
            return request.make_response(ResponseCode.SYSTEM_ERROR, why)
        offsets = self.ctx.offsets
        topics = [header.topic] if header.topic and header.topic.strip() else sorted(offsets.topics_of_group(header.srcGroup))
        info = self.ctx.clients.consumer_group(header.srcGroup)
        for topic in topics:
            if self.ctx.topics.get(topic) is None:
                continue
            if not header.offline and info is not None and info.subscriptions and topic not in info.subscriptions:
                continue
            source = offsets.queues_of(header.srcGroup, topic)
            if source:
                offsets.table[f"{topic}{SEPARATOR}{header.destGroup}"] = source
                offsets.dirty = True
        return ok(request)

    def consume_queue(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header = QueryConsumeQueueRequestHeader.from_command(request)
        cq = self.ctx.store.consume_queues.get((header.topic, header.queueId))
        if cq is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"{header.queueId}@{header.topic} is not exist!")
        body: dict = {"maxQueueIndex": cq.max_offset, "minQueueIndex": cq.min_offset}
        if header.consumerGroup is not None:
            info = self.ctx.clients.consumer_group(header.consumerGroup)
            sub = info.subscriptions.get(header.topic) if info is not None else None
            if sub is None:
                body["filterData"] = f"{header.consumerGroup}@{header.topic} is not online!"
            else:
                body["subscriptionData"] = sub.broker_json()
        units = []
        for index in range(header.index, header.index + max(0, header.count)):
            unit = cq.unit_at(index)
            if unit is None:
                break
            units.append({"eval": False, "physicOffset": unit[0], "physicSize": unit[1], "tagsCode": unit[2]})
        if not units:
            return request.make_response(
                ResponseCode.SUCCESS, f"Index {header.index} of {header.queueId}@{header.topic} is not exist!"
            )
        body["queueData"] = units
        return ok(request, fastjson.dumps(body))
