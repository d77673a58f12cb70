"""The proxy's work on the reactor: routes from the broker's own topic table, sends and transactions
over a loopback remoting connection to the same broker (as Apache's proxy in cluster mode does), and
transaction check-backs handed to the producers' Telemetry streams.

Everything here runs on the reactor thread; ``rmqtx.grpc.server`` calls in from grpcio's threads.
"""

from __future__ import annotations

import gzip
import itertools
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from twisted.internet import defer, task
from twisted.logger import Logger

from rmqtx.broker.processors.admin_bodies import SYSTEM_TOPICS
from rmqtx.client.message import MessageExt
from rmqtx.client.util import java_fields
from rmqtx.common import fastjson, topic_attributes, validation
from rmqtx.common.javacompat import java_string_hash
from rmqtx.common.message import properties_to_string
from rmqtx.common.sysflag import TRANSACTION_PREPARED
from rmqtx.broker.grpc_settings import ProxyLimits
from rmqtx.common.topics import (
    GROUP_MAX_LENGTH,
    SYSTEM_GROUP_PREFIX,
    DLQ_PREFIX,
    RETRY_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    TOPIC_MAX_LENGTH,
    is_readable,
    is_writeable,
    validate_name,
)
from rmqtx.remoting import Dispatcher, RemotingClient, RemotingCommand, RemotingError, RemotingProtocol
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    send_header_to_v2,
)
from rmqtx.store.record import decode_offset_msg_id, parse_delay_levels

log = Logger(namespace="rmqtx.grpc")

COMMIT, ROLLBACK = 8, 12
#: Apache's proxy refuses delivery timestamps further out than this (its maxDelayTimeMills default).
MAX_DELAY_MS = 24 * 3600 * 1000
HEARTBEAT_SECONDS = 20.0
#: Apache 5.x's TopicValidator adds this one to 4.9.8's fixed system topics (RMQ_SYS_ROCKSDB_OFFSET_TOPIC).
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"
#: How the proxy's refusals from its processor layer start (the wrapped exception's class name).
PROXY_EXCEPTION = "org.apache.rocketmq.proxy.common.ProxyException"
#: How long a transaction the client may still end is remembered (Apache's proxy keeps 3 min).
TRANSACTION_TTL = 180.0
#: remoting response code -> apache.rocketmq.v2.Code name, as the proxy maps a broker's answer.
_BROKER_CODES: dict[int, str] = {
    ResponseCode.SUCCESS: "OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "MASTER_PERSISTENCE_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "SLAVE_PERSISTENCE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "HA_NOT_AVAILABLE",
    ResponseCode.TOPIC_NOT_EXIST: "TOPIC_NOT_FOUND",
    ResponseCode.NO_PERMISSION: "FORBIDDEN",
    ResponseCode.MESSAGE_ILLEGAL: "BAD_REQUEST",
    ResponseCode.SYSTEM_BUSY: "TOO_MANY_REQUESTS",
}


class GrpcError(Exception):
    """An answer with an apache.rocketmq.v2.Code other than OK."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class SendOutcome:
    message_id: str
    transaction_id: str
    offset: int
    recall_handle: str = ""  # a timer message's (SendResultEntry.recall_handle in 5.3's proxy)


@dataclass
class PreparedSend:
    """A message the proxy's checks passed, as the SEND_MESSAGE_V2 that stores it."""

    request: RemotingCommand
    topic: str
    message_id: str
    transactional: bool


@dataclass
class _Transaction:
    group: str
    table_offset: int
    commit_log_offset: int
    message_id: str
    created: float = field(default_factory=time.monotonic)


class TelemetrySession:
    """One client's Telemetry stream: what it publishes, and how to push a command to it."""

    def __init__(self, client_id: str, push: Callable[[Any], None]) -> None:
        self.client_id = client_id
        self.push = push
        self.client_type = 0
        self.topics: set[str] = set()
        self.request_timeout_ms = 0  # from its settings; 0 until it names one


