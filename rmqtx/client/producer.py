"""Producers: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE exactly as Java's DefaultMQProducer sends them,
and the transactional producer (half messages, END_TRANSACTION, answers to broker checks)."""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from twisted.internet import defer
from twisted.logger import Logger

from rmqtx.client.config import ClientConfig
from rmqtx.client.errors import NO_CODE, MQBrokerError, MQClientError, MQError
from rmqtx.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus, TransactionState
from rmqtx.client.mq_client import MQClientInstance, get_client_instance
from rmqtx.client.msgid import create_uniq_id
from rmqtx.client.request_reply import is_reply, mark_request, timeout_error
from rmqtx.client.route import QueueSelector
from rmqtx.client.util import call_user, deferred, java_fields
from rmqtx.common.message import (
    PROPERTY_DELAY,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    properties_to_string,
)
from rmqtx.common.sysflag import SYSFLAG_COMPRESSED, SYSFLAG_ZLIB, TRANSACTION_PREPARED
from rmqtx.common.topics import DEFAULT_TOPIC
from rmqtx.remoting import RemotingCommand, RemotingProtocol
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    send_header_to_v2,
)
from rmqtx.store.record import decode_offset_msg_id, encode_batch_body

log = Logger(namespace="rmqtx.client.producer")

#: Broker answers after which Java retries the send on another queue.
RETRY_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
_SEND_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}

QueueChooser = Callable[[list[MessageQueue], Message, Any], MessageQueue]


