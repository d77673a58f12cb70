"""The gRPC endpoint: grpcio's asyncio server (``grpc.aio``) on one event loop in one thread of its own.

Every handler is a coroutine on that loop and hands its work to the reactor through
``rmqtx.grpc.aioloop.ReactorBridge`` (``callFromThread`` there, the answer back with
``call_soon_threadsafe``), so a call waiting on the broker is a pending future, not a thread: hundreds
of long-polling ReceiveMessage calls and open Telemetry streams cost memory only, and QueryRoute,
Heartbeat or SendMessage never queue behind them (with the thread-pool server they did, once 64
long-lived calls held every pool thread). Why not Twisted's asyncioreactor for the whole process:
it would change the reactor of the entire broker (remoting, store, HA, console) for one optional
endpoint, for no measured gain; the price of two loops, a cross-thread wake-up per hop, left
sequential round trips where the thread-pool server had them (figures in docs/grpc.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer, threads
from twisted.logger import Logger

from rmqtx.common import topic_attributes
from rmqtx.grpc import consumer, offsets, stubs
from rmqtx.grpc.aioloop import LoopThread, ReactorBridge
from rmqtx.grpc.backend import GrpcBackend, GrpcError, TelemetrySession
from rmqtx.grpc.recall import recall
from rmqtx.startup import StartupError, listen_failure

log = Logger(namespace="rmqtx.grpc")

#: How long stopService lets calls in flight finish before cancelling them.
STOP_GRACE_S = 1.0
#: Inbound frames up to Apache's proxy default (grpcMaxInboundMessageSize 130 MiB): bodies over the
#: broker's maxMessageSize get MESSAGE_BODY_TOO_LARGE, not a transport error.
MAX_INBOUND = 130 * 1024 * 1024
#: Not built: these answer NOT_IMPLEMENTED.
UNBUILT = {
    "SyncLiteSubscription": "SyncLiteSubscriptionResponse",
}
#: Told to consumers in their settings (Apache's proxy: 32 a receive, 20 s long polling by default).
CONSUMER_BATCH = 32
CONSUMER_LONG_POLLING_S = 20
UNBUILT_STREAMS: dict[str, str] = {}


def _metadata(context: Any, name: str) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return value
    return ""


def _client_id(context: Any) -> str:
    return _metadata(context, "x-mq-client-id")


class MessagingServicer:
    """apache.rocketmq.v2.MessagingService; grpc.aio runs these as coroutines on the endpoint's loop."""

    def __init__(self, backend: GrpcBackend, reactor: Any, bridge: ReactorBridge) -> None:
        self.backend = backend
        self.reactor = reactor
        self.bridge = bridge
        self.d, self.s, _ = stubs.load()
        for name, response in UNBUILT.items():
            setattr(self, name, self._unbuilt(response))
        for name, response in UNBUILT_STREAMS.items():
            setattr(self, name, self._unbuilt_stream(response))

    # -- helpers ------------------------------------------------------------------------------
    def response_class(self, method: str) -> Any:
        """The response message of an RPC (what a refusal is answered with)."""
        found = self.s.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name.get(method)
        return getattr(self.s, found.output_type.name) if found is not None else None

    def _status(self, code: str = "OK", message: str = "OK") -> Any:
        return self.d.Status(code=self.d.Code.Value(code), message=message)

    def _on_reactor(self, func: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        """Run ``func`` (plain or async) on the reactor; await the result (or its error) on the loop."""
        return self.bridge.call(func, *args)

    def _unbuilt(self, response: str) -> Callable[[Any, Any], Any]:
        async def handler(request: Any, context: Any) -> Any:
            return getattr(self.s, response)(status=self._status("NOT_IMPLEMENTED", "not built in rmqtx yet"))

        return handler

    def _unbuilt_stream(self, response: str) -> Callable[[Any, Any], Any]:
        async def handler(request: Any, context: Any) -> Any:
            yield getattr(self.s, response)(status=self._status("NOT_IMPLEMENTED", "not built in rmqtx yet"))

        return handler

    # -- unary --------------------------------------------------------------------------------
    async def QueryRoute(self, request: Any, context: Any) -> Any:
        topic = request.topic.name
        try:
            queues = await self._on_reactor(self.backend.route, topic)
            host, port = await self._on_reactor(self.backend.endpoint)
            topic_type = await self._on_reactor(self.backend.topic_message_type, topic)
        except GrpcError as exc:
            return self.s.QueryRouteResponse(status=self._status(exc.code, exc.message))
        d = self.d
        endpoints = d.Endpoints(scheme=d.AddressScheme.IPv4, addresses=[d.Address(host=host, port=port)])
        broker = d.Broker(name=self.backend.broker_name, id=0, endpoints=endpoints)
        accept = self._accepted_types(topic_type)
        mqs = [
            d.MessageQueue(topic=d.Resource(name=topic, resource_namespace=request.topic.resource_namespace), id=qid,
                           permission=d.Permission.Value(perm), broker=broker, accept_message_types=accept)
            for qid, perm in queues
        ]
        return self.s.QueryRouteResponse(status=self._status(), message_queues=mqs)

    def _accepted_types(self, topic_type: str) -> list[Any]:
        """A queue's accept_message_types from its topic's message.type, as the proxy's route lists them."""
        d = self.d
        if topic_type == topic_attributes.MIXED:
            return [d.MessageType.NORMAL, d.MessageType.FIFO, d.MessageType.DELAY, d.MessageType.TRANSACTION]
        if topic_type in (topic_attributes.NORMAL, topic_attributes.FIFO, topic_attributes.DELAY,
                          topic_attributes.TRANSACTION):
            return [d.MessageType.Value(topic_type)]
        return [d.MessageType.MESSAGE_TYPE_UNSPECIFIED]

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        if not _client_id(context):
            return self.s.HeartbeatResponse(status=self._status("CLIENT_ID_REQUIRED", "x-mq-client-id is missing"))
        return self.s.HeartbeatResponse(status=self._status())

    async def SendMessage(self, request: Any, context: Any) -> Any:
        """As the proxy: every message checked first (one topic for all; any refusal answers the whole call,
        with no entries), then each stored, its result an entry."""
        if not request.messages:
            return self.s.SendMessageResponse(status=self._status("MESSAGE_CORRUPTED", "no message to send"))
        topic = request.messages[0].topic
        prepared = []
        try:
            for msg in request.messages:
                if msg.topic != topic:
                    raise GrpcError("MESSAGE_CORRUPTED", "topic in message is not same")
                prepared.append(await self._on_reactor(self.backend.prepare_send, msg, self.d))
        except GrpcError as exc:
            return self.s.SendMessageResponse(status=self._status(exc.code, exc.message))
        except Exception as exc:  # a bug here must still answer, as the proxy's INTERNAL_SERVER_ERROR
            log.failure("gRPC send failed")
            return self.s.SendMessageResponse(status=self._status("INTERNAL_SERVER_ERROR", f"{type(exc).__name__}: {exc}"))
        entries = []
        first_error: GrpcError | None = None
        for msg, ready in zip(request.messages, prepared):
            try:
                outcome = await self._on_reactor(self.backend.send_prepared, ready)
                entries.append(self.s.SendResultEntry(status=self._status(), message_id=outcome.message_id,
                                                      transaction_id=outcome.transaction_id, offset=outcome.offset,
                                                      recall_handle=outcome.recall_handle))
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

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        d = self.d
        try:  # as the proxy: the topic first
            await self._on_reactor(self.backend.validate_topic, request.topic.name)
        except GrpcError as exc:
            return self.s.EndTransactionResponse(status=self._status(exc.code, exc.message))
        if request.resolution not in (d.TransactionResolution.COMMIT, d.TransactionResolution.ROLLBACK):
            return self.s.EndTransactionResponse(status=self._status("BAD_REQUEST", "resolution must be COMMIT or ROLLBACK"))
        try:
            await self._on_reactor(self.backend.end_transaction, request.topic.name, request.transaction_id, request.message_id,
                             request.resolution == d.TransactionResolution.COMMIT,
                             request.source == d.TransactionSource.SOURCE_SERVER_CHECK)
        except GrpcError as exc:
            return self.s.EndTransactionResponse(status=self._status(exc.code, exc.message))
        return self.s.EndTransactionResponse(status=self._status())

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        client_id = _client_id(context)
        if not client_id:
            return self.s.NotifyClientTerminationResponse(status=self._status("CLIENT_ID_REQUIRED", "x-mq-client-id is missing"))
        await self._on_reactor(self.backend.forget_client, client_id)
        return self.s.NotifyClientTerminationResponse(status=self._status())

    # -- consumer side (POP) --------------------------------------------------------------------
    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        """As the proxy assigns: the whole broker (queue id -1, every queue popped) to each consumer, or
        for an orderly group each readable queue; FORBIDDEN when none is readable."""
        topic = request.topic.name
        try:
            await self._on_reactor(self.backend.validate_topic_and_group, topic, request.group.name)
            queues = await self._on_reactor(self.backend.route, topic)
            host, port = await self._on_reactor(self.backend.endpoint)
            fifo = await self._on_reactor(self.backend.group_is_fifo, request.group.name)
        except GrpcError as exc:
            return self.s.QueryAssignmentResponse(status=self._status(exc.code, exc.message))
        d = self.d
        readable = [(qid, perm) for qid, perm in queues if perm in ("READ", "READ_WRITE")]
        if not readable:
            return self.s.QueryAssignmentResponse(status=self._status("FORBIDDEN", "no readable queue"))
        endpoints = d.Endpoints(scheme=d.AddressScheme.IPv4, addresses=[d.Address(host=host, port=port)])
        broker = d.Broker(name=self.backend.broker_name, id=0, endpoints=endpoints)
        resource = d.Resource(name=topic, resource_namespace=request.topic.resource_namespace)
        permission = d.Permission.Value(readable[0][1])
        ids = [qid for qid, _ in readable] if fifo else [-1]
        assignments = [d.Assignment(message_queue=d.MessageQueue(topic=resource, id=qid, permission=permission,
                                                                 broker=broker)) for qid in ids]
        return self.s.QueryAssignmentResponse(status=self._status(), assignments=assignments)

    async def ReceiveMessage(self, request: Any, context: Any) -> Any:
        """POP_MESSAGE, long polling up to long_polling_timeout; then status, messages, delivery timestamp."""
        topic = request.message_queue.topic.name
        group = request.group.name
        try:
            await self._on_reactor(self.backend.validate_topic_and_group, topic, group)
        except GrpcError as exc:
            yield self.s.ReceiveMessageResponse(status=self._status(exc.code, exc.message))
            return
        if request.batch_size <= 0:
            yield self.s.ReceiveMessageResponse(status=self._status("BAD_REQUEST", "batch_size must be positive"))
            return
        try:
            invisible_ms = consumer.receive_invisible_ms(self.backend, request)
        except GrpcError as exc:
            yield self.s.ReceiveMessageResponse(status=self._status(exc.code, exc.message))
            return
        remaining = context.time_remaining()
        if request.HasField("long_polling_timeout"):
            poll_ms = request.long_polling_timeout.ToMilliseconds()
        else:  # as the proxy: from the deadline and the client's request timeout
            request_timeout = await self._on_reactor(self.backend.request_timeout_ms, _client_id(context),
                                               consumer.DEFAULT_REQUEST_TIMEOUT_MS)
            implied = consumer.implied_polling_ms(None if remaining is None else int(remaining * 1000), request_timeout)
            if implied is None:
                code = consumer.short_deadline_code(_metadata(context, "x-mq-client-version"))
                yield self.s.ReceiveMessageResponse(status=self._status(
                    code, f"under {consumer.MIN_POLL_MS} ms left before the deadline to long poll"))
                return
            poll_ms = implied
        if remaining is not None:
            poll_ms = max(0, min(poll_ms, int((remaining - consumer.DEADLINE_MARGIN_S) * 1000)))
        expression = request.filter_expression
        sql = expression.type == self.d.FilterType.SQL
        try:
            fifo, max_attempts, _ = await self._on_reactor(self.backend.consumer_policy, group)
            msgs = await self._on_reactor(consumer.receive, self.backend, group, topic, "SQL92" if sql else "TAG",
                                    expression.expression or "*", request.batch_size, invisible_ms, poll_ms, fifo,
                                    request.attempt_id if request.HasField("attempt_id") else "", max_attempts)
        except GrpcError as exc:
            yield self.s.ReceiveMessageResponse(status=self._status(exc.code, exc.message))
            return
        except Exception as exc:
            log.failure("gRPC receive failed")
            yield self.s.ReceiveMessageResponse(status=self._status("INTERNAL_SERVER_ERROR", f"{type(exc).__name__}: {exc}"))
            return
        if not msgs:
            yield self.s.ReceiveMessageResponse(status=self._status("MESSAGE_NOT_FOUND", "no new message"))
            return
        yield self.s.ReceiveMessageResponse(status=self._status())
        for msg in msgs:
            yield self.s.ReceiveMessageResponse(message=self._to_message(topic, msg))
        response = self.s.ReceiveMessageResponse()
        response.delivery_timestamp.GetCurrentTime()
        yield response

    async def AckMessage(self, request: Any, context: Any) -> Any:
        group, topic = request.group.name, request.topic.name
        try:  # the request's topic and group first, as the proxy: a refusal is the call's answer, with no entries
            await self._on_reactor(self.backend.validate_topic_and_group, topic, group)
        except GrpcError as exc:
            return self.s.AckMessageResponse(status=self._status(exc.code, exc.message))
        entries = []
        for entry in request.entries:
            try:
                await self._on_reactor(consumer.ack, self.backend, group, topic, entry.receipt_handle)
                status = self._status()
            except GrpcError as exc:
                status = self._status(exc.code, exc.message)
            entries.append(self.s.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                                        status=status))
        return self.s.AckMessageResponse(status=self._ack_summary([e.status.code for e in entries]), entries=entries)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        invisible_ms = request.invisible_duration.ToMilliseconds()  # consumer.change_invisible checks its bounds
        try:
            await self._on_reactor(self.backend.validate_topic_and_group, request.topic.name, request.group.name)
            handle = await self._on_reactor(consumer.change_invisible, self.backend, request.group.name, request.topic.name,
                                      request.receipt_handle, invisible_ms)
        except GrpcError as exc:
            return self.s.ChangeInvisibleDurationResponse(status=self._status(exc.code, exc.message))
        return self.s.ChangeInvisibleDurationResponse(status=self._status(), receipt_handle=handle)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        try:
            await self._on_reactor(self.backend.validate_topic_and_group, request.topic.name, request.group.name)
            await self._on_reactor(consumer.to_dead_letter, self.backend, request.group.name, request.topic.name,
                             request.receipt_handle, request.message_id, request.max_delivery_attempts)
        except GrpcError as exc:
            return self.s.ForwardMessageToDeadLetterQueueResponse(status=self._status(exc.code, exc.message))
        return self.s.ForwardMessageToDeadLetterQueueResponse(status=self._status())

    # -- offsets and pulls of one queue ----------------------------------------------------------
    async def _answer(self, response: str, func: Callable[..., Any], *args: Any, **fields: Any) -> Any:
        """Run ``func`` on the reactor; ``response`` with OK and ``fields(result)``, or with the error's code."""
        try:
            result = await self._on_reactor(func, self.backend, *args)
        except GrpcError as exc:
            return getattr(self.s, response)(status=self._status(exc.code, exc.message))
        except Exception as exc:
            log.failure("gRPC {what} failed", what=response)
            return getattr(self.s, response)(status=self._status("INTERNAL_SERVER_ERROR", f"{type(exc).__name__}: {exc}"))
        extra = {name: pick(result) for name, pick in fields.items()}
        return getattr(self.s, response)(status=self._status(), **extra)

    async def GetOffset(self, request: Any, context: Any) -> Any:
        """The group's committed offset of one queue (QUERY_CONSUMER_OFFSET)."""
        return await self._answer("GetOffsetResponse", offsets.get_offset, request.group.name,
                                  request.message_queue.topic.name, request.message_queue.id, offset=lambda r: r)

    async def QueryOffset(self, request: Any, context: Any) -> Any:
        """A queue's offset by policy: BEGINNING, END or TIMESTAMP."""
        known = self.d.QueryOffsetPolicy.values()
        policy = self.d.QueryOffsetPolicy.Name(request.query_offset_policy) if request.query_offset_policy in known else ""
        stamp = request.timestamp.ToMilliseconds() if request.HasField("timestamp") else None
        return await self._answer("QueryOffsetResponse", offsets.query_offset, request.message_queue.topic.name,
                                  request.message_queue.id, policy, stamp, offset=lambda r: r)

    async def UpdateOffset(self, request: Any, context: Any) -> Any:
        """Commit the group's offset of one queue (UPDATE_CONSUMER_OFFSET)."""
        return await self._answer("UpdateOffsetResponse", offsets.update_offset, request.group.name,
                                  request.message_queue.topic.name, request.message_queue.id, request.offset)

    async def PullMessage(self, request: Any, context: Any) -> Any:
        """PULL_MESSAGE of one queue from an offset, long polling: status, messages, then the next offset."""
        queue = request.message_queue
        topic = queue.topic.name
        poll_ms = request.long_polling_timeout.ToMilliseconds() if request.HasField("long_polling_timeout") else 0
        remaining = context.time_remaining()
        if remaining is not None:
            poll_ms = max(0, min(poll_ms, int((remaining - consumer.DEADLINE_MARGIN_S) * 1000)))
        expression = request.filter_expression
        kind = "SQL92" if expression.type == self.d.FilterType.SQL else "TAG"
        try:
            pulled = await self._on_reactor(offsets.pull, self.backend, request.group.name, topic, queue.id, request.offset,
                                      request.batch_size, kind, expression.expression or "*", poll_ms)
        except GrpcError as exc:
            yield self.s.PullMessageResponse(status=self._status(exc.code, exc.message))
            return
        except Exception as exc:
            log.failure("gRPC pull failed")
            yield self.s.PullMessageResponse(status=self._status("INTERNAL_SERVER_ERROR", f"{type(exc).__name__}: {exc}"))
            return
        if pulled.messages:
            yield self.s.PullMessageResponse(status=self._status())
        else:
            yield self.s.PullMessageResponse(status=self._status("MESSAGE_NOT_FOUND", "no new message"))
        for msg in pulled.messages:
            yield self.s.PullMessageResponse(message=self._to_message(topic, msg))
        yield self.s.PullMessageResponse(next_offset=pulled.next_offset)

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        """Cancel a pending timer message by the recall handle its send answered with (RECALL_MESSAGE)."""
        try:
            message_id = await self._on_reactor(recall, self.backend, request.topic.name, request.recall_handle)
        except GrpcError as exc:
            return self.s.RecallMessageResponse(status=self._status(exc.code, exc.message))
        return self.s.RecallMessageResponse(status=self._status(), message_id=message_id)

    def _ack_summary(self, codes: list[int]) -> Any:
        """As the proxy sums up an ack: one code shared by every entry is the answer's (named by itself), several
        are MULTIPLE_RESULTS, none (no entries) INTERNAL_SERVER_ERROR."""
        distinct = set(codes)
        if len(distinct) > 1:
            return self._status("MULTIPLE_RESULTS", "MULTIPLE_RESULTS")
        if not distinct:
            return self._status("INTERNAL_SERVER_ERROR", "ack message result is empty")
        name = self.d.Code.Name(distinct.pop())
        return self._status(name, name)

    def _to_message(self, topic: str, msg: Any) -> Any:
        """A popped message as apache.rocketmq.v2.Message, with its receipt handle and delivery attempt."""
        d = self.d
        props = msg.properties
        group = props.get("__SHARDINGKEY", "")
        if props.get("TRAN_MSG") == "true":
            kind = d.MessageType.TRANSACTION
        elif group:
            kind = d.MessageType.FIFO
        elif "TIMER_DELIVER_MS" in props or "TIMER_OUT_MS" in props or props.get("DELAY", "0") not in ("", "0"):
            kind = d.MessageType.DELAY
        else:
            kind = d.MessageType.NORMAL
        sysp = d.SystemProperties(
            message_id=props.get("UNIQ_KEY") or msg.msg_id, message_type=kind, body_encoding=d.Encoding.IDENTITY,
            queue_id=msg.queue_id, queue_offset=msg.queue_offset, born_host=msg.born_host.split(":")[0],
            store_host=msg.store_host, receipt_handle=props.get("POP_CK", ""),
            delivery_attempt=msg.reconsume_times + 1, body_digest=body_digest(d, msg.body),
        )
        if props.get("TAGS"):
            sysp.tag = props["TAGS"]
        if props.get("KEYS"):
            sysp.keys.extend(props["KEYS"].split())
        if group:
            sysp.message_group = group
        deliver = props.get("TIMER_DELIVER_MS") or props.get("TIMER_OUT_MS")
        if deliver and deliver.isdigit():
            sysp.delivery_timestamp.FromMilliseconds(int(deliver))
        sysp.born_timestamp.FromMilliseconds(msg.born_timestamp)
        sysp.store_timestamp.FromMilliseconds(msg.store_timestamp)
        user = {k: v for k, v in props.items() if k not in _SYSTEM_PROPERTIES and not k.startswith(_HIDDEN_PREFIXES)}
        return d.Message(topic=d.Resource(name=topic), user_properties=user, system_properties=sysp, body=msg.body)

    # -- Telemetry ----------------------------------------------------------------------------
    async def Telemetry(self, request_iterator: Any, context: Any) -> Any:
        """Settings in, settings out; check-backs pushed as RecoverOrphanedTransactionCommand. An open stream
        is two coroutines on the loop (this one writing, ``read`` reading), no thread of its own."""
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        opening = self._on_reactor(self.backend.open_session, _client_id(context), self.bridge.pusher(outbox.put_nowait))
        try:
            session: TelemetrySession = await asyncio.shield(opening)
        except asyncio.CancelledError:  # the client left while its session was being opened: close it once open
            opening.add_done_callback(self._close_opened)
            raise

        async def read() -> None:
            try:
                async for command in request_iterator:
                    # a command the ACL refused (rmqtx.grpc.security.Refused) is answered with its status
                    reply = getattr(command, "refusal", None) or await self._on_telemetry(session, command)
                    if reply is not None:
                        outbox.put_nowait(reply)
            except Exception as exc:  # the client went away: grpc raises on the iterator
                log.debug("telemetry stream ended: {exc}", exc=exc)
            finally:
                outbox.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                item = await outbox.get()
                if item is None:
                    break
                if isinstance(item, tuple):
                    item = self._recover_command(*item[1:])
                yield item
        finally:
            reader.cancel()
            self.reactor.callFromThread(self.backend.close_session, session)

    def _close_opened(self, opening: "asyncio.Future[TelemetrySession]") -> None:
        if not opening.cancelled() and opening.exception() is None:
            self.reactor.callFromThread(self.backend.close_session, opening.result())

    async def _on_telemetry(self, session: TelemetrySession, command: Any) -> Any:
        which = command.WhichOneof("command")
        if which != "settings":
            return None  # thread stack traces, verify results: nothing asked for them
        settings = command.settings
        topics = [r.name for r in settings.publishing.topics] if settings.HasField("publishing") else []
        await self._on_reactor(self.backend.update_settings, session, settings.client_type, topics,
                         settings.request_timeout.ToMilliseconds() if settings.HasField("request_timeout") else 0)
        reply = self.d.Settings()
        reply.CopyFrom(settings)
        if settings.HasField("publishing"):
            reply.publishing.max_body_size = self.backend.broker.config.maxMessageSize
            # as the proxy: the SDK checks a message's type against its queue's accept_message_types too
            reply.publishing.validate_message_type = self.backend.limits.topic_message_type_check
            reply.backoff_policy.max_attempts = 3
            backoff = reply.backoff_policy.exponential_backoff
            backoff.initial.FromMilliseconds(10)
            backoff.max.FromMilliseconds(1000)
            backoff.multiplier = 2.0
        if settings.HasField("subscription"):
            await self._consumer_settings(reply)
        reply.metric.on = False
        return self.s.TelemetryCommand(status=self._status(), settings=reply)

    async def _consumer_settings(self, reply: Any) -> None:
        """What the proxy tells a consumer: batch size, long polling, FIFO (the group's consumeMessageOrderly),
        and its retries: the group's retryMaxTimes + 1 attempts, backing off as its 5.x groupRetryPolicy says,
        or else waiting out the delay levels from level 3 on, as the broker retries."""
        group = reply.subscription.group.name
        fifo, attempts, delays = await self._on_reactor(self.backend.consumer_policy, group)
        sub = reply.subscription
        sub.fifo = fifo
        sub.receive_batch_size = CONSUMER_BATCH
        if sub.long_polling_timeout.ToMilliseconds() <= 0:
            sub.long_polling_timeout.FromSeconds(CONSUMER_LONG_POLLING_S)
        reply.backoff_policy.Clear()
        reply.backoff_policy.max_attempts = attempts
        exponential = await self._on_reactor(self.backend.exponential_backoff, group)
        if exponential is not None:  # the group's 5.x groupRetryPolicy, as the proxy merges it
            backoff = reply.backoff_policy.exponential_backoff
            backoff.initial.FromMilliseconds(exponential[0])
            backoff.max.FromMilliseconds(exponential[1])
            backoff.multiplier = exponential[2]
            return
        delays = await self._on_reactor(self.backend.customized_delays, group) or delays
        for delay_ms in delays:
            reply.backoff_policy.customized_backoff.next.add().FromMilliseconds(delay_ms)

    def _recover_command(self, topic: str, transaction_id: str, msg: Any) -> Any:
        d = self.d
        props = msg.properties
        sysp = d.SystemProperties(
            message_id=props.get("UNIQ_KEY") or msg.msg_id, message_type=d.MessageType.TRANSACTION,
            body_encoding=d.Encoding.IDENTITY, queue_id=int(props.get("REAL_QID") or msg.queue_id),
            queue_offset=msg.queue_offset, born_host=msg.born_host.split(":")[0], store_host=msg.store_host,
            body_digest=body_digest(d, msg.body),
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


def body_digest(d: Any, body: bytes) -> Any:
    """MD5 in upper-case hex, as Apache's proxy sends every message: the Java, Python and Node SDKs check it
    that way (the Go SDK compares lower case but never reads the result), and the Node SDK cannot read a
    message without the field."""
    return d.Digest(type=d.DigestType.MD5, checksum=hashlib.md5(body).hexdigest().upper())


#: Properties the broker and proxy set, never shown as user properties.
_SYSTEM_PROPERTIES = frozenset({
    "UNIQ_KEY", "TAGS", "KEYS", "WAIT", "PGROUP", "TRAN_MSG", "REAL_TOPIC", "REAL_QID", "DELAY", "__SHARDINGKEY",
    "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS", "MIN_OFFSET", "MAX_OFFSET", "CLUSTER",
    "MSG_REGION", "TRACE_ON", "POP_CK", "1ST_POP_TIME", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "REAL_TOPIC",
    "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "POP_CK_OFFSET", "CONSUME_START_TIME", "MAX_RECONSUME_TIMES",
})
#: Property name prefixes the broker keeps for itself.
_HIDDEN_PREFIXES = ("__",)


def port_taken(address: str, port: int) -> str | None:
    """Why ``address:port`` cannot be bound now (``Address already in use``), None when it can."""
    if not port:
        return None
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as listening sockets do: TIME_WAIT is no owner
        try:
            probe.bind((address, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


class GrpcEndpoint(service.Service):
    """The gRPC endpoint, a sibling after the broker (``rmqtx.launcher.with_endpoints``): starts once the
    broker has, stops before it does."""

    def __init__(self, broker: Any, port: int, address: str, reactor: Any) -> None:
        self.broker = broker
        self.port = port
        self.address = address
        self.reactor = reactor
        self.server: Any = None
        self.front: Any = None  # rmqtx.grpc.tls.PermissiveFront in permissive TLS mode
        self.front_port: Any = None
        self.loop_thread = LoopThread("rmqtx-grpc-loop")  # grpc.aio's one loop, started in startService
        self.backend = GrpcBackend(broker, self.advertised, reactor)

    def advertised(self) -> tuple[str, int]:
        host = self.address if self.address not in ("0.0.0.0", "::", "") else self.broker.config.brokerIP1
        return host, self.port

    def startService(self) -> None:
        """Start the loop's thread and, on it, grpc.aio's server; wait here (start-up only) until it is bound."""
        from rmqtx.grpc.tls import grpc_server_settings

        try:
            _, _, service_grpc = stubs.load()
        except stubs.StubsMissing as exc:
            raise StartupError(str(exc)) from None
        tls = grpc_server_settings(self.broker.config.tls)
        public = f"{self.address}:{self.port}"
        if tls.mode != "permissive":  # grpcio's own bind failure is a grpc core log line on stderr besides ours
            why = port_taken(self.address, self.port)
            if why:
                raise StartupError(f"the gRPC endpoint cannot listen on {public}: {why}")
        self.loop_thread.start()
        try:
            bound = self.loop_thread.submit(self._serve(service_grpc, tls)).result(timeout=30)
            if isinstance(bound, tuple):  # permissive
                bound = self._front(*bound)
        except BaseException:
            self._abandon()
            raise
        if not bound:
            self._abandon()
            raise StartupError(f"the gRPC endpoint cannot listen on {public}")
        self.port = bound
        self.backend.start()
        log.info("gRPC endpoint (apache.rocketmq.v2.MessagingService) listening on {addr}:{port}, TLS {mode}",
                 addr=self.address, port=self.port, mode=tls.mode)
        super().startService()

    async def _serve(self, service_grpc: Any, tls: Any) -> Any:
        """On the loop: grpc.aio's server bound and started; its port (a (TLS, plain) pair when permissive),
        0 when it cannot bind."""
        import grpc

        servicer = MessagingServicer(self.backend, self.reactor, ReactorBridge(self.reactor, asyncio.get_running_loop()))
        interceptors = []
        auth = getattr(self.broker, "auth", None)  # ACL 2.0, when its checks are on
        guard = self.broker.acl or (auth if auth is not None and (auth.settings.authentication or auth.settings.authorization) else None)
        if guard is not None:  # on or off for the broker's life: no wrapper at all when off
            from rmqtx.grpc.security import AclInterceptor

            interceptors.append(AclInterceptor(lambda: guard, servicer.response_class, servicer._status, self._client_host))
        # no SO_REUSEPORT: a second broker given the same grpcPort must fail to start, not share the port
        self.server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_INBOUND), ("grpc.so_reuseport", 0)],
                                      interceptors=interceptors)
        service_grpc.add_MessagingServiceServicer_to_server(servicer, self.server)
        public = f"{self.address}:{self.port}"
        bound: Any
        try:  # grpcio raises RuntimeError when a port is taken
            if tls.mode == "disabled":
                bound = self.server.add_insecure_port(public)
            elif tls.mode == "enforcing":
                bound = self.server.add_secure_port(public, self._credentials(tls))
            else:  # permissive: grpcio on two loopback ports (TLS, plain) behind a Twisted front on the public port
                tls_port = self.server.add_secure_port("127.0.0.1:0", self._credentials(tls))
                plain_port = self.server.add_insecure_port("127.0.0.1:0")
                bound = (tls_port, plain_port) if tls_port and plain_port else 0
        except RuntimeError as exc:
            log.info("gRPC endpoint: {exc}", exc=exc)
            bound = 0
        if bound:
            await self.server.start()
        return bound

    def _abandon(self) -> None:
        """A failed start: the server (if any) and the loop go away; nothing was served yet."""
        if self.server is not None:
            try:
                self.loop_thread.submit(self.server.stop(None)).result(timeout=5)
            except Exception:  # already failing: the loop's end cancels what is left
                pass
            self.server = None
        self.loop_thread.stop()

    def _credentials(self, tls: Any) -> Any:
        from rmqtx.grpc.tls import server_credentials

        return server_credentials(tls, ["127.0.0.1", self.address, self.broker.config.brokerIP1])

    def _front(self, tls_port: int, plain_port: int) -> int:
        """The Twisted front on the public port of permissive mode."""
        from twisted.internet.error import CannotListenError

        from rmqtx.grpc.tls import PermissiveFront

        self.front = PermissiveFront(self.reactor, tls_port, plain_port)
        try:
            self.front_port = self.reactor.listenTCP(self.port, self.front, interface=self.address)
        except CannotListenError as exc:
            raise listen_failure("the gRPC endpoint", exc) from None
        return self.front_port.getHost().port

    def _client_host(self, context: Any) -> str:
        from rmqtx.grpc.security import peer_host

        return self.front.client_host(context) if self.front is not None else peer_host(context)

    async def _stop(self) -> None:
        if self.front_port is not None:
            await self.front_port.stopListening()
        if self.server is not None:
            await self.loop_thread.deferred(self.reactor, self.server.stop(STOP_GRACE_S))
            self.server = None
        self.loop_thread.stop()
        await threads.deferToThread(self.loop_thread.thread.join, 5.0)
        await self.backend.stop()

    def stopService(self) -> "defer.Deferred[None]":
        super().stopService()
        return defer.ensureDeferred(self._stop())
