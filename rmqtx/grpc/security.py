"""ACL on the gRPC endpoint: the 5.x SDKs' signed metadata checked against the broker's plain_acl.yml.

Each call carries ``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time,
Signature=<hex>`` and ``x-mq-date-time``; the signature is the hex HMAC-SHA1 of the date-time text with
the secret key (no freshness check, as Apache's proxy). The resources each request needs are those
Apache's proxy asks of plain ACL (topic PUB to send, group and topic SUB to receive/ack, ...), checked
with the same accounts, white lists and permissions as remoting (``rmqtx.acl.validator.authorize``).
A refusal answers the request's own response with Code UNAUTHORIZED and the ACL message, as Apache
5.3's proxy does for an authentication or authorization failure. Secrets are never logged.
"""

from __future__ import annotations

import binascii
import hmac
from typing import Any, AsyncIterator, Callable

import grpc
from twisted.logger import Logger

from rmqtx.acl.plain import ANY, PUB, SUB
from rmqtx.acl.validator import AclRefusal, authorize
from rmqtx.common.topics import RETRY_PREFIX

log = Logger(namespace="rmqtx.grpc.acl")

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
SERVICE = "/apache.rocketmq.v2.MessagingService/"
#: v2 Code the proxy answers a refused request with (ResponseBuilder: authentication or authorization).
REFUSED = "UNAUTHORIZED"


class Credentials:
    """What one call's metadata says about its caller (the signature as raw bytes)."""

    __slots__ = ("access_key", "signature", "date_time", "problem", "header")

    def __init__(self, metadata: Any) -> None:
        self.access_key: str | None = None
        self.signature: bytes | None = None
        self.date_time: str | None = None
        self.problem: str | None = None
        header = None
        for key, value in metadata or ():
            if key == AUTHORIZATION:
                header = value
            elif key == DATE_TIME:
                self.date_time = value
        self.header = header
        if header:
            self._parse(header)

    def _parse(self, header: str) -> None:
        """Apache's reading: ``METHOD k=v, k=v``; Credential's first ``/`` part is the access key."""
        _, sep, rest = header.partition(" ")
        if not sep:
            self.problem = "authorization header is incorrect"
            return
        for item in rest.split(","):
            key, eq, value = item.strip().partition("=")
            if not eq:
                self.problem = "authorization keyValues length is incorrect, actual length=1"
                return
            if key == "Credential":
                self.access_key = value.split("/")[0]
            elif key == "Signature":
                try:
                    self.signature = binascii.unhexlify(value)
                except (binascii.Error, ValueError):
                    self.problem = "Check signature failed: the signature is not hex"
                    return
        if not self.access_key:  # py5 sends ``Credential=`` (an empty key) when it has no credentials
            self.access_key = None

    def signed(self, secret_key: str) -> bool:
        if self.signature is None or self.date_time is None:
            return False
        expected = hmac.digest(secret_key.encode("utf-8"), self.date_time.encode("utf-8"), "sha1")
        return hmac.compare_digest(expected, self.signature)


#: apache.rocketmq.v2.ClientType PUSH_, SIMPLE_, PULL_, LITE_PUSH_ and LITE_SIMPLE_CONSUMER
_CONSUMERS = frozenset({2, 3, 4, 5, 6})


def _group(resource: Any) -> str:
    return RETRY_PREFIX + resource.name


def needed(method: str, request: Any) -> dict[str, int]:
    """Resource -> permission, as Apache's plain ACL parses a gRPC request (groups as %RETRY% topics)."""
    need: dict[str, int] = {}
    if method == "SendMessage":
        topics = {m.topic.name for m in request.messages}
        if len(topics) > 1:
            raise AclRefusal("SendMessageRequest, messages' topic is not consistent", "")
        for topic in topics:
            need[topic] = PUB
    elif method in ("ReceiveMessage", "PullMessage"):
        need[_group(request.group)] = SUB
        need[request.message_queue.topic.name] = SUB
    elif method in ("AckMessage", "ForwardMessageToDeadLetterQueue", "ChangeInvisibleDuration", "QueryAssignment"):
        need[_group(request.group)] = SUB
        need[request.topic.name] = SUB
    elif method in ("EndTransaction", "RecallMessage"):
        need[request.topic.name] = PUB
    elif method == "NotifyClientTermination":
        if request.HasField("group"):
            need[_group(request.group)] = SUB
    elif method == "QueryRoute":
        need[request.topic.name] = ANY
    elif method == "Heartbeat":
        if request.client_type in _CONSUMERS:  # a producer's heartbeat needs nothing (its group is no resource)
            if not request.HasField("group"):
                raise AclRefusal("Consumer heartbeat doesn't have group", "")
            need[_group(request.group)] = SUB
    elif method in ("UpdateOffset", "GetOffset"):
        need[_group(request.group)] = SUB
        need[request.message_queue.topic.name] = SUB
    elif method == "QueryOffset":
        need[request.message_queue.topic.name] = SUB
    elif method == "SyncLiteSubscription":
        need[_group(request.group)] = SUB
        need[request.topic.name] = SUB
    elif method == "Telemetry" and request.WhichOneof("command") == "settings":
        settings = request.settings
        for topic in settings.publishing.topics:
            need[topic.name] = PUB
        if settings.HasField("subscription"):
            need[_group(settings.subscription.group)] = SUB
            for entry in settings.subscription.subscriptions:
                need[entry.topic.name] = SUB
    need.pop("", None)
    need.pop(RETRY_PREFIX, None)
    return need


