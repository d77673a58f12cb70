"""PULL_MESSAGE (11): filtered reads from the store, with long polling and offset commits.

The 5.x lite pull consumer sends the same request as LITE_PULL_MESSAGE (361) and has no fallback
to 11, so it is answered here too, as Apache 5.x does (refused when ``litePullMessageEnable`` is off).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Union, overload

from rmqtx.broker.clients import tags_filter
from rmqtx.common.subscription import SubscriptionData
from rmqtx.broker.context import FAQ_SUFFIX, BrokerContext
from rmqtx.common.message import parse_properties
from rmqtx.common.sysflag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from rmqtx.common.topics import is_readable
from rmqtx.filter import CompiledExpression, FilterSyntaxError, compile_cached
from rmqtx.remoting.codes import RequestCode, ResponseCode, SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.store.record import RecordError, decode_record
from rmqtx.store.results import GetResult, GetStatus

if TYPE_CHECKING:
    from twisted.internet import defer

    from rmqtx.broker.groups import SubscriptionGroupConfig

#: A pull's answer: at once, or once a held pull finds messages or times out.
PullAnswer = Union[RemotingCommand, "defer.Deferred[RemotingCommand | None]"]

MASTER_ID = 0


def _pull_code(status: GetStatus, requested_offset: int) -> int:
    """The response code Java's PullMessageProcessor gives each store status."""
    if status is GetStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in (GetStatus.MESSAGE_WAS_REMOVING, GetStatus.NO_MATCHED_MESSAGE):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if requested_offset != 0 else ResponseCode.PULL_NOT_FOUND
    if status in (GetStatus.OFFSET_FOUND_NULL, GetStatus.OFFSET_OVERFLOW_ONE):
        return ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_OFFSET_MOVED  # OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL


def _keep_matching(result: GetResult, expression: CompiledExpression) -> None:
    """SQL92: drop the records whose properties (TAGS included) do not match; none left = no match."""
    kept = []
    for raw in result.messages:
        try:
            props = parse_properties(decode_record(raw).properties)
        except RecordError:
            continue
        if expression.matches(props):
            kept.append(raw)
    result.messages = kept
    if not kept:
        result.status = GetStatus.NO_MATCHED_MESSAGE


def suggest_broker_id(ctx: BrokerContext, group: SubscriptionGroupConfig, result: GetResult) -> int:
    """Java's suggestWhichBrokerId: with slaveReadEnable, the group's slow-consumer broker when the
    data read is no longer in memory, else the group's brokerId; without it, always the master."""
    if not ctx.config.slaveReadEnable:
        return MASTER_ID
    return group.whichBrokerWhenConsumeSlowly if result.suggest_pull_from_slave else group.brokerId


def lite_pull_enabled(ctx: BrokerContext) -> bool:
    """5.x's ``litePullMessageEnable`` (default true; 4.9.8 has no such key)."""
    return ctx.config.switches.lite_pull_message_enable


class PullProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict:
        return {RequestCode.PULL_MESSAGE: self.process, RequestCode.LITE_PULL_MESSAGE: self.process}

    def process(self, request: RemotingCommand, conn: RemotingProtocol) -> PullAnswer:
        return self._pull(request, conn, allow_suspend=True)

    def _subscription(self, request: RemotingCommand, header: PullMessageRequestHeader
                      ) -> tuple[SubscriptionData, None] | tuple[None, RemotingCommand]:
        """The subscription the pull filters by, or the error answer Java gives."""
        if header.sysFlag & FLAG_SUBSCRIPTION:
            return SubscriptionData.from_expression(header.topic, header.subscription, header.expressionType, header.subVersion), None
        info = self.ctx.clients.consumer_group(header.consumerGroup)
        if info is None:
            return None, request.make_response(ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist{FAQ_SUFFIX}")
        sub = info.subscriptions.get(header.topic)
        if sub is None:
            return None, request.make_response(ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist{FAQ_SUFFIX}")
        if sub.sub_version < header.subVersion:
            return None, request.make_response(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        return sub, None

    @overload
    def _pull(self, request: RemotingCommand, conn: RemotingProtocol, allow_suspend: Literal[False]) -> RemotingCommand: ...
    @overload
    def _pull(self, request: RemotingCommand, conn: RemotingProtocol, allow_suspend: bool) -> PullAnswer: ...

    def _pull(self, request: RemotingCommand, conn: RemotingProtocol, allow_suspend: bool) -> PullAnswer:
        ctx = self.ctx
        header = PullMessageRequestHeader.from_command(request)
        if not is_readable(ctx.config.brokerPermission):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the broker[{ctx.config.brokerIP1}] pulling message is forbidden")
        if request.code == RequestCode.LITE_PULL_MESSAGE and not lite_pull_enabled(ctx):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the broker[{ctx.config.brokerIP1}] for lite pull consumer is forbidden")
        group = ctx.groups.find(header.consumerGroup)
        if group is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{header.consumerGroup}] does not exist,{FAQ_SUFFIX}"
            )
        if not group.consumeEnable:
            return request.make_response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumerGroup}")
        tc = ctx.topics.get(header.topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!{FAQ_SUFFIX}")
        if not is_readable(tc.perm):
            return request.make_response(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden")
        if header.queueId < 0 or header.queueId >= tc.readQueueNums:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queueId}] is illegal, topic:[{header.topic}] topicConfig.readQueueNums:[{tc.readQueueNums}] consumer:[{conn.peer}]",
            )
        sub, error = self._subscription(request, header)
        if error is not None:
            return error
        assert sub is not None  # _subscription gives one or the other
        expression = None
        message_filter = tags_filter(sub)
        if not sub.is_tag:
            if not ctx.config.enablePropertyFilter:
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {sub.expression_type}"
                )
            try:
                expression = compile_cached(sub.sub_string)
            except FilterSyntaxError as exc:
                return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
            if not header.sysFlag & FLAG_SUBSCRIPTION:  # bit maps hold registered groups only, as in Java
                message_filter = ctx.filters.cq_filter(header.topic, header.consumerGroup, sub.sub_string)
        result: GetResult = ctx.store.get_message(
            header.topic, header.queueId, header.queueOffset, header.maxMsgNums, message_filter
        )
        if expression is not None and result.status is GetStatus.FOUND:
            ctx.filters.evaluations += len(result.messages)
            _keep_matching(result, expression)
        code = _pull_code(result.status, header.queueOffset)
        response = request.make_response(code, result.status.name)
        PullMessageResponseHeader(
            suggest_broker_id(ctx, group, result), result.next_begin_offset, result.min_offset, result.max_offset
        ).apply_to(response)
        # Java's commitPullOffset: where the group will read next (5.x's inflight and ready figures)
        ctx.stats.pull_offsets[(header.topic, header.consumerGroup, header.queueId)] = result.next_begin_offset
        if code == ResponseCode.SUCCESS:
            response.body = b"".join(result.messages)
            ctx.stats.on_get(header.topic, header.consumerGroup, len(result.messages), len(response.body))
        else:
            ctx.stats.on_get(header.topic, header.consumerGroup, 0, 0)
        if allow_suspend and header.sysFlag & FLAG_COMMIT_OFFSET and not ctx.config.is_slave:  # Java: a slave stores none
            ctx.offsets.commit(header.consumerGroup, header.topic, header.queueId, header.commitOffset)
        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and header.sysFlag & FLAG_SUSPEND:
            timeout_ms = header.suspendTimeoutMillis if ctx.config.longPollingEnable else ctx.config.shortPollingTimeMills
            return ctx.holds.hold(
                header.topic,
                header.queueId,
                header.queueOffset,
                timeout_ms / 1000,
                lambda final: self._retry_held(request, conn, final),
            )
        return response

    def _retry_held(self, request: RemotingCommand, conn: RemotingProtocol, final: bool) -> RemotingCommand | None:
        """Run a held pull again; before its time is up, only an answer with messages is sent."""
        if conn.closed:
            return None
        response = self._pull(request, conn, allow_suspend=False)
        if not final and response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            return None
        response.serialize_type = SerializeType.JSON  # Java answers resumed pulls in JSON, whatever the request used
        return response
