"""grpcio's thread-pool server beside the reactor: each call is handed to the reactor with
``blockingCallFromThread`` (the grpcio thread waits, the reactor never does); a Telemetry stream holds
one pool thread for its responses and one reader thread for the client's commands.
"""

from __future__ import annotations

import queue
import threading
from concurrent import futures
from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer, threads
from twisted.logger import Logger

from rmqtx.grpc import stubs
from rmqtx.grpc.backend import GrpcBackend, GrpcError, TelemetrySession

log = Logger(namespace="rmqtx.grpc")

#: Pool threads: every open Telemetry stream holds one for as long as the client lives.
MAX_WORKERS = 64
#: Inbound frames up to Apache's proxy default (grpcMaxInboundMessageSize 130 MiB): bodies over the
#: broker's maxMessageSize get MESSAGE_BODY_TOO_LARGE, not a transport error.
MAX_INBOUND = 130 * 1024 * 1024
#: The consumer side (POP over gRPC) is not built yet: these answer NOT_IMPLEMENTED.
UNBUILT = {
    "QueryAssignment": "QueryAssignmentResponse",
    "AckMessage": "AckMessageResponse",
    "ForwardMessageToDeadLetterQueue": "ForwardMessageToDeadLetterQueueResponse",
    "ChangeInvisibleDuration": "ChangeInvisibleDurationResponse",
    "UpdateOffset": "UpdateOffsetResponse",
    "GetOffset": "GetOffsetResponse",
    "QueryOffset": "QueryOffsetResponse",
    "RecallMessage": "RecallMessageResponse",
    "SyncLiteSubscription": "SyncLiteSubscriptionResponse",
}
UNBUILT_STREAMS = {"ReceiveMessage": "ReceiveMessageResponse", "PullMessage": "PullMessageResponse"}


def _client_id(context: Any) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "x-mq-client-id":
            return value
    return ""


