"""ACL 2.0 on the gRPC endpoint, as Apache 5.4.0's proxy checks a call: the ``authorization`` metadata
read as its DefaultAuthenticationContextBuilder reads it (the signature is the hex HMAC-SHA1 of the
``x-mq-date-time`` text with the user's password), then the (resource, actions) pairs its
DefaultAuthorizationContextBuilder derives from the request message. The users, ACLs and decisions
are the broker's (rmqtx.acl2.service). A refusal is Code UNAUTHORIZED with Apache's message, as the
proxy answers both kinds.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from rmqtx.acl2.contexts import Wanted
from rmqtx.acl2.model import Resource
from rmqtx.acl2.service import AuthService, Refused

#: apache.rocketmq.v2.ClientType PUSH_CONSUMER, SIMPLE_CONSUMER, PULL_CONSUMER (Apache's isConsumerClientType)
_CONSUMERS = frozenset({2, 3, 4})
SUB, PUB = ("Sub",), ("Pub",)


def _java_split(text: str, sep: str) -> list[str]:
    """Java's String.split(literal): trailing empty strings dropped (a text without ``sep`` stays whole)."""
    if sep not in text:
        return [text]
    parts = re.split(re.escape(sep), text)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def identity(credentials: Any) -> tuple[str | None, str | None, bytes]:
    """(username, base64 signature, signed content) from the call's metadata; raises Refused as Apache does."""
    header = credentials.header
    if not header:
        return None, None, b""
    if not credentials.date_time:
        raise Refused("datetime is null.")
    head = header.split(" ", 1)
    if len(head) != 2:
        raise Refused("authentication header is incorrect.")
    username = signature = None
    for item in _java_split(head[1], ","):
        kv = item.strip().split("=", 1)
        if len(kv) != 2:
            raise Refused(f"authentication keyValues length is incorrect, actual length={len(kv)}.")
        if kv[0] == "Credential":
            parts = _java_split(kv[1], "/")
            if not parts:
                raise Refused("authentication credential length is incorrect, actual length=0.")
            username = parts[0]
        elif kv[0] == "Signature":
            try:
                signature = base64.b64encode(binascii.unhexlify(kv[1])).decode("ascii")
            except (binascii.Error, ValueError):
                raise Refused("create authentication context error.") from None
    return username, signature, credentials.date_time.encode("utf-8")


def _named(resource: Any, kind: str) -> str:
    name = resource.name if resource is not None else ""
    if not name or not name.strip():
        raise Refused(f"{kind} is null.")
    return name


def _sub(group: Any, topic: Any) -> list[Wanted]:
    return [Wanted(Resource.group(_named(group, "group")), SUB), Wanted(Resource.topic(_named(topic, "topic")), SUB)]


def wanted(method: str, request: Any) -> list[Wanted]:
    """The pairs Apache's proxy checks for one request message (none for the calls it does not list)."""
    if method == "SendMessage":
        if not request.messages:
            raise Refused("message is null.")
        return [Wanted(Resource.topic(_named(request.messages[0].topic, "topic")), PUB)]
    if method in ("RecallMessage", "EndTransaction"):
        return [Wanted(Resource.topic(_named(request.topic, "topic")), PUB)]
    if method == "Heartbeat":
        if request.client_type not in _CONSUMERS:
            return []
        return [Wanted(Resource.group(_named(request.group, "group")), SUB)]
    if method == "ReceiveMessage":
        if not request.HasField("message_queue"):
            raise Refused("messageQueue is null.")
        return _sub(request.group, request.message_queue.topic)
    if method in ("AckMessage", "ForwardMessageToDeadLetterQueue", "QueryAssignment"):
        return _sub(request.group, request.topic)
    if method == "NotifyClientTermination":
        return [Wanted(Resource.group(request.group.name), SUB)] if request.group.name.strip() else []
    if method == "ChangeInvisibleDuration":
        return [Wanted(Resource.group(_named(request.group, "group")), SUB)]
    if method == "QueryRoute":
        return [Wanted(Resource.topic(_named(request.topic, "topic")), ("Pub", "Sub"))]
    if method == "Telemetry" and request.WhichOneof("command") == "settings":
        settings = request.settings
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise Refused("settings command doesn't have publishing or subscription.")
        out = [Wanted(Resource.topic(_named(t, "topic")), PUB) for t in settings.publishing.topics]
        if settings.HasField("subscription"):
            out.append(Wanted(Resource.group(_named(settings.subscription.group, "group")), SUB))
            out += [Wanted(Resource.topic(_named(e.topic, "topic")), SUB) for e in settings.subscription.subscriptions]
        return out
    return []


def refusal(auth: AuthService, method: str, credentials: Any, request: Any, host: str) -> str | None:
    """None when the call may go on, else Apache's message."""
    rpc = request.DESCRIPTOR.full_name
    settings = auth.settings
    try:
        username, signature, content = identity(credentials)
        if settings.authentication and rpc not in settings.authn_whitelist:
            auth.check_user(username, lambda: content, signature)
        if settings.authorization and rpc not in settings.authz_whitelist:
            pairs = wanted(method, request)
            if pairs:
                auth.check_pairs(username if settings.authentication else None, pairs, host)
    except Refused as why:
        return str(why)
    return None
