"""Send and pull over TLS with rmqtx's Python client; one JSON line per result (run as a subprocess).

usage: python py_tls_client.py NAMESRV TOPIC COUNT [TRUST_CA [CLIENT_CERT CLIENT_KEY]]
"""

from __future__ import annotations

import json
import sys

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from rmqtx.client.blocking import BlockingProducer, BlockingPullConsumer  # noqa: E402
from rmqtx.client.config import ClientConfig  # noqa: E402


def config(namesrv: str, extra: list[str]) -> ClientConfig:
    cfg = ClientConfig(namesrv, tls=True, rpc_timeout=5.0)
    if extra:
        cfg.tls_trust_cert_path = extra[0]
    if len(extra) >= 3:
        cfg.tls_cert_path, cfg.tls_key_path = extra[1], extra[2]
    return cfg


def main(namesrv: str, topic: str, count: int, extra: list[str]) -> None:
    try:
        with BlockingProducer(namesrv, "PG_TLS", config=config(namesrv, extra), retry_times=0) as producer:
            for _ in range(count):
                print(json.dumps({"op": "send", "ok": True, "status": producer.send(topic, b"over tls").send_status.name}), flush=True)
        with BlockingPullConsumer(namesrv, "CG_TLS", config=config(namesrv, extra)) as consumer:
            total = sum(len(consumer.pull(mq, 0, 32).messages) for mq in consumer.queues(topic))
            print(json.dumps({"op": "pull", "ok": True, "count": total}), flush=True)
    except Exception as exc:  # the failure is the result
        print(json.dumps({"op": "error", "ok": False, "remark": repr(exc)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:])
