"""What a remoting request asks of ACL 2.0: (resource, actions) pairs, as Apache 5.3's
DefaultAuthorizationContextBuilder derives them.

Sends, pulls, heartbeats, offsets, locks and a few more are spelled out; every other code is looked
up in :data:`ANNOTATED`, the request headers' ``@RocketMQAction`` / ``@RocketMQResource`` facts
(code -> resource type, actions, resource fields, fields the header requires). A code with no header
there asks for nothing (Apache lets it through authorization). A header missing a required field, or
a body that does not parse, fails as Apache's ``parse authorization context error.``.
"""

from __future__ import annotations

from typing import NamedTuple

from rmqtx.acl2.model import RETRY_PREFIX, Resource
from rmqtx.remoting.bodies import BodyError, json_object, object_list
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand

PARSE_ERROR = "parse authorization context error."


class ParseError(Exception):
    """The request does not carry what its header or body needs."""


class Rule(NamedTuple):
    resource: str  # the annotation's resource type: "Cluster" gives the cluster when no field names one
    actions: tuple[str, ...]
    fields: tuple[tuple[str, str, str], ...]  # (header field, resource type, splitter)
    required: tuple[str, ...]


class Wanted(NamedTuple):
    resource: Resource
    actions: tuple[str, ...]


ANNOTATED: dict[int, Rule] = {
    17: Rule('Unknown', ('Create',), (('topic', 'Topic', ''),), ('topic', 'defaultTopic', 'readQueueNums', 'writeQueueNums', 'perm', 'topicFilterType')),  # UPDATE_AND_CREATE_TOPIC
    18: Rule('Unknown', ('Create',), (), ()),  # UPDATE_AND_CREATE_TOPIC_LIST
    21: Rule('Topic', ('List',), (), ()),  # GET_ALL_TOPIC_CONFIG
    29: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('topic', 'queueId', 'timestamp')),  # SEARCH_OFFSET_BY_TIMESTAMP
    30: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('topic', 'queueId')),  # GET_MAX_OFFSET
    31: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('topic', 'queueId')),  # GET_MIN_OFFSET
    32: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('topic', 'queueId')),  # GET_EARLIEST_MSG_STORETIME
    33: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('offset',)),  # VIEW_MESSAGE_BY_ID
    39: Rule('Unknown', ('Pub',), (('topic', 'Topic', ''),), ('tranStateTableOffset', 'commitLogOffset')),  # CHECK_TRANSACTION_STATE
    40: Rule('Unknown', ('Sub',), (('consumerGroup', 'Group', ''),), ('consumerGroup',)),  # NOTIFY_CONSUMER_IDS_CHANGED
    100: Rule('Cluster', ('Update',), (), ('namespace', 'key', 'value')),  # PUT_KV_CONFIG
    101: Rule('Cluster', ('Get',), (), ('namespace', 'key')),  # GET_KV_CONFIG
    102: Rule('Cluster', ('Update',), (), ('namespace', 'key')),  # DELETE_KV_CONFIG
    103: Rule('Cluster', ('Update',), (('clusterName', 'Cluster', ''),), ('brokerName', 'brokerAddr', 'clusterName', 'haServerAddr', 'brokerId')),  # REGISTER_BROKER
    104: Rule('Cluster', ('Update',), (('clusterName', 'Cluster', ''),), ('brokerName', 'brokerAddr', 'clusterName', 'brokerId')),  # UNREGISTER_BROKER
    202: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('topic',)),  # GET_TOPIC_STATS_INFO
    203: Rule('Unknown', ('Get',), (('consumerGroup', 'Group', ''),), ('consumerGroup',)),  # GET_CONSUMER_CONNECTION_LIST
    204: Rule('Cluster', ('Get',), (), ('producerGroup',)),  # GET_PRODUCER_CONNECTION_LIST
    205: Rule('Cluster', ('Update',), (), ('brokerName',)),  # WIPE_WRITE_PERM_OF_BROKER
    207: Rule('Unknown', ('Delete',), (('groupName', 'Group', ''),), ('groupName',)),  # DELETE_SUBSCRIPTIONGROUP
    208: Rule('Unknown', ('Get',), (('consumerGroup', 'Group', ''), ('topic', 'Topic', ''), ('topicList', 'Topic', '')), ('consumerGroup',)),  # GET_CONSUME_STATS
    215: Rule('Unknown', ('Delete',), (('topic', 'Topic', ''),), ('topic',)),  # DELETE_TOPIC_IN_BROKER
    216: Rule('Cluster', ('Update',), (('clusterName', 'Cluster', ''),), ('topic',)),  # DELETE_TOPIC_IN_NAMESRV
    217: Rule('Cluster', ('Update',), (), ('topic',)),  # REGISTER_TOPIC_IN_NAMESRV
    219: Rule('Cluster', ('Get',), (), ('namespace',)),  # GET_KVLIST_BY_NAMESPACE
    222: Rule('Unknown', ('Update',), (('group', 'Group', ''), ('topic', 'Topic', '')), ('group', 'topic', 'timestamp', 'isForce')),  # INVOKE_BROKER_TO_RESET_OFFSET
    223: Rule('Unknown', ('Get',), (('topic', 'Topic', ''), ('group', 'Group', '')), ('topic', 'group')),  # INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    224: Rule('Topic', ('List',), (), ('cluster',)),  # GET_TOPICS_BY_CLUSTER
    300: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('topic',)),  # QUERY_TOPIC_CONSUME_BY_WHO
    303: Rule('Unknown', ('Get',), (('topic', 'Topic', ''), ('group', 'Group', '')), ('topic', 'group')),  # QUERY_CONSUME_TIME_SPAN
    307: Rule('Unknown', ('Get',), (('consumerGroup', 'Group', ''),), ('consumerGroup', 'clientId')),  # GET_CONSUMER_RUNNING_INFO
    308: Rule('Unknown', ('Get',), (('filterGroups', 'Group', ','), ('compareGroup', 'Group', ''), ('topic', 'Topic', '')), ('compareGroup', 'topic')),  # QUERY_CORRECTION_OFFSET
    309: Rule('Unknown', ('Sub',), (('consumerGroup', 'Group', ''), ('topic', 'Topic', '')), ('consumerGroup',)),  # CONSUME_MESSAGE_DIRECTLY
    314: Rule('Unknown', ('Update',), (('destGroup', 'Group', ''), ('topic', 'Topic', '')), ('srcGroup', 'destGroup')),  # CLONE_GROUP_OFFSET
    315: Rule('Cluster', ('Get',), (), ('statsName', 'statsKey')),  # VIEW_BROKER_STATS_DATA
    317: Rule('Cluster', ('Get',), (), ('isOrder',)),  # GET_BROKER_CONSUME_STATS
    321: Rule('Unknown', ('Get',), (('topic', 'Topic', ''), ('consumerGroup', 'Group', '')), ()),  # QUERY_CONSUME_QUEUE
    322: Rule('Cluster', ('Get',), (('clusterName', 'Cluster', ''),), ('brokerName', 'brokerAddr', 'clusterName', 'brokerId')),  # QUERY_DATA_VERSION
    323: Rule('Unknown', ('Update',), (('topic', 'Topic', ''),), ()),  # RESUME_CHECK_HALF_MESSAGE
    326: Rule('Unknown', ('Sub',), (('producerGroup', 'Group', ''), ('topic', 'Topic', '')), ('producerGroup', 'topic', 'defaultTopic', 'defaultTopicQueueNums', 'queueId', 'sysFlag', 'bornTimestamp', 'flag', 'bornHost', 'storeHost', 'storeTimestamp')),  # PUSH_REPLY_MESSAGE_TO_CLIENT
    327: Rule('Cluster', ('Update',), (), ('brokerName',)),  # ADD_WRITE_PERM_OF_BROKER
    328: Rule('Cluster', ('Get',), (), ()),  # GET_ALL_PRODUCER_INFO
    343: Rule('Unknown', ('Get',), (('group', 'Group', ''),), ('group',)),  # QUERY_TOPICS_BY_CONSUMER
    345: Rule('Unknown', ('Get',), (('group', 'Group', ''), ('topic', 'Topic', '')), ('group',)),  # QUERY_SUBSCRIPTION_BY_CONSUMER
    351: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('topic',)),  # GET_TOPIC_CONFIG
    352: Rule('Unknown', ('Get',), (('group', 'Group', ''),), ('group',)),  # GET_SUBSCRIPTIONGROUP_CONFIG
    353: Rule('Unknown', ('Update',), (('group', 'Group', ''), ('topic', 'Topic', '')), ('group', 'topic')),  # UPDATE_AND_GET_GROUP_FORBIDDEN
    354: Rule('Unknown', ('Get',), (('topic', 'Topic', ''),), ('topic',)),  # CHECK_ROCKSDB_CQ_WRITE_PROGRESS
    355: Rule('Cluster', ('Get',), (), ('configType',)),  # EXPORT_ROCKSDB_CONFIG_TO_JSON
    901: Rule('Unknown', ('Get',), (('clusterName', 'Cluster', ''),), ('clusterName', 'brokerName')),  # GET_BROKER_MEMBER_GROUP
    902: Rule('Cluster', ('Update',), (), ()),  # ADD_BROKER
    903: Rule('Cluster', ('Update',), (('brokerClusterName', 'Cluster', ''),), ('brokerName', 'brokerClusterName', 'brokerId')),  # REMOVE_BROKER
    904: Rule('Cluster', ('Update',), (('clusterName', 'Cluster', ''),), ('clusterName', 'brokerAddr', 'brokerName')),  # BROKER_HEARTBEAT
    905: Rule('Cluster', ('Update',), (), ()),  # NOTIFY_MIN_BROKER_ID_CHANGE
    906: Rule('Cluster', ('Update',), (), ()),  # EXCHANGE_BROKER_HA_INFO
    908: Rule('Cluster', ('Update',), (), ('masterFlushOffset',)),  # RESET_MASTER_FLUSH_OFFSET
    1001: Rule('Cluster', ('Update',), (), ()),  # CONTROLLER_ALTER_SYNC_STATE_SET
    1002: Rule('Cluster', ('Update',), (), ()),  # CONTROLLER_ELECT_MASTER
    1003: Rule('Cluster', ('Update',), (('clusterName', 'Cluster', ''),), ()),  # CONTROLLER_REGISTER_BROKER
    1004: Rule('Cluster', ('Get',), (), ()),  # CONTROLLER_GET_REPLICA_INFO
    1008: Rule('Cluster', ('Update',), (), ()),  # NOTIFY_BROKER_ROLE_CHANGED
    1011: Rule('Cluster', ('Update',), (('clusterName', 'Cluster', ''),), ('brokerName',)),  # CLEAN_BROKER_DATA
    1012: Rule('Cluster', ('Get',), (('clusterName', 'Cluster', ''),), ()),  # CONTROLLER_GET_NEXT_BROKER_ID
    1013: Rule('Cluster', ('Update',), (('clusterName', 'Cluster', ''),), ()),  # CONTROLLER_APPLY_BROKER_ID
    3001: Rule('Cluster', ('Update',), (), ()),  # AUTH_CREATE_USER
    3002: Rule('Cluster', ('Update',), (), ()),  # AUTH_UPDATE_USER
    3003: Rule('Cluster', ('Update',), (), ()),  # AUTH_DELETE_USER
    3004: Rule('Cluster', ('Get',), (), ()),  # AUTH_GET_USER
    3005: Rule('Cluster', ('Get',), (), ()),  # AUTH_LIST_USER
    3006: Rule('Cluster', ('Update',), (), ()),  # AUTH_CREATE_ACL
    3007: Rule('Cluster', ('Update',), (), ()),  # AUTH_UPDATE_ACL
    3008: Rule('Cluster', ('Update',), (), ()),  # AUTH_DELETE_ACL
    3009: Rule('Cluster', ('Get',), (), ()),  # AUTH_GET_ACL
    3010: Rule('Cluster', ('Get',), (), ()),  # AUTH_LIST_ACL
    200050: Rule('Unknown', ('Sub',), (('consumerGroup', 'Group', ''), ('topic', 'Topic', '')), ('consumerGroup', 'topic', 'queueId', 'maxMsgNums', 'invisibleTime', 'pollTime', 'bornTime', 'initMode')),  # POP_MESSAGE
    200051: Rule('Unknown', ('Sub',), (('consumerGroup', 'Group', ''), ('topic', 'Topic', '')), ('consumerGroup', 'topic', 'queueId', 'extraInfo', 'offset')),  # ACK_MESSAGE
    200052: Rule('Unknown', ('Sub',), (('topic', 'Topic', ''), ('consumerGroup', 'Group', '')), ('topic', 'queueId', 'maxMsgNums', 'consumerGroup')),  # PEEK_MESSAGE
    200053: Rule('Unknown', ('Sub',), (('consumerGroup', 'Group', ''), ('topic', 'Topic', '')), ('consumerGroup', 'topic', 'queueId', 'extraInfo', 'offset', 'invisibleTime')),  # CHANGE_MESSAGE_INVISIBLETIME
    200054: Rule('Unknown', ('Sub',), (('consumerGroup', 'Group', ''), ('topic', 'Topic', '')), ('consumerGroup', 'topic', 'queueId', 'pollTime', 'bornTime')),  # NOTIFICATION
    200055: Rule('Unknown', ('Get',), (('consumerGroup', 'Group', ''), ('topic', 'Topic', '')), ('consumerGroup', 'topic', 'queueId')),  # POLLING_INFO
}


