"""Topic routes from the name server and the queue lists producers and consumers derive from them."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from rmqtx.client.message import MessageQueue
from rmqtx.common import fastjson
from rmqtx.common.topics import PERM_READ, PERM_WRITE

MASTER_ID = 0


@dataclass(frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass
class TopicRoute:
    """GET_ROUTEINFO_BY_TOPIC's TopicRouteData: queues per broker and each broker's addresses."""

    queue_datas: list[QueueData]
    broker_addrs: dict[str, dict[int, str]]

    @classmethod
    def from_body(cls, body: bytes) -> "TopicRoute":
        """Parse the body; fastjson may write the broker id keys bare or quoted."""
        data = fastjson.loads(body)
        queues = [
            QueueData(str(q["brokerName"]), int(q.get("readQueueNums", 0)), int(q.get("writeQueueNums", 0)),
                      int(q.get("perm", 0)), int(q.get("topicSysFlag", 0)))
            for q in data.get("queueDatas") or []
        ]
        brokers = {
            str(b["brokerName"]): {int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()}
            for b in data.get("brokerDatas") or []
        }
        return cls(sorted(queues, key=lambda q: q.broker_name), brokers)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """Writable queues on brokers with a master, as Java's topicRouteData2TopicPublishInfo lists them."""
        return [
            MessageQueue(topic, q.broker_name, i)
            for q in self.queue_datas
            if q.perm & PERM_WRITE and self.master_addr(q.broker_name)
            for i in range(q.write_queue_nums)
        ]

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues, as Java's topicRouteData2TopicSubscribeInfo lists them."""
        return [MessageQueue(topic, q.broker_name, i) for q in self.queue_datas if q.perm & PERM_READ for i in range(q.read_queue_nums)]

    def with_queue_limit(self, limit: int) -> "TopicRoute":
        """The default topic's route cut to the producer's defaultTopicQueueNums (auto-creation)."""
        queues = [
            QueueData(q.broker_name, min(limit, q.read_queue_nums), min(limit, q.write_queue_nums), q.perm, q.topic_sys_flag)
            for q in self.queue_datas
        ]
        return TopicRoute(queues, self.broker_addrs)


class QueueSelector:
    """Round-robin over a topic's queues from a random start, skipping the broker that just failed."""

    def __init__(self) -> None:
        self._counter = itertools.count(random.randrange(1 << 16))

    def select(self, queues: list[MessageQueue], last_failed_broker: str | None = None) -> MessageQueue:
        start = next(self._counter)
        if last_failed_broker is not None:
            for i in range(len(queues)):
                mq = queues[(start + i) % len(queues)]
                if mq.broker_name != last_failed_broker:
                    return mq
        return queues[start % len(queues)]