def peer_host(context: Any) -> str:
    """``ipv4:1.2.3.4:5`` / ``ipv6:[::1]:5`` -> the address alone."""
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return rest.rpartition(":")[0] if kind == "ipv4" else rest


class AclInterceptor(grpc.aio.ServerInterceptor):
    """Wraps each MessagingService handler (coroutines of grpc.aio) with the ACL check while ``acl()`` gives
    a service. The check is quick (a table lookup and one HMAC), so it runs on the endpoint's loop."""

    def __init__(self, acl: Callable[[], Any], responses: Callable[[str], Any], status: Callable[[str, str], Any],
                 host_of: Callable[[Any], str] = peer_host) -> None:
        self.acl = acl
        self.responses = responses  # method name -> its response class
        self.status = status
        self.host_of = host_of

    async def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = await continuation(details)
        if handler is None or self.acl() is None or not details.method.startswith(SERVICE):
            return handler
        method = details.method[len(SERVICE):]
        credentials = Credentials(details.invocation_metadata)
        response = self.responses(method)
        if response is None:  # not a MessagingService RPC this build knows: grpcio answers UNIMPLEMENTED
            return None
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, credentials, response, handler.unary_unary),
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._server_stream(method, credentials, response, handler.unary_stream),
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._bidi(method, credentials, response, handler.stream_stream),
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
        return handler

    def check(self, method: str, credentials: Credentials, request: Any, context: Any) -> str | None:
        """None when the call may go on, else the refusal's message (logged without secrets)."""
        service = self.acl()
        if service is None:
            return None
        host = self.host_of(context)
        if hasattr(service, "check_pairs"):  # ACL 2.0 (rmqtx.acl2.service.AuthService)
            from rmqtx.grpc.security2 import refusal as acl2_refusal

            why = acl2_refusal(service, method, credentials, request, host)
            if why is not None:
                log.info("ACL 2.0 refused gRPC {method} from {host}: {why}", method=method, host=host, why=why)
            return why
        try:
            if credentials.problem is not None:
                raise AclRefusal(credentials.problem, "")
            authorize(service.table, host, credentials.access_key, credentials.signed, needed(method, request))
        except AclRefusal as refusal:
            log.warn("ACL refused gRPC {method} from {host}: {why}", method=method, host=host, why=str(refusal))
            return str(refusal)
        except Exception as exc:  # a bug here refuses (never lets the call through unchecked)
            log.failure("ACL check of gRPC {method} failed", method=method)
            return f"ACL check failed: {type(exc).__name__}"
        return None

    def _unary(self, method: str, credentials: Credentials, response: Any, inner: Callable) -> Callable:
        async def checked(request: Any, context: Any) -> Any:
            why = self.check(method, credentials, request, context)
            if why is not None:
                return response(status=self.status(REFUSED, why))
            return await inner(request, context)

        return checked

    def _server_stream(self, method: str, credentials: Credentials, response: Any, inner: Callable) -> Callable:
        async def checked(request: Any, context: Any) -> AsyncIterator[Any]:
            why = self.check(method, credentials, request, context)
            if why is not None:
                yield response(status=self.status(REFUSED, why))
                return
            async for item in inner(request, context):
                yield item

        return checked

    def _bidi(self, method: str, credentials: Credentials, response: Any, inner: Callable) -> Callable:
        """Telemetry: each command checked as it arrives; a refused one is answered with its status and
        the stream stays open, as Apache's proxy does (the SDK waits on for settings it never gets)."""

        async def checked(request_iterator: Any, context: Any) -> AsyncIterator[Any]:
            async def commands() -> AsyncIterator[Any]:
                async for command in request_iterator:
                    why = self.check(method, credentials, command, context)
                    yield command if why is None else Refused(response(status=self.status(REFUSED, why)))

            async for item in inner(commands(), context):  # an async generator, as grpc.aio wants a handler
                yield item

        return checked


class Refused:
    """Stands in for a refused Telemetry command: the servicer sends ``refusal`` back instead of acting on it."""

    __slots__ = ("refusal",)

    def __init__(self, refusal: Any) -> None:
        self.refusal = refusal
