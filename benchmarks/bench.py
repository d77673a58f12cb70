"""Broker throughput in the spirit of RocketMQ's benchmark Producer/Consumer.

    python benchmarks/bench.py producer --senders 64 --seconds 10 [--flush ASYNC_FLUSH|SYNC_FLUSH]
    python benchmarks/bench.py consumer --seconds 10
    python benchmarks/bench.py all          # both flush modes, 64 senders, then a consumer run

Without ``--namesrv`` it starts its own ``twistd rmqstandalone`` (store in a temp dir) and reports
that process's RSS. Senders are concurrent synchronous producers: each waits for its answer
before sending again. ``--profile FILE`` runs the broker under cProfile and prints its top functions.
"""

from __future__ import annotations

import argparse
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402
from twisted.internet import defer, endpoints, protocol, reactor  # noqa: E402
from twisted.protocols.basic import Int32StringReceiver  # noqa: E402

from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402
from rmqtx.remoting.serializer import encode_frame  # noqa: E402
from rmqtx.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader, send_header_to_v2  # noqa: E402
from testkit.standalone import Standalone, call  # noqa: E402

TOPIC = "BenchTopic"
QUEUES = 8
CONNECTIONS = 4


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def send_request(queue_id: int, size: int, n: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producerGroup="P_bench", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=QUEUES, queueId=queue_id,
        sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
        properties=f"KEYS\x01k{n}\x02UNIQ_KEY\x01{n:032X}\x02WAIT\x01true\x02TAGS\x01TagA", reconsumeTimes=0,
        unitMode=False, batch=False,
    )
    fields, order = send_header_to_v2(header)
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=b"x" * size, fast_keys=order)


class _LeanSender(Int32StringReceiver):
    """Load-generator connection: pre-encoded requests, answers matched by opaque, code read only.

    Kept lean so the measurement is of the broker, not of the generator (they share the cores).
    """

    MAX_LENGTH = 16 * 1024 * 1024

    def __init__(self) -> None:
        self.waiting: dict[int, defer.Deferred] = {}

    def stringReceived(self, payload: bytes) -> None:
        header_len = int.from_bytes(payload[1:4], "big")
        header = orjson.loads(payload[4 : 4 + header_len])
        self.waiting.pop(header["opaque"]).callback(header["code"])

    def request(self, frame: bytes, opaque: int) -> defer.Deferred:
        d = defer.Deferred()
        self.waiting[opaque] = d
        self.transport.write(frame)
        return d


async def produce(broker: str, senders: int, seconds: float, size: int) -> dict:
    host, port = broker.rsplit(":", 1)
    factory = protocol.Factory.forProtocol(_LeanSender)
    conns = [await endpoints.TCP4ClientEndpoint(reactor, host, int(port)).connect(factory) for _ in range(CONNECTIONS)]
    # each sender owns one opaque and re-sends its pre-encoded frame: bodies and keys as a producer's
    frames = []
    for i in range(senders):
        request = send_request(i % QUEUES, size, i)
        request.opaque = i
        frames.append(encode_frame(request))
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def sender(i: int) -> None:
        nonlocal errors
        conn, frame = conns[i % CONNECTIONS], frames[i]
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            code = await conn.request(frame, i)
            latencies.append(time.perf_counter() - start)
            if code != ResponseCode.SUCCESS:
                errors += 1

    began = time.perf_counter()
    await defer.gatherResults([defer.ensureDeferred(sender(i)) for i in range(senders)])
    elapsed = time.perf_counter() - began
    for conn in conns:
        conn.transport.loseConnection()
    latencies.sort()
    return {
        "msgs": len(latencies),
        "rate": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "errors": errors,
    }


async def consume(broker: str, seconds: float) -> dict:
    client = RemotingClient()
    offsets = dict.fromkeys(range(QUEUES), 0)
    total = 0
    deadline = time.perf_counter() + seconds
    began = time.perf_counter()

    async def puller(queue_id: int) -> None:
        nonlocal total
        while time.perf_counter() < deadline:
            header = PullMessageRequestHeader(
                consumerGroup="C_bench", topic=TOPIC, queueId=queue_id, queueOffset=offsets[queue_id], maxMsgNums=32,
                sysFlag=0x4, commitOffset=0, suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG",
            )
            resp = await client.invoke(broker, header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE)), timeout=10)
            if resp.code != ResponseCode.SUCCESS:
                return
            offsets[queue_id] = int(resp.ext_fields["nextBeginOffset"])
            total += resp.body.count(b"\xda\xa3\x20\xa7")  # one magic per record (bodies here are 'x's)

    await defer.gatherResults([defer.ensureDeferred(puller(q)) for q in range(QUEUES)])
    elapsed = time.perf_counter() - began
    await client.close()
    return {"msgs": total, "rate": total / elapsed}


def start_broker(flush: str, profile: str | None) -> Standalone:
    server = Standalone({"flushDiskType": flush, "mappedFileSizeCommitLog": str(256 * 1024 * 1024)})
    if profile:
        server.extra_twistd_args = [f"--profile={profile}", "--profiler=cprofile", "--savestats"]
    server.start()
    fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
    call(server.broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["producer", "consumer", "all"])
    parser.add_argument("--broker", help="broker address; default: start a standalone")
    parser.add_argument("--senders", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    parser.add_argument("--profile", help="cProfile the broker into FILE and print its top functions")
    args = parser.parse_args()

    plans = [(args.mode, args.flush)] if args.mode != "all" else [("producer", "ASYNC_FLUSH"), ("consumer", "ASYNC_FLUSH"), ("producer", "SYNC_FLUSH")]
    server = None
    jobs = list(plans)

    def next_job(_=None) -> None:
        nonlocal server
        if not jobs:
            reactor.stop()
            return
        mode, flush = jobs.pop(0)
        broker = args.broker
        if broker is None:
            if server is None or server.flush != flush:
                if server is not None:
                    server.close()
                server = start_broker(flush, args.profile)
                server.flush = flush
            broker = server.broker
        if mode == "producer":
            d = defer.ensureDeferred(produce(broker, args.senders, args.seconds, args.size))
        else:
            d = defer.ensureDeferred(consume(broker, args.seconds))

        def report(res: dict) -> None:
            rss = f"  broker RSS {rss_mb(server.proc.pid):.0f} MB" if server is not None else ""
            if mode == "producer":
                print(f"producer {flush:11s} senders={args.senders:<3d} {args.size} B: {res['rate']:>9,.0f} msgs/s  "
                      f"p50 {res['p50_ms']:.2f} ms  p99 {res['p99_ms']:.2f} ms  errors {res['errors']}{rss}", flush=True)
            else:
                print(f"consumer {flush:11s} pull 32/req, {QUEUES} queues:    {res['rate']:>9,.0f} msgs/s ({res['msgs']} msgs){rss}", flush=True)

        d.addCallback(report)
        d.addErrback(lambda f: f.printTraceback())
        d.addBoth(next_job)

    reactor.callWhenRunning(next_job)
    reactor.run()
    if server is not None:
        server.close()
        if args.profile and os.path.exists(args.profile):
            pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