class Producer:
    """DefaultMQProducer: sync/async sends return Deferreds, oneway, batch and selector (orderly) sends."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        reactor: Any = None,
        send_timeout: float = 3.0,
        retry_times: int = 2,
        compress_over: int = 4096,
        compress: bool = True,
        default_topic_queue_nums: int = 4,
        max_message_size: int = 4 * 1024 * 1024,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        config = ClientConfig.resolve(namesrv_addr, config, access_key, secret_key)
        self.group = group
        self.config = config
        self.reactor = reactor
        self.send_timeout = send_timeout
        self.retry_times = retry_times
        self.compress_over = compress_over
        self.compress = compress
        self.default_topic_queue_nums = default_topic_queue_nums
        self.max_message_size = max_message_size
        self.client: MQClientInstance | None = None
        self._topics: set[str] = set()
        self._selector = QueueSelector()

    # -- lifecycle ----------------------------------------------------------------------------
    @deferred
    async def start(self) -> None:
        """Join the shared client instance and start its background tasks."""
        client = get_client_instance(self.config, self.reactor)
        client.register_producer(self.group, self)
        self.client = client
        client.start()

    @deferred
    async def shutdown(self) -> None:
        """UNREGISTER_CLIENT for this group; the instance closes once nobody uses it."""
        client, self.client = self.client, None
        if client is not None:
            await client.unregister_producer(self.group)

    def published_topics(self) -> Iterable[str]:
        return self._topics

    def _running(self) -> MQClientInstance:
        if self.client is None:
            raise MQClientError(NO_CODE, "The producer service state not OK, maybe started once, RUNNING")
        return self.client

    # -- sends --------------------------------------------------------------------------------
    @deferred
    async def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: QueueChooser | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker; retried on other queues unless a queue or selector is given."""
        result = await self._send(msg, queue, selector, arg, timeout, oneway=False)
        assert result is not None
        return result

    @deferred
    async def send_oneway(
        self, msg: Message, *, queue: MessageQueue | None = None, selector: QueueChooser | None = None, arg: Any = None
    ) -> None:
        """Send with the oneway flag: fires once written, no answer, no retry."""
        await self._send(msg, queue, selector, arg, None, oneway=True)

    @deferred
    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout: float | None = None
    ) -> SendResult:
        """SEND_BATCH_MESSAGE: messages of one topic stored together on one queue."""
        if not msgs:
            raise MQClientError(NO_CODE, "the message list is empty")
        topic = msgs[0].topic
        for m in msgs:
            if m.topic != topic:
                raise MQClientError(NO_CODE, "The topic of the messages in one batch should be the same")
            if m.delay_level > 0:
                raise MQClientError(NO_CODE, "TimeDelayLevel is not supported for batching")
            if topic.startswith("%RETRY%"):
                raise MQClientError(NO_CODE, "Retry Group is not supported for batching")
            m.properties.setdefault(PROPERTY_UNIQ_KEY, create_uniq_id(self.config.client_ip))
        batch = Message(topic, encode_batch_body([(m.flag, m.body, properties_to_string(m.properties)) for m in msgs]))
        batch.properties = {PROPERTY_WAIT: msgs[0].properties.get(PROPERTY_WAIT, "true")}
        uniq = ",".join(m.properties[PROPERTY_UNIQ_KEY] for m in msgs)
        result = await self._send(batch, queue, None, None, timeout, oneway=False, batch_ids=uniq)
        assert result is not None
        return result

    @deferred
    async def request(self, msg: Message, timeout: float) -> MessageExt:
        """DefaultMQProducer.request: send ``msg`` and wait up to ``timeout`` s for the reply pushed back.

        Raises RequestTimeoutError when the send worked but no reply came, MQClientError when the send failed.
        """
        client = self._running()
        started = time.monotonic()
        correlation_id = mark_request(msg, client.client_id, timeout)
        if msg.topic not in client.routes:  # first request on this topic: route, then tell the brokers who we are
            await self.publish_queues(msg.topic)
            await client.send_heartbeat()
        waiter = client.replies.add(correlation_id)
        try:
            try:
                await self._send(msg, None, None, None, timeout - (time.monotonic() - started), oneway=False)
            except MQError as exc:
                raise MQClientError(NO_CODE, f"send request message to <{msg.topic}> fail: {exc}") from exc
            remaining = timeout - (time.monotonic() - started)
            if not waiter.called:
                waiter.addTimeout(max(remaining, 0.0), client.reactor)
            try:
                return await waiter
            except defer.TimeoutError:
                raise timeout_error(msg.topic, timeout) from None
        finally:
            client.replies.discard(correlation_id)

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """Writable queues of ``topic``; an unknown topic borrows TBW102's route (auto-creation)."""
        client = self._running()
        self._topics.add(topic)
        route = client.routes.get(topic)
        if route is None:
            try:
                route = await client.fetch_route(topic)
            except MQClientError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
                default = await client.route(DEFAULT_TOPIC)
                route = default.with_queue_limit(self.default_topic_queue_nums)
        queues = route.publish_queues(topic)
        if not queues:
            raise MQClientError(NO_CODE, f"No route info of this topic: {topic}")
        return queues

    async def _send(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: QueueChooser | None,
        arg: Any,
        timeout: float | None,
        *,
        oneway: bool,
        batch_ids: str | None = None,
    ) -> SendResult | None:
        self._check(msg)
        timeout = self.send_timeout if timeout is None else timeout
        if queue is not None:
            return await self._send_kernel(msg, queue, timeout, oneway, batch_ids)
        queues = await self.publish_queues(msg.topic)
        if selector is not None:
            return await self._send_kernel(msg, selector(queues, msg, arg), timeout, oneway, batch_ids)
        attempts = 1 if oneway else 1 + self.retry_times
        deadline = time.monotonic() + timeout
        failed_broker: str | None = None
        last: Exception | None = None
        for _ in range(attempts):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            mq = self._selector.select(queues, failed_broker)
            try:
                return await self._send_kernel(msg, mq, remaining, oneway, batch_ids)
            except MQClientError as exc:
                last, failed_broker = exc, mq.broker_name
            except MQBrokerError as exc:
                if exc.code not in RETRY_CODES:
                    raise
                last, failed_broker = exc, mq.broker_name
        if last is None:
            raise MQClientError(NO_CODE, f"send to {msg.topic} timed out after {timeout} s")
        raise last

    def _check(self, msg: Message) -> None:
        """Java's Validators.checkMessage, in short."""
        if not msg.topic:
            raise MQClientError(ResponseCode.MESSAGE_ILLEGAL, "The specified topic is blank")
        if not msg.body:
            raise MQClientError(ResponseCode.MESSAGE_ILLEGAL, "the message body length is zero")
        if len(msg.body) > self.max_message_size:
            raise MQClientError(
                ResponseCode.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {self.max_message_size}"
            )

    def build_request(self, msg: Message, mq: MessageQueue, batch: bool = False) -> RemotingCommand:
        """The SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) command Java's sendKernelImpl builds."""
        body = msg.body
        sys_flag = 0
        if not batch:
            msg.properties.setdefault(PROPERTY_UNIQ_KEY, create_uniq_id(self.config.client_ip))
            if self.compress and len(body) >= self.compress_over:
                body = zlib.compress(body, 5)
                sys_flag |= SYSFLAG_COMPRESSED | SYSFLAG_ZLIB
            if msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
                sys_flag |= TRANSACTION_PREPARED
        header = SendMessageRequestHeader(
            producerGroup=self.group,
            topic=msg.topic,
            defaultTopic=DEFAULT_TOPIC,
            defaultTopicQueueNums=self.default_topic_queue_nums,
            queueId=mq.queue_id,
            sysFlag=sys_flag,
            bornTimestamp=int(time.time() * 1000),
            flag=msg.flag,
            properties=properties_to_string(msg.properties),
            reconsumeTimes=0,
            unitMode=False,
            batch=batch,
            brokerName=mq.broker_name,
        )
        fields, order = send_header_to_v2(header)
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_REPLY_MESSAGE_V2 if is_reply(msg) else RequestCode.SEND_MESSAGE_V2
        request = RemotingCommand.request(code, fields, body)
        request.fast_keys = order
        return request

    async def _send_kernel(
        self, msg: Message, mq: MessageQueue, timeout: float, oneway: bool, batch_ids: str | None
    ) -> SendResult | None:
        client = self._running()
        addr = await client.find_master_addr(mq.broker_name, mq.topic)
        request = self.build_request(msg, mq, batch=batch_ids is not None)
        if oneway:
            request.mark_oneway()
            await client.oneway(addr, request)
            return None
        response = await client.call(addr, request, timeout, ok=tuple(_SEND_STATUS))
        return SendResult(
            send_status=_SEND_STATUS[response.code],
            msg_id=batch_ids if batch_ids is not None else msg.properties[PROPERTY_UNIQ_KEY],
            offset_msg_id=response.field("msgId") or "",
            message_queue=MessageQueue(mq.topic, mq.broker_name, int(response.field("queueId") or mq.queue_id)),
            queue_offset=int(response.field("queueOffset") or 0),
            transaction_id=response.field("transactionId"),
            region_id=response.field("MSG_REGION"),
            trace_on=response.field("TRACE_ON") != "false",
        )