class _LoopbackClient(RemotingClient):
    """The endpoint's remoting connection to its own broker: TLS when the broker's port enforces it, and
    told to the broker's ACL as its own, since the gRPC call was checked already."""

    def __init__(self, broker: Any, reactor: Any, dispatcher: Dispatcher) -> None:
        tls = None
        settings = broker.config.tls
        if settings.server.mode == "enforcing":
            from twisted.internet import ssl

            # the broker's own client settings (tls.enable, tls.client.*: a client certificate when the port
            # asks for one), else TLS without one
            tls = settings.client.options() or ssl.CertificateOptions()
        super().__init__(reactor, dispatcher=dispatcher, tls=tls)
        self.broker = broker

    def connection(self, addr: str) -> "defer.Deferred[RemotingProtocol]":
        d = super().connection(addr)
        if self.broker.acl is not None or getattr(self.broker, "auth", None) is not None:
            d.addCallback(self._tell_acl)
        return d

    def _tell_acl(self, conn: RemotingProtocol) -> RemotingProtocol:
        if not conn.attributes.get("acl.told"):
            conn.attributes["acl.told"] = True
            local = conn.transport.getHost()
            for guard in (self.broker.acl, getattr(self.broker, "auth", None)):  # ACL 1.0 or 2.0
                if guard is not None:
                    guard.internal_peers.add((local.host, local.port))
        return conn