def _retry(name: str | None) -> bool:
    return name is not None and name.startswith(RETRY_PREFIX)


def _topic_or_group(name: str | None, actions: tuple[str, ...]) -> Wanted:
    return Wanted(Resource.group(name) if _retry(name) else Resource.topic(name), actions)


def _need(ext: dict[str, str], *names: str) -> None:
    for name in names:
        if ext.get(name) is None:
            raise ParseError(name)


def _body(request: RemotingCommand, what: str) -> dict:
    try:
        return json_object(request.body, what, empty_ok=False)
    except BodyError:
        raise ParseError(what) from None


def wanted(request: RemotingCommand, cluster: str) -> list[Wanted]:
    """The pairs to check, in Apache's order; raises :class:`ParseError`."""
    ext = request.ext_fields
    if not ext:
        return []
    code = request.code
    sub, pub = ("Sub",), ("Pub",)
    out: list[Wanted] = []
    if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
        topic = ext.get("topic")
        out.append(Wanted(Resource.group(topic), ("Sub", "Get")) if _retry(topic)
                   else Wanted(Resource.topic(topic), ("Pub", "Sub", "Get")))
    elif code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        topic_key, group_key = ("topic", "group") if code == RequestCode.SEND_MESSAGE else ("b", "a")
        topic = ext.get(topic_key)
        if _retry(topic):
            group = ext.get(group_key)
            out.append(Wanted(Resource.group(group if group and group.strip() else topic), sub))
        else:
            out.append(Wanted(Resource.topic(topic), pub))
    elif code == RequestCode.RECALL_MESSAGE:
        out.append(Wanted(Resource.topic(ext.get("topic")), pub))
    elif code == RequestCode.END_TRANSACTION:
        if (ext.get("topic") or "").strip():
            out.append(Wanted(Resource.topic(ext["topic"]), pub))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        out.append(Wanted(Resource.group(ext.get("group")), sub))
    elif code == RequestCode.PULL_MESSAGE:
        if not _retry(ext.get("topic")):
            out.append(Wanted(Resource.topic(ext.get("topic")), sub))
        out.append(Wanted(Resource.group(ext.get("consumerGroup")), sub))
    elif code == RequestCode.QUERY_MESSAGE:
        out.append(Wanted(Resource.topic(ext.get("topic")), ("Sub", "Get")))
    elif code == RequestCode.HEART_BEAT:
        data = _body(request, "HeartbeatData")
        try:
            for consumer in object_list(data.get("consumerDataSet"), "consumerDataSet"):
                out.append(Wanted(Resource.group(consumer.get("groupName")), sub))
                for item in object_list(consumer.get("subscriptionDataSet"), "subscriptionDataSet"):
                    if not _retry(item.get("topic")):
                        out.append(Wanted(Resource.topic(item.get("topic")), sub))
        except BodyError:
            raise ParseError("HeartbeatData") from None
    elif code == RequestCode.UNREGISTER_CLIENT:
        _need(ext, "clientID")
        if (ext.get("consumerGroup") or "").strip():
            out.append(Wanted(Resource.group(ext["consumerGroup"]), sub))
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        _need(ext, "consumerGroup")
        out.append(Wanted(Resource.group(ext["consumerGroup"]), ("Sub", "Get")))
    elif code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET):
        actions = ("Sub", "Get") if code == RequestCode.QUERY_CONSUMER_OFFSET else ("Sub", "Update")
        _need(ext, "consumerGroup", "topic", "queueId", *(("commitOffset",) if code == RequestCode.UPDATE_CONSUMER_OFFSET else ()))
        if not _retry(ext["topic"]):
            out.append(Wanted(Resource.topic(ext["topic"]), actions))
        out.append(Wanted(Resource.group(ext["consumerGroup"]), actions))
    elif code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        body = _body(request, "LockBatchRequestBody")
        out.append(Wanted(Resource.group(body.get("consumerGroup")), sub))
        try:
            for mq in object_list(body.get("mqSet"), "mqSet"):
                if not _retry(mq.get("topic")):
                    out.append(Wanted(Resource.topic(mq.get("topic")), sub))
        except BodyError:
            raise ParseError("LockBatchRequestBody") from None
    else:
        rule = ANNOTATED.get(code)
        if rule is None:
            return []
        _need(ext, *rule.required)
        for name, kind, splitter in rule.fields:
            value = ext.get(name)
            if value is None:
                continue
            for name_value in ([v for v in value.split(splitter) if v] if splitter else [value]):
                if kind == "Topic" and _retry(name_value):
                    out.append(Wanted(Resource.group(name_value), rule.actions))
                elif kind == "Group":
                    out.append(Wanted(Resource("Group", name_value, 2), rule.actions))
                else:
                    out.append(Wanted(Resource(kind, name_value, 2), rule.actions))
        if not out and rule.resource == "Cluster":
            out.append(Wanted(Resource.cluster(cluster), rule.actions))
    return out
