"""A pull consumer (the rmqtx Python client) that reads every queue of a topic from offset 0 forever,
printing one JSON line per message body; run as a child process by the failover test."""

from __future__ import annotations

import json
import sys
import time

from rmqtx.client.blocking import BlockingPullConsumer
from rmqtx.client.config import ClientConfig
from rmqtx.client.errors import MQBrokerError, MQClientError
from rmqtx.client.message import PullStatus


def main(namesrv: str, topic: str, seconds: float) -> None:
    config = ClientConfig(namesrv, poll_namesrv_interval=1.0, heartbeat_interval=1.0)
    with BlockingPullConsumer(namesrv, "C_ha_failover", config=config) as consumer:
        queues = consumer.queues(topic)
        offsets = {mq: 0 for mq in queues}
        print(json.dumps({"queues": len(queues)}), flush=True)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            got = 0
            for mq in queues:
                try:
                    result = consumer.pull(mq, offsets[mq], 32)
                except (TypeError, AttributeError, NameError):
                    raise  # a bug here, not a broker that is down
                except (MQClientError, MQBrokerError, Exception) as exc:  # noqa: BLE001 - master down: retry
                    print(json.dumps({"error": str(exc)[:200]}), flush=True)
                    time.sleep(0.2)
                    continue
                if result.status is PullStatus.FOUND:
                    for msg in result.messages:
                        print(json.dumps({"body": msg.body.decode()}), flush=True)
                    got += len(result.messages)
                offsets[mq] = result.next_begin_offset
            if not got:
                time.sleep(0.1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