class MessagingServicer:
    """apache.rocketmq.v2.MessagingService; grpcio calls these on its pool threads."""

    def __init__(self, backend: GrpcBackend, reactor: Any) -> None:
        self.backend = backend
        self.reactor = reactor
        self.d, self.s, _ = stubs.load()
        for name, response in UNBUILT.items():
            setattr(self, name, self._unbuilt(response))
        for name, response in UNBUILT_STREAMS.items():
            setattr(self, name, self._unbuilt_stream(response))

    # -- helpers ------------------------------------------------------------------------------
    def _status(self, code: str = "OK", message: str = "OK") -> Any:
        return self.d.Status(code=self.d.Code.Value(code), message=message)

    def _on_reactor(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run ``func`` (plain or async) on the reactor and wait here for its result."""

        def call() -> Any:
            result = func(*args)
            if hasattr(result, "__await__"):
                return defer.ensureDeferred(result)
            return result

        return threads.blockingCallFromThread(self.reactor, call)

    def _unbuilt(self, response: str) -> Callable[[Any, Any], Any]:
        def handler(request: Any, context: Any) -> Any:
            return getattr(self.s, response)(status=self._status("NOT_IMPLEMENTED", "needs POP over gRPC (not built yet)"))

        return handler

    def _unbuilt_stream(self, response: str) -> Callable[[Any, Any], Any]:
        def handler(request: Any, context: Any) -> Any:
            yield getattr(self.s, response)(status=self._status("NOT_IMPLEMENTED", "needs POP over gRPC (not built yet)"))

        return handler

    # -- unary --------------------------------------------------------------------------------
    def QueryRoute(self, request: Any, context: Any) -> Any:
        topic = request.topic.name
        try:
            queues = self._on_reactor(self.backend.route, topic)
            host, port = self._on_reactor(self.backend.endpoint)
        except GrpcError as exc:
            return self.s.QueryRouteResponse(status=self._status(exc.code, exc.message))
        d = self.d
        endpoints = d.Endpoints(scheme=d.AddressScheme.IPv4, addresses=[d.Address(host=host, port=port)])
        broker = d.Broker(name=self.backend.broker_name, id=0, endpoints=endpoints)
        accept = [d.MessageType.NORMAL, d.MessageType.FIFO, d.MessageType.DELAY, d.MessageType.TRANSACTION]
        mqs = [
            d.MessageQueue(topic=d.Resource(name=topic, resource_namespace=request.topic.resource_namespace), id=qid,
                           permission=d.Permission.Value(perm), broker=broker, accept_message_types=accept)
            for qid, perm in queues
        ]
        return self.s.QueryRouteResponse(status=self._status(), message_queues=mqs)

    def Heartbeat(self, request: Any, context: Any) -> Any:
        if not _client_id(context):
            return self.s.HeartbeatResponse(status=self._status("CLIENT_ID_REQUIRED", "x-mq-client-id is missing"))
        return self.s.HeartbeatResponse(status=self._status())

    def SendMessage(self, request: Any, context: Any) -> Any:
        if not request.messages:
            return self.s.SendMessageResponse(status=self._status("BAD_REQUEST", "no message to send"))
        entries = []
        first_error: GrpcError | None = None
        for msg in request.messages:
            try:
                outcome = self._on_reactor(self.backend.send, msg, self.d)
                entries.append(self.s.SendResultEntry(status=self._status(), message_id=outcome.message_id,
                                                      transaction_id=outcome.transaction_id, offset=outcome.offset))
            except GrpcError as exc:
                first_error = first_error or exc
                entries.append(self.s.SendResultEntry(status=self._status(exc.code, exc.message),
                                                      message_id=msg.system_properties.message_id))
            except Exception as exc:  # a bug here must still answer, as the proxy's INTERNAL_SERVER_ERROR
                log.failure("gRPC send failed")
                error = GrpcError("INTERNAL_SERVER_ERROR", f"{type(exc).__name__}: {exc}")
                first_error = first_error or error
                entries.append(self.s.SendResultEntry(status=self._status(error.code, error.message),
                                                      message_id=msg.system_properties.message_id))
        if first_error is None:
            status = self._status()
        elif len(entries) == 1:
            status = self._status(first_error.code, first_error.message)
        else:
            status = self._status("MULTIPLE_RESULTS", "some messages failed")
        return self.s.SendMessageResponse(status=status, entries=entries)

    def EndTransaction(self, request: Any, context: Any) -> Any:
        d = self.d
        if request.resolution not in (d.TransactionResolution.COMMIT, d.TransactionResolution.ROLLBACK):
            return self.s.EndTransactionResponse(status=self._status("BAD_REQUEST", "resolution must be COMMIT or ROLLBACK"))
        try:
            self._on_reactor(self.backend.end_transaction, request.topic.name, request.transaction_id, request.message_id,
                             request.resolution == d.TransactionResolution.COMMIT,
                             request.source == d.TransactionSource.SOURCE_SERVER_CHECK)
        except GrpcError as exc:
            return self.s.EndTransactionResponse(status=self._status(exc.code, exc.message))
        return self.s.EndTransactionResponse(status=self._status())

    def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        client_id = _client_id(context)
        if not client_id:
            return self.s.NotifyClientTerminationResponse(status=self._status("CLIENT_ID_REQUIRED", "x-mq-client-id is missing"))
        self._on_reactor(self.backend.forget_client, client_id)
        return self.s.NotifyClientTerminationResponse(status=self._status())

    # -- Telemetry ----------------------------------------------------------------------------
    def Telemetry(self, request_iterator: Any, context: Any) -> Any:
        """Settings in, settings out; check-backs pushed as RecoverOrphanedTransactionCommand."""
        outbox: queue.Queue = queue.Queue()
        done = threading.Event()
        session: TelemetrySession = self._on_reactor(self.backend.open_session, _client_id(context), outbox.put)

        def read() -> None:
            try:
                for command in request_iterator:
                    reply = self._on_telemetry(session, command)
                    if reply is not None:
                        outbox.put(reply)
            except Exception as exc:  # the client went away: grpc raises on the iterator
                log.debug("telemetry stream ended: {exc}", exc=exc)
            finally:
                done.set()
                outbox.put(None)

        threading.Thread(target=read, name="rmqtx-grpc-telemetry", daemon=True).start()
        try:
            while context.is_active() and not done.is_set() or not outbox.empty():
                try:
                    item = outbox.get(timeout=1.0)
                except queue.Empty:
                    continue
                if item is None:
                    break
                if isinstance(item, tuple):
                    item = self._recover_command(*item[1:])
                yield item
        finally:
            self.reactor.callFromThread(self.backend.close_session, session)

    def _on_telemetry(self, session: TelemetrySession, command: Any) -> Any:
        which = command.WhichOneof("command")
        if which != "settings":
            return None  # thread stack traces, verify results: nothing asked for them
        settings = command.settings
        topics = [r.name for r in settings.publishing.topics] if settings.HasField("publishing") else []
        self._on_reactor(self.backend.update_settings, session, settings.client_type, topics)
        reply = self.d.Settings()
        reply.CopyFrom(settings)
        if settings.HasField("publishing"):
            reply.publishing.max_body_size = self.backend.broker.config.maxMessageSize
            reply.publishing.validate_message_type = False
            reply.backoff_policy.max_attempts = 3
            backoff = reply.backoff_policy.exponential_backoff
            backoff.initial.FromMilliseconds(10)
            backoff.max.FromMilliseconds(1000)
            backoff.multiplier = 2.0
        reply.metric.on = False
        return self.s.TelemetryCommand(status=self._status(), settings=reply)

    def _recover_command(self, topic: str, transaction_id: str, msg: Any) -> Any:
        d = self.d
        props = msg.properties
        sysp = d.SystemProperties(
            message_id=props.get("UNIQ_KEY") or msg.msg_id, message_type=d.MessageType.TRANSACTION,
            body_encoding=d.Encoding.IDENTITY, queue_id=int(props.get("REAL_QID") or msg.queue_id),
            queue_offset=msg.queue_offset, born_host=msg.born_host.split(":")[0], store_host=msg.store_host,
            # a digest of no type: the SDKs write CRC32 checksums differently (padded or not, hex or decimal),
            # and rocketmq-client-nodejs cannot read a check-back's message without the field
            body_digest=d.Digest(),
        )
        if props.get("TAGS"):
            sysp.tag = props["TAGS"]
        if props.get("KEYS"):
            sysp.keys.extend(props["KEYS"].split())
        sysp.born_timestamp.FromMilliseconds(msg.born_timestamp)
        sysp.store_timestamp.FromMilliseconds(msg.store_timestamp)
        user = {k: v for k, v in props.items() if k not in _SYSTEM_PROPERTIES}
        message = d.Message(topic=d.Resource(name=topic), user_properties=user, system_properties=sysp, body=msg.body)
        command = self.s.RecoverOrphanedTransactionCommand(message=message, transaction_id=transaction_id)
        return self.s.TelemetryCommand(status=self._status(), recover_orphaned_transaction_command=command)


#: Properties the broker and proxy set, never shown as user properties.
_SYSTEM_PROPERTIES = frozenset({
    "UNIQ_KEY", "TAGS", "KEYS", "WAIT", "PGROUP", "TRAN_MSG", "REAL_TOPIC", "REAL_QID", "DELAY", "__SHARDINGKEY",
    "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS", "MIN_OFFSET", "MAX_OFFSET", "CLUSTER",
    "MSG_REGION", "TRACE_ON",
})


class GrpcEndpoint(service.Service):
    """The gRPC endpoint as a child of the broker: starts after it listens, stops before it does."""

    def __init__(self, broker: Any, port: int, address: str, reactor: Any) -> None:
        self.broker = broker
        self.port = port
        self.address = address
        self.reactor = reactor
        self.server: Any = None
        self.backend = GrpcBackend(broker, self.advertised, reactor)

    def advertised(self) -> tuple[str, int]:
        host = self.address if self.address not in ("0.0.0.0", "::", "") else self.broker.config.brokerIP1
        return host, self.port

    def startService(self) -> None:
        import grpc

        _, _, service_grpc = stubs.load()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="rmqtx-grpc"),
                                  options=[("grpc.max_receive_message_length", MAX_INBOUND)])
        service_grpc.add_MessagingServiceServicer_to_server(MessagingServicer(self.backend, self.reactor), self.server)
        bound = self.server.add_insecure_port(f"{self.address}:{self.port}")
        if bound == 0:
            raise RuntimeError(f"gRPC endpoint cannot bind {self.address}:{self.port}")
        self.port = bound
        self.server.start()
        self.backend.start()
        log.info("gRPC endpoint (apache.rocketmq.v2.MessagingService) listening on {addr}:{port}",
                 addr=self.address, port=self.port)
        super().startService()

    async def _stop(self) -> None:
        if self.server is not None:
            stopped = self.server.stop(grace=1.0)
            await threads.deferToThread(stopped.wait, 5.0)
        await self.backend.stop()

    def stopService(self) -> "defer.Deferred[None]":
        super().stopService()
        return defer.ensureDeferred(self._stop())