class GrpcBackend:
    """Routes, sends, END_TRANSACTION and check-backs for the gRPC endpoint, over the broker's core."""

    def __init__(self, broker: Any, endpoint: Callable[[], tuple[str, int]], reactor: Any) -> None:
        self.broker = broker  # rmqtx.broker.service.BrokerService (its ctx.topics and config)
        self.endpoint = endpoint
        self.reactor = reactor
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        self.remoting = _LoopbackClient(broker, reactor, dispatcher)
        self.client_id = f"{broker.config.brokerIP1}@rmqtx-grpc-proxy"
        self.sessions: dict[int, TelemetrySession] = {}
        self._session_ids = itertools.count(1)
        self.transactions: dict[tuple[str, str], _Transaction] = {}
        self._round_robin = itertools.count()
        self._heartbeat = task.LoopingCall(lambda: defer.ensureDeferred(self._beat()))
        self._groups_sent: frozenset[str] = frozenset()
        self.limits: ProxyLimits = broker.config.grpc.limits

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._heartbeat.start(HEARTBEAT_SECONDS, now=False)

    async def stop(self) -> None:
        if self._heartbeat.running:
            self._heartbeat.stop()
        await self.remoting.close()

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker.config.listenPort}"

    @property
    def broker_name(self) -> str:
        return self.broker.config.brokerName

    # -- sessions -----------------------------------------------------------------------------
    def open_session(self, client_id: str, push: Callable[[Any], None]) -> TelemetrySession:
        session = TelemetrySession(client_id, push)
        self.sessions[next(self._session_ids)] = session
        return session

    def close_session(self, session: TelemetrySession) -> None:
        for key, value in list(self.sessions.items()):
            if value is session:
                del self.sessions[key]
        self._beat_if_changed()

    def update_settings(self, session: TelemetrySession, client_type: int, topics: list[str],
                        request_timeout_ms: int = 0) -> None:
        session.client_type = client_type
        session.topics = set(topics)
        if request_timeout_ms > 0:
            session.request_timeout_ms = request_timeout_ms
        self._beat_if_changed()

    def request_timeout_ms(self, client_id: str, fallback: int) -> int:
        """The request timeout the client's Telemetry settings named, else ``fallback``."""
        for session in self.sessions.values():
            if session.client_id == client_id and session.request_timeout_ms > 0:
                return session.request_timeout_ms
        return fallback

    def forget_client(self, client_id: str) -> None:
        for key, value in list(self.sessions.items()):
            if value.client_id == client_id:
                del self.sessions[key]
        self._beat_if_changed()

    def producer_groups(self) -> frozenset[str]:
        """Apache's proxy registers a gRPC producer under each topic it publishes to."""
        return frozenset(topic for s in self.sessions.values() for topic in s.topics)

    def _beat_if_changed(self) -> None:
        if self.producer_groups() != self._groups_sent:
            defer.ensureDeferred(self._beat())

    async def _beat(self) -> None:
        """HEART_BEAT with the producer groups, so the broker's check-backs find this connection."""
        groups = self.producer_groups()
        body = fastjson.dumps({"clientID": self.client_id, "consumerDataSet": [],
                               "producerDataSet": [{"groupName": g} for g in sorted(groups)]})
        try:
            await self.remoting.invoke(self.broker_addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, body))
            self._groups_sent = groups
        except Exception as exc:  # the next beat retries
            log.info("gRPC proxy heartbeat to its broker failed: {exc}", exc=exc)

    # -- routes -------------------------------------------------------------------------------
    def validate_topic(self, topic: str) -> None:
        """The proxy's check of a request's topic name: the client's rules, then no system topic."""
        if not topic.strip():
            raise GrpcError("ILLEGAL_TOPIC", "The specified topic is blank")
        if len(topic) > TOPIC_MAX_LENGTH:
            raise GrpcError("ILLEGAL_TOPIC", f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
        if validate_name(topic) is not None:
            raise GrpcError("ILLEGAL_TOPIC",
                            f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
        if self.is_system_topic(topic):
            raise GrpcError("ILLEGAL_TOPIC", "cannot access system topic")

    def validate_group(self, group: str) -> None:
        """The proxy's check of a request's consumer group: the client's rules, then no system group."""
        if not group.strip():
            raise GrpcError("ILLEGAL_CONSUMER_GROUP", "the specified group is blank")
        if len(group) > GROUP_MAX_LENGTH:
            raise GrpcError("ILLEGAL_CONSUMER_GROUP", f"the specified group is longer than group max length {GROUP_MAX_LENGTH}.")
        if validate_name(group) is not None:
            raise GrpcError("ILLEGAL_CONSUMER_GROUP",
                            f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
        if group.startswith(SYSTEM_GROUP_PREFIX):
            raise GrpcError("ILLEGAL_CONSUMER_GROUP", "cannot use system consumer group")

    def validate_topic_and_group(self, topic: str, group: str) -> None:
        """What the proxy checks first in a consumer's calls (receive, ack, invisible time, DLQ, assignment)."""
        self.validate_topic(topic)
        self.validate_group(group)

    def is_system_topic(self, topic: str) -> bool:
        """Apache 5.x's system topic set as its broker fills it (the fixed ones, the cluster, broker, reply
        and trace topics, everything ``rmq_sys_``)."""
        cfg = self.broker.config
        if topic in SYSTEM_TOPICS or topic == CHECKPOINT_TOPIC or topic.startswith(SYSTEM_TOPIC_PREFIX):
            return True
        if topic in (cfg.brokerClusterName, cfg.brokerName, f"{cfg.brokerClusterName}_REPLY_TOPIC"):
            return True
        return bool(cfg.traceTopicEnable) and topic == cfg.msgTraceTopicName

    def topic_message_type(self, topic: str) -> str:
        """The message type the topic accepts (its 5.x ``message.type``, else NORMAL); UNSPECIFIED when there
        is no such topic, as the proxy's metadata answers."""
        config = self.broker.ctx.topics.get(topic)
        if config is None:
            return topic_attributes.UNSPECIFIED
        return topic_attributes.topic_message_type(config.attributes)

    def topic_config(self, topic: str) -> Any:
        self.validate_topic(topic)
        config = self.broker.ctx.topics.get(topic)
        if config is None:
            raise GrpcError("TOPIC_NOT_FOUND", f"topic {topic} not found")
        return config

    def route(self, topic: str) -> list[tuple[int, str]]:
        """(queue id, Permission name) for each queue, as the proxy builds them from one broker's route."""
        config = self.topic_config(topic)
        out = []
        for queue_id in range(max(config.readQueueNums, config.writeQueueNums)):
            read = is_readable(config.perm) and queue_id < config.readQueueNums
            write = is_writeable(config.perm) and queue_id < config.writeQueueNums
            out.append((queue_id, "READ_WRITE" if read and write else "READ" if read else "WRITE" if write else "NONE"))
        return out

    def group_is_fifo(self, group: str) -> bool:
        """Pop in order when the group is configured orderly (Apache 5.x's consumeMessageOrderly)."""
        config = self.broker.ctx.groups.find(group)
        return bool(getattr(config, "consumeMessageOrderly", False))

    def consumer_policy(self, group: str) -> tuple[bool, int, list[int]]:
        """(fifo, max delivery attempts, retry delays in ms) for a consumer group's settings."""
        config = self.broker.ctx.groups.find(group)
        retries = int(getattr(config, "retryMaxTimes", 16))
        levels = parse_delay_levels(self.broker.config.messageDelayLevel)
        delays = [int(d) for d in levels[2:]] or [1000]
        return self.group_is_fifo(group), retries + 1, delays

    def exponential_backoff(self, group: str) -> tuple[int, int, float] | None:
        """(initial ms, max ms, multiplier) when the group's 5.x groupRetryPolicy is EXPONENTIAL (Apache's
        defaults 5 s, 2 h, 2 for what it leaves out); None for the customized retries of consumer_policy."""
        config = self.broker.ctx.groups.find(group)
        policy = getattr(config, "groupRetryPolicy", None)
        if not isinstance(policy, dict) or str(policy.get("type", "")).upper() != "EXPONENTIAL":
            return None
        found = policy.get("exponentialRetryPolicy")
        exp: dict = found if isinstance(found, dict) else {}
        try:
            return int(exp.get("initial", 5000)), int(exp.get("max", 7_200_000)), float(exp.get("multiplier", 2))
        except (TypeError, ValueError):
            return None

    def customized_delays(self, group: str) -> list[int] | None:
        """The ``next`` delays (ms) of a CUSTOMIZED groupRetryPolicy that names them, else None."""
        config = self.broker.ctx.groups.find(group)
        policy = getattr(config, "groupRetryPolicy", None)
        if not isinstance(policy, dict) or str(policy.get("type", "CUSTOMIZED")).upper() != "CUSTOMIZED":
            return None
        custom = policy.get("customizedRetryPolicy")
        nxt = custom.get("next") if isinstance(custom, dict) else None
        if not isinstance(nxt, list) or not nxt:
            return None
        try:
            return [int(v) for v in nxt]
        except (TypeError, ValueError):
            return None

    def _select_queue(self, topic: str, message_group: str) -> int:
        """FIFO: the hash of the message group over the writable queues; otherwise round robin."""
        config = self.topic_config(topic)
        if not is_writeable(config.perm) or config.writeQueueNums <= 0:
            raise GrpcError("FORBIDDEN", f"topic {topic} is not writable")
        count = config.writeQueueNums
        if message_group:
            return abs(java_string_hash(message_group)) % count
        return next(self._round_robin) % count

    # -- sends --------------------------------------------------------------------------------
    def timer_enabled(self) -> bool:
        """The broker delivers timer messages (timerWheelEnable), so a delivery time is kept to the millisecond."""
        ctx = getattr(self.broker, "ctx", None)
        timer = getattr(ctx, "timer", None)
        return timer is not None and bool(timer.cfg.timerWheelEnable)

    def delay_level(self, deliver_ms: int) -> int:
        """The shortest delay level that waits at least until ``deliver_ms``, else the longest one.

        Used only with timerWheelEnable=false, as Apache's proxy maps to a level in its useDelayLevel mode.
        """
        remaining = deliver_ms - int(time.time() * 1000)
        if remaining <= 0:
            return 0
        if remaining > MAX_DELAY_MS:
            raise GrpcError("ILLEGAL_DELIVERY_TIME", f"delivery timestamp is more than {MAX_DELAY_MS} ms away")
        levels = parse_delay_levels(self.broker.config.messageDelayLevel)
        late_enough = [(delay, index) for index, delay in enumerate(levels, 1) if delay >= remaining]
        if late_enough:
            return min(late_enough)[1]
        return max((delay, -index) for index, delay in enumerate(levels, 1))[1] * -1

    async def send(self, msg: Any, types: Any) -> SendOutcome:
        """One apache.rocketmq.v2.Message -> SEND_MESSAGE_V2 to the broker; the entry's answer."""
        return await self.send_prepared(self.prepare_send(msg, types))

    def prepare_send(self, msg: Any, types: Any) -> PreparedSend:
        """The proxy's checks of one message, in its order (GrpcError on a refusal), and its SEND_MESSAGE_V2."""
        topic = msg.topic.name
        self.validate_topic(topic)  # the proxy's order: the name, the message, its type, then the topic's queues
        sysp = msg.system_properties
        body = bytes(msg.body)
        if sysp.body_encoding == types.Encoding.GZIP:
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError, zlib.error) as exc:
                raise GrpcError("MESSAGE_CORRUPTED", f"body is not gzip: {exc}") from None
        try:  # the proxy's checks, in its order
            validation.check_body(body, int(self.broker.config.maxMessageSize))
            validation.check_properties(msg.user_properties, sysp.tag, sysp.keys, self.limits.max_user_property_size,
                                        self.limits.user_property_max_num)
        except validation.MessageRefusal as refusal:
            raise GrpcError(refusal.code, refusal.message) from None
        if not sysp.message_id.strip():
            raise GrpcError("ILLEGAL_MESSAGE_ID", "message id cannot be empty")
        props: dict[str, str] = {}
        for key, value in msg.user_properties.items():
            props[key] = value
        props["UNIQ_KEY"] = sysp.message_id
        props["WAIT"] = "true"
        if sysp.tag:
            props["TAGS"] = sysp.tag
        if sysp.keys:
            props["KEYS"] = " ".join(sysp.keys)
        props["PGROUP"] = topic
        transactional = sysp.message_type == types.MessageType.TRANSACTION
        message_group = sysp.message_group if sysp.HasField("message_group") else ""
        if message_group:
            props["__SHARDINGKEY"] = message_group
        if sysp.HasField("delivery_timestamp"):
            if transactional:
                raise GrpcError("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", "a transactional message cannot be delayed")
            deliver_ms = sysp.delivery_timestamp.seconds * 1000 + sysp.delivery_timestamp.nanos // 1_000_000
            if self.timer_enabled():
                # as Apache's proxy does by default: a timer message due at that millisecond
                if deliver_ms - int(time.time() * 1000) > MAX_DELAY_MS:
                    raise GrpcError("ILLEGAL_DELIVERY_TIME", f"delivery timestamp is more than {MAX_DELAY_MS} ms away")
                props["TIMER_DELIVER_MS"] = str(deliver_ms)
            else:
                level = self.delay_level(deliver_ms)
                if level > 0:
                    props["DELAY"] = str(level)
        sys_flag = 0
        if transactional:
            props["TRAN_MSG"] = "true"
            if sysp.HasField("orphaned_transaction_recovery_duration"):
                props["CHECK_IMMUNITY_TIME_IN_SECONDS"] = str(sysp.orphaned_transaction_recovery_duration.seconds)
            sys_flag |= TRANSACTION_PREPARED
        if self.limits.topic_message_type_check:
            self.check_message_type(topic, props, sysp.HasField("delivery_timestamp"))
        queue_id = self._select_queue(topic, message_group)
        born_ms = sysp.born_timestamp.seconds * 1000 + sysp.born_timestamp.nanos // 1_000_000 or int(time.time() * 1000)
        header = SendMessageRequestHeader(
            producerGroup=topic, topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=queue_id,
            sysFlag=sys_flag, bornTimestamp=born_ms, flag=0, properties=properties_to_string(props),
            reconsumeTimes=max(0, sysp.delivery_attempt - 1) if sysp.delivery_attempt else 0, unitMode=False,
            batch=False, brokerName=self.broker_name,
        )
        fields, order = send_header_to_v2(header)
        request = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=body, fast_keys=order)
        return PreparedSend(request, topic, sysp.message_id, transactional)

    async def send_prepared(self, prepared: PreparedSend) -> SendOutcome:
        """Store a checked message through the broker; the entry's answer."""
        response = await self._call(prepared.request)
        code = _BROKER_CODES.get(response.code, "INTERNAL_SERVER_ERROR")
        if code != "OK":
            raise GrpcError(code, response.remark or f"broker answered {response.code}")
        offset = int(response.field("queueOffset") or 0)
        transaction_id = ""
        if prepared.transactional:
            topic = prepared.topic
            transaction_id = response.field("transactionId") or prepared.message_id
            _, _, commit_log_offset = decode_offset_msg_id(response.field("msgId") or "")
            self._expire_transactions()
            self.transactions[(topic, transaction_id)] = _Transaction(topic, offset, commit_log_offset, prepared.message_id)
        return SendOutcome(prepared.message_id, transaction_id, offset, response.field("recallHandle") or "")

    def check_message_type(self, topic: str, props: dict[str, str], delivery_timestamp: bool) -> None:
        """The proxy's check of a send against its topic's message type (retry and DLQ topics are not
        checked). A delivery timestamp always makes a message DELAY there (the proxy keeps TIMER_DELIVER_MS
        even when it maps it to a delay level)."""
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            return
        kind = topic_attributes.message_type(props)
        if delivery_timestamp and kind != topic_attributes.TRANSACTION:
            kind = topic_attributes.DELAY
        why = topic_attributes.type_mismatch(self.topic_message_type(topic), kind)
        if why is not None:  # the proxy's GrpcProxyException wraps a ProxyException: its message is the cause's
            raise GrpcError("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", f"{PROXY_EXCEPTION}: {why}")

    async def _call(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        try:
            return await self.remoting.invoke(self.broker_addr, request, timeout)
        except (RemotingError, OSError, defer.TimeoutError) as exc:
            raise GrpcError("PROXY_TIMEOUT", f"broker did not answer: {exc}") from None
        except Exception as exc:  # connection refused and the like
            raise GrpcError("INTERNAL_SERVER_ERROR", f"broker call failed: {exc}") from None

    # -- transactions -------------------------------------------------------------------------
    def _expire_transactions(self) -> None:
        cutoff = time.monotonic() - TRANSACTION_TTL
        for key, value in list(self.transactions.items()):
            if value.created < cutoff:
                del self.transactions[key]

    async def end_transaction(self, topic: str, transaction_id: str, message_id: str, commit: bool, from_check: bool) -> None:
        """END_TRANSACTION oneway, with the offsets remembered from the send or from the check-back."""
        data = self.transactions.pop((topic, transaction_id), None)
        if data is None:
            raise GrpcError("INVALID_TRANSACTION_ID", f"transaction {transaction_id} of topic {topic} is unknown or expired")
        header = EndTransactionRequestHeader(
            producerGroup=data.group, tranStateTableOffset=data.table_offset, commitLogOffset=data.commit_log_offset,
            commitOrRollback=COMMIT if commit else ROLLBACK, fromTransactionCheck=from_check,
            msgId=message_id or data.message_id, transactionId=transaction_id,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, java_fields(header), oneway=True)
        try:
            await self.remoting.invoke_oneway(self.broker_addr, request)
        except Exception as exc:
            self.transactions[(topic, transaction_id)] = data
            raise GrpcError("INTERNAL_SERVER_ERROR", f"END_TRANSACTION not sent: {exc}") from None

    def _on_check_transaction_state(self, request: RemotingCommand, conn: RemotingProtocol) -> None:
        """The broker asks about a half message: push RecoverOrphanedTransactionCommand to a producer."""
        try:
            header = CheckTransactionStateRequestHeader.from_command(request)
            msg = MessageExt.from_stored(request.body)
        except Exception:
            log.failure("undecodable CHECK_TRANSACTION_STATE")
            return None
        group = msg.properties.get("PGROUP", "")
        topic = msg.properties.get("REAL_TOPIC") or msg.topic
        transaction_id = header.transactionId or msg.properties.get("UNIQ_KEY") or ""
        candidates = [s for s in self.sessions.values() if group in s.topics or topic in s.topics]
        if not candidates:
            log.info("no gRPC producer of {group} for a transaction check", group=group)
            return None
        self._expire_transactions()
        self.transactions[(topic, transaction_id)] = _Transaction(
            group, header.tranStateTableOffset, header.commitLogOffset, msg.properties.get("UNIQ_KEY") or msg.msg_id)
        session = candidates[next(self._round_robin) % len(candidates)]
        session.push(("recover", topic, transaction_id, msg))
        return None

