"""Check one request against the ACL table, as the 4.9.8 broker's PlainAccessValidator does.

A refusal is what Java's broker answers when its RPC hook throws an AclException: SYSTEM_ERROR
with ``<exception>: <message>, <first stack frame>`` as the remark.
"""

from __future__ import annotations

from typing import Callable

from rmqtx.acl.plain import PUB, SUB, AclTable, check_perm
from rmqtx.acl.signing import ACCESS_KEY, SIGNATURE, UNIQUE_KEY_QUERY, signature, signed_content
from rmqtx.common.topics import RETRY_PREFIX, TRACE_TOPIC
from rmqtx.remoting.bodies import BodyError, json_object, object_list, text
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand

_ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
_VALIDATE = "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:{})"
_CHECK_PERM = "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:{})"
_PARSE = "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"

#: Codes only admin accounts may send (Java's Permission.ADMIN_CODE).
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)


class AclRefusal(Exception):
    """The request is refused; ``remark`` is what the client reads."""

    def __init__(self, message: str, frame: str) -> None:
        super().__init__(message)
        self.remark = f"{_ACL_EXCEPTION}: {message}, {frame}"


#: 5.x codes that take messages from a group (Apache's ACL 1.0 checks only their signature; a pop moves
#: the group's offset, so rmqtx asks for SUB on the topic and the group as for a pull).
_POP_READS = frozenset({RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE, RequestCode.NOTIFICATION})
_POP_ACKS = frozenset({RequestCode.ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME})


def _retry(group: str | None) -> str | None:
    return None if group is None else RETRY_PREFIX + group


def _required(ext: dict[str, str], name: str) -> str:
    value = ext.get(name)
    if value is None:
        raise AclRefusal(f"the custom field <{name}> is null", _PARSE)
    return value


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """Resource -> permission a request needs (topics; groups as their %RETRY% topics)."""
    ext = request.ext_fields or {}
    code = request.code
    need: dict[str | None, int] = {}  # a resource the request leaves out is None, dropped at the end
    if code == RequestCode.SEND_MESSAGE or code == RequestCode.SEND_MESSAGE_V2:
        topic, group = (ext.get("topic"), ext.get("group")) if code == RequestCode.SEND_MESSAGE else (ext.get("b"), ext.get("a"))
        if topic is not None and topic.startswith(RETRY_PREFIX):
            need[_retry(group)] = SUB
        else:
            need[topic] = PUB
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        need[_retry(ext.get("group"))] = SUB
    elif code == RequestCode.PULL_MESSAGE:
        need[ext.get("topic")] = SUB
        need[_retry(ext.get("consumerGroup"))] = SUB
    elif code == RequestCode.QUERY_MESSAGE:
        need[ext.get("topic")] = SUB
    elif code == RequestCode.HEART_BEAT:
        try:
            data = json_object(request.body, "HeartbeatData", empty_ok=False)
            for consumer in object_list(data.get("consumerDataSet"), "consumerDataSet"):
                need[_retry(text(consumer.get("groupName"), "groupName"))] = SUB
                for sub in object_list(consumer.get("subscriptionDataSet"), "subscriptionDataSet"):
                    need[None if sub.get("topic") is None else text(sub.get("topic"), "topic")] = SUB
        except BodyError as exc:
            raise AclRefusal(str(exc), _PARSE) from None
    elif code == RequestCode.UNREGISTER_CLIENT:
        _required(ext, "clientID")
        need[_retry(ext.get("consumerGroup"))] = SUB
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        need[_retry(_required(ext, "consumerGroup"))] = SUB
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        group = _required(ext, "consumerGroup")
        topic = _required(ext, "topic")
        _required(ext, "queueId")
        _required(ext, "commitOffset")
        need[_retry(group)] = SUB
        need[topic] = SUB
    elif code in _POP_READS:
        need[_required(ext, "topic")] = SUB
        need[_retry(_required(ext, "consumerGroup"))] = SUB
    elif code == RequestCode.RECALL_MESSAGE:  # a write to the topic (5.3's ACL 2.0 asks PUB)
        need[_required(ext, "topic")] = PUB
    elif code in _POP_ACKS:
        topic = _required(ext, "topic")
        if not topic.startswith(RETRY_PREFIX):  # an ack of a pop-retry message names %RETRY%group_topic
            need[topic] = SUB
        need[_retry(_required(ext, "consumerGroup"))] = SUB
    return {resource: perm for resource, perm in need.items() if resource is not None}


def validate(table: AclTable, request: RemotingCommand, host: str) -> None:
    """Raise :class:`AclRefusal` unless ``request`` from ``host`` may pass."""
    ext = request.ext_fields
    need = needed_resources(request) if ext is not None else {}
    access_key = ext.get(ACCESS_KEY) if ext is not None else None

    def signed(secret_key: str) -> bool:
        content = signed_content(ext, request.body, (SIGNATURE, UNIQUE_KEY_QUERY))  # type: ignore[arg-type]
        return signature(content, secret_key) == ext.get(SIGNATURE)  # type: ignore[union-attr]

    authorize(table, host, access_key, signed, need, request.code)


def authorize(table: AclTable, host: str, access_key: str | None, signed: Callable[[str], bool],
              need: dict[str, int], code: int | None = None) -> None:
    """The checks every protocol shares (remoting here, gRPC in rmqtx.grpc.security): white lists, the
    account, its signature (``signed(secret_key)``), admin codes, then each needed resource."""
    for white in table.global_white:
        if white(host):
            return
    if access_key is None:
        raise AclRefusal("No accessKey is configured", _VALIDATE.format(664))
    account = table.accounts.get(access_key)
    if account is None:
        raise AclRefusal(f"No acl config for {access_key}", _VALIDATE.format(668))
    if account.white(host):
        return
    if not signed(account.secret_key):
        raise AclRefusal(f"Check signature failed for accessKey={access_key}", _VALIDATE.format(684))
    if need.get(TRACE_TOPIC) == PUB:
        return
    if code in ADMIN_CODES and not account.admin:
        raise AclRefusal(
            f"Need admin permission for request code={code}, but accessKey={access_key} is not",
            _CHECK_PERM.format(581),
        )
    if not need or (not account.perms and account.admin):
        return
    for resource, perm in need.items():
        is_group = resource.startswith(RETRY_PREFIX)
        owned = account.perms.get(resource)
        line = 611
        if owned is None:
            owned = account.default_group_perm if is_group else account.default_topic_perm
            line = 606
        if not check_perm(perm, owned):
            shown = f"group:{resource[len(RETRY_PREFIX):]}" if is_group else f"topic:{resource}"
            raise AclRefusal(f"No default permission for {shown}", _CHECK_PERM.format(line))
