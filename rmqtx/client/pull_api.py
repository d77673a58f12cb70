"""PULL_MESSAGE as Java's PullAPIWrapper sends it, answers decoded and re-filtered by tag,
and the average queue allocation of RebalanceImpl."""

from __future__ import annotations

from rmqtx.client.message import MessageQueue, PullResult, PullStatus, decode_messages
from rmqtx.client.mq_client import MQClientInstance
from rmqtx.common.subscription import SubscriptionData
from rmqtx.common.message import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET
from rmqtx.common.sysflag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader

_PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


async def pull(
    client: MQClientInstance,
    group: str,
    mq: MessageQueue,
    sub: SubscriptionData,
    offset: int,
    max_nums: int,
    *,
    commit_offset: int = 0,
    suspend: bool,
    send_subscription: bool,
    suspend_timeout: float,
    timeout: float,
    sub_version: int = 0,
) -> PullResult:
    """One pull of ``mq`` from its master; broker errors raise MQBrokerError."""
    sys_flag = (FLAG_COMMIT_OFFSET if commit_offset > 0 else 0) | (FLAG_SUSPEND if suspend else 0)
    sys_flag |= FLAG_SUBSCRIPTION if send_subscription else 0
    header = PullMessageRequestHeader(
        consumerGroup=group,
        topic=mq.topic,
        queueId=mq.queue_id,
        queueOffset=offset,
        maxMsgNums=max_nums,
        sysFlag=sys_flag,
        commitOffset=commit_offset,
        suspendTimeoutMillis=int(suspend_timeout * 1000),
        subscription=sub.sub_string if send_subscription else None,
        subVersion=sub_version,
        expressionType=sub.expression_type,
        bname=mq.broker_name,
    )
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())  # bname is its own last field here
    request.fast_keys = header.fast_keys()
    addr = await client.find_subscribe_addr(mq.broker_name, client.pull_from_node.get(mq, 0), mq.topic)
    response = await client.call(addr, request, timeout, ok=tuple(_PULL_STATUS))
    answer = PullMessageResponseHeader.from_command(response)
    client.pull_from_node[mq] = answer.suggestWhichBrokerId or 0
    result = PullResult(
        _PULL_STATUS[response.code], answer.nextBeginOffset, answer.minOffset, answer.maxOffset,
        suggest_broker_id=answer.suggestWhichBrokerId,
    )
    if result.status is PullStatus.FOUND:
        for msg in decode_messages(response.body, mq.broker_name):
            if sub.is_tag and not sub.matches_tags(msg.tags):
                continue
            msg.properties[PROPERTY_MIN_OFFSET] = str(answer.minOffset)
            msg.properties[PROPERTY_MAX_OFFSET] = str(answer.maxOffset)
            result.messages.append(msg)
    return result


def allocate_averagely(mqs: list[MessageQueue], cids: list[str], current: str) -> list[MessageQueue]:
    """AllocateMessageQueueAveragely: contiguous slices of the sorted queues, the first ones one longer."""
    if current not in cids or not mqs:
        return []
    index = cids.index(current)
    mod = len(mqs) % len(cids)
    if len(mqs) <= len(cids):
        size = 1
    else:
        size = len(mqs) // len(cids) + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, len(mqs) - start)
    return [mqs[(start + i) % len(mqs)] for i in range(max(count, 0))]
