"""ACL steps with rmqtx's own Python client; one JSON line per result (run as a subprocess).

usage: python py_acl_client.py NAMESRV STEP...   STEP = AK,SK,OP,ARG1,ARG2 ("-" for no credentials)
  send,TOPIC,COUNT | pull,TOPIC,GROUP
"""

from __future__ import annotations

import json
import sys

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from rmqtx.client.blocking import BlockingProducer, BlockingPullConsumer  # noqa: E402
from rmqtx.client.errors import MQError  # noqa: E402


def report(op: str, exc: Exception | None = None, **extra: object) -> None:
    if exc is None:
        print(json.dumps({"op": op, "ok": True, **extra}), flush=True)
    else:
        code = exc.code if isinstance(exc, MQError) else -1
        remark = exc.remark if isinstance(exc, MQError) else repr(exc)
        print(json.dumps({"op": op, "ok": False, "code": code, "remark": remark}), flush=True)


def main(namesrv: str, steps: list[str]) -> None:
    for n, step in enumerate(steps):
        ak, sk, op, arg1, arg2 = step.split(",")
        keys = {} if ak == "-" else {"access_key": ak, "secret_key": sk}
        if op == "send":
            with BlockingProducer(namesrv, "PG_PY_ACL", retry_times=0, **keys) as producer:
                for _ in range(int(arg2)):
                    try:
                        result = producer.send(arg1, b"py acl")
                        report("send", status=result.send_status.name)
                    except Exception as exc:  # the refusal is the result
                        report("send", exc)
        elif op == "pull":
            with BlockingPullConsumer(namesrv, arg2, **keys) as consumer:
                total = 0
                try:
                    for mq in consumer.queues(arg1):
                        total += len(consumer.pull(mq, 0, 32).messages)
                    report("pull", count=total)
                except Exception as exc:
                    report("pull", exc)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
