"""Encode+decode rates of the remoting codec for a SEND_MESSAGE_V2 request and a pull response.

Run: python benchmarks/codec.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqtx.remoting.codes import RequestCode, SerializeType  # noqa: E402
from rmqtx.remoting.command import RemotingCommand  # noqa: E402
from rmqtx.remoting.headers import PullMessageResponseHeader  # noqa: E402
from rmqtx.remoting.serializer import decode_frame, encode_frame  # noqa: E402


def send_v2(serialize_type: SerializeType) -> RemotingCommand:
    ext = {
        "a": "P_bench", "b": "BenchmarkTopic", "c": "TBW102", "d": "4", "e": "1", "f": "0",
        "g": "1795264461738", "h": "0",
        "i": "KEYS\x01key-1\x02UNIQ_KEY\x01FD00000000000000000000000000000259465FFD2B2769B1D3A90000\x02WAIT\x01true\x02TAGS\x01TagA",
        "j": "0", "k": "false", "m": "false", "n": "broker-a",
    }
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=b"x" * 1024, serialize_type=serialize_type, fast_keys=tuple(ext))


def pull_response(serialize_type: SerializeType) -> RemotingCommand:
    cmd = RemotingCommand(0, flag=1, remark="FOUND", body=b"m" * 32 * 1100, serialize_type=serialize_type)
    return PullMessageResponseHeader(0, 32, 0, 32).apply_to(cmd)


def rate(cmd: RemotingCommand, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        for _ in range(200):
            decode_frame(encode_frame(cmd))
        n += 200
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    for name, build in (("SEND_MESSAGE_V2 request (1 KB body)", send_v2), ("PULL_MESSAGE response (32 msgs, 35 KB)", pull_response)):
        for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
            print(f"{name:42s} {stype.name:8s} {rate(build(stype), args.seconds):>10,.0f} encode+decode/s")


if __name__ == "__main__":
    main()