@dataclass
class TransactionSendResult:
    """A half message's SendResult and what the local transaction decided."""

    send_result: SendResult
    local_state: TransactionState


LocalExecutor = Callable[[Message, Any], Any]
LocalChecker = Callable[[MessageExt], Any]


class TransactionProducer(Producer):
    """TransactionMQProducer: half message, local transaction, END_TRANSACTION, answers to checks.

    ``execute(msg, arg)`` and ``check(msg)`` return a TransactionState (or a Deferred/awaitable of
    one); an exception counts as UNKNOW, and the broker will ask again later.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *, execute: LocalExecutor, check: LocalChecker, **kwargs: Any) -> None:
        super().__init__(group, namesrv_addr, **kwargs)
        self.execute = execute
        self.check = check

    @deferred
    async def send_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, then END_TRANSACTION oneway."""
        msg.properties.pop(PROPERTY_DELAY, None)
        msg.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[PROPERTY_PRODUCER_GROUP] = self.group
        result = await self._send(msg, None, None, None, None, oneway=False)
        assert result is not None
        state, error = TransactionState.UNKNOW, None
        if result.send_status is SendStatus.SEND_OK:
            msg.transaction_id = msg.properties.get(PROPERTY_UNIQ_KEY)
            try:
                state = await call_user(self.execute, msg, arg) or TransactionState.UNKNOW
            except Exception as exc:
                log.failure("local transaction of {id} failed", id=result.msg_id)
                error = exc
        else:
            state = TransactionState.ROLLBACK_MESSAGE
        await self._end_transaction(result, state, error)
        return TransactionSendResult(result, state)

    async def _end_transaction(self, result: SendResult, state: TransactionState, error: Exception | None) -> None:
        client = self._running()
        _, _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id or result.msg_id)
        header = EndTransactionRequestHeader(
            producerGroup=self.group,
            tranStateTableOffset=result.queue_offset,
            commitLogOffset=commit_log_offset,
            commitOrRollback=state.value,
            fromTransactionCheck=False,
            msgId=result.msg_id,
            transactionId=result.transaction_id,
            bname=result.message_queue.broker_name,
        )
        remark = f"executeLocalTransactionBranch exception: {error}" if error else None
        addr = await client.find_master_addr(result.message_queue.broker_name, result.message_queue.topic)
        await client.oneway(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, java_fields(header), remark=remark, oneway=True))

    def check_transaction_state(self, header: CheckTransactionStateRequestHeader, msg: MessageExt, conn: RemotingProtocol) -> None:
        """Answer a broker's CHECK_TRANSACTION_STATE on the connection it came by."""
        defer.ensureDeferred(self._answer_check(header, msg, conn))

    async def _answer_check(self, header: CheckTransactionStateRequestHeader, msg: MessageExt, conn: RemotingProtocol) -> None:
        msg.transaction_id = header.transactionId
        state, remark = TransactionState.UNKNOW, None
        try:
            state = await call_user(self.check, msg) or TransactionState.UNKNOW
        except Exception as exc:
            log.failure("transaction check of {id} failed", id=msg.msg_id)
            remark = f"checkLocalTransactionState Exception: {exc}"
        end = EndTransactionRequestHeader(
            producerGroup=self.group,
            tranStateTableOffset=header.tranStateTableOffset,
            commitLogOffset=header.commitLogOffset,
            commitOrRollback=state.value,
            fromTransactionCheck=True,
            msgId=msg.properties.get(PROPERTY_UNIQ_KEY) or msg.msg_id,
            transactionId=header.transactionId,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_fields(), remark=remark)
        if self.client is not None and self.client.remoting.signer is not None:
            self.client.remoting.signer(request)
        conn.invoke_oneway(request)
