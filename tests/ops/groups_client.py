"""Send COUNT messages to TOPIC with the rmqtx Python client, then pull every queue back from offset 0;
one JSON line per sent message (its broker) and per pulled body. Run as a child by test_broker_groups."""

from __future__ import annotations

import json
import sys
import time

from rmqtx.client.blocking import BlockingProducer, BlockingPullConsumer
from rmqtx.client.config import ClientConfig
from rmqtx.client.message import PullStatus


def main(namesrv: str, topic: str, count: int) -> None:
    config = ClientConfig(namesrv)
    with BlockingProducer(namesrv, "P_groups", config=config) as producer:
        for i in range(count):
            result = producer.send(topic, f"m-{i}".encode())
            print(json.dumps({"sent": f"m-{i}", "broker": result.message_queue.broker_name}), flush=True)
    with BlockingPullConsumer(namesrv, "C_groups", config=config) as consumer:
        queues = consumer.queues(topic)
        offsets = {mq: 0 for mq in queues}
        got = 0
        deadline = time.monotonic() + 30
        while got < count and time.monotonic() < deadline:
            for mq in queues:
                result = consumer.pull(mq, offsets[mq], 32)
                if result.status is PullStatus.FOUND:
                    for msg in result.messages:
                        print(json.dumps({"pulled": msg.body.decode(), "broker": mq.broker_name}), flush=True)
                    got += len(result.messages)
                offsets[mq] = result.next_begin_offset


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
