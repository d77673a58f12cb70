"""POP names and the extra-info strings (``POP_CK``) broker and client build and parse, as 5.x does."""

from __future__ import annotations

from dataclasses import dataclass

from rmqtx.common.topics import RETRY_PREFIX

#: The revive queue id that marks an orderly pop: its acks move the committed offset instead.
ORDER_REVIVE_QUEUE = 999
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"
NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"
#: ConsumeInitMode: where a group without an offset starts.
INIT_MIN, INIT_MAX = 0, 1


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """Where un-acked popped messages come back: ``%RETRY%group_topic`` (``+`` with retry topic v2)."""
    return f"{RETRY_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def retry_mark(topic: str) -> str:
    """The one-character topic kind the extra info carries: normal, retry v1 or retry v2."""
    if topic.startswith(RETRY_PREFIX):
        return RETRY_V2 if "+" in topic else RETRY_V1
    return NORMAL


def real_topic(topic: str, group: str, mark: str) -> str:
    """The topic a request names, from the original topic, the group and the mark."""
    if mark == RETRY_V1:
        return pop_retry_topic(topic, group)
    if mark == RETRY_V2:
        return pop_retry_topic(topic, group, True)
    return topic


def extra_info(ck_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
               broker_name: str, queue_id: int, msg_offset: int | None = None) -> str:
    """The space-separated checkpoint info (``POP_CK``) a client sends back in ack and change requests."""
    parts = [ck_offset, pop_time, invisible_time, revive_qid, retry_mark(topic), broker_name, queue_id]
    if msg_offset is not None:
        parts.append(msg_offset)
    return " ".join(str(p) for p in parts)


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    mark: str
    broker_name: str
    queue_id: int
    msg_offset: int | None

    @classmethod
    def parse(cls, text: str | None) -> "ExtraInfo":
        """Read a client's extra info; ValueError when it is not one the broker gave out."""
        if not text:
            raise ValueError("extraInfo is empty")
        p = text.split(" ")
        if len(p) < 7:
            raise ValueError(f"extraInfo has {len(p)} parts: {text!r}")
        return cls(int(p[0]), int(p[1]), int(p[2]), int(p[3]), p[4], p[5], int(p[6]), int(p[7]) if len(p) > 7 else None)


def offset_info(topic: str, queue_id: int, value: object) -> str:
    """One ``mark queueId value`` entry of startOffsetInfo / msgOffsetInfo / orderCountInfo."""
    return f"{retry_mark(topic)} {queue_id} {value}"


def order_count_key(queue_id: int, offset: int) -> str:
    return f"qo{queue_id}%{offset}"
