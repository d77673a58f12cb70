"""GET_ROUTEINFO_BY_TOPIC throughput of rmqtx's NameServer over loopback.

Starts a NameServer in a subprocess, registers a broker with 100 topics, then keeps
``--depth`` requests in flight on each of ``--conns`` connections for ``--seconds`` and prints
requests/s. The client only counts answer frames, so the NameServer is what is measured.

    .venv/bin/python benchmarks/namesrv.py [--conns 32] [--seconds 10] [--depth 4]
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time

from twisted.internet import defer, endpoints, protocol, reactor, task

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rmqtx.common.topic_config import TopicConfig  # noqa: E402
from rmqtx.namesrv.register_body import DataVersion, RegisterBrokerBody  # noqa: E402
from rmqtx.remoting import RemotingClient, RemotingCommand, encode_frame  # noqa: E402

TOPICS = [f"BenchTopic_{i}" for i in range(100)]


def serve() -> None:
    """Child process: a NameServer on an ephemeral port; prints the port, runs until killed."""
    from rmqtx.namesrv.config import NamesrvConfig
    from rmqtx.namesrv.service import NamesrvService

    kv = os.path.join(tempfile.mkdtemp(prefix="rmqtx-bench-"), "kvConfig.json")
    svc = NamesrvService(NamesrvConfig(listenAddress="127.0.0.1", listenPort=0, kvConfigPath=kv))
    svc.startService()
    print(svc.port.getHost().port, flush=True)
    reactor.run()


class Pump(protocol.Protocol):
    """Sends one pre-encoded request per answer received, keeping ``depth`` in flight."""

    def __init__(self, frames: list[bytes], depth: int) -> None:
        self.frames, self.depth = frames, depth
        self.buffer = b""
        self.answers = 0
        self.sent = 0
        self.running = True

    def connectionMade(self) -> None:
        for _ in range(self.depth):
            self.send_one()

    def send_one(self) -> None:
        self.transport.write(self.frames[self.sent % len(self.frames)])
        self.sent += 1

    def dataReceived(self, data: bytes) -> None:
        buf = self.buffer + data
        pos = 0
        while len(buf) - pos >= 4:
            (length,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos < 4 + length:
                break
            pos += 4 + length
            self.answers += 1
            if self.running:
                self.send_one()
        self.buffer = buf[pos:]


async def run(port: int, conns: int, seconds: float, depth: int) -> None:
    addr = f"127.0.0.1:{port}"
    client = RemotingClient(reactor)
    configs = [TopicConfig(t, 8, 8, 6) for t in TOPICS]
    body = RegisterBrokerBody(DataVersion(int(time.time() * 1000), 1), configs, []).encode()
    ext = {"brokerName": "bench-a", "brokerAddr": "127.0.0.1:30911", "clusterName": "BenchCluster",
           "haServerAddr": "127.0.0.1:30912", "brokerId": 0, "compressed": False, "bodyCrc32": 0}
    resp = await client.invoke(addr, RemotingCommand.request(103, ext, body))
    assert resp.code == 0, resp
    frames = [encode_frame(RemotingCommand.request(105, {"topic": t})) for t in TOPICS]
    endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    pumps = [await endpoint.connect(protocol.Factory.forProtocol(lambda: Pump(frames, depth))) for _ in range(conns)]
    await task.deferLater(reactor, 1.0, lambda: None)  # warm-up
    start_count, start = sum(p.answers for p in pumps), time.perf_counter()
    await task.deferLater(reactor, seconds, lambda: None)
    done, elapsed = sum(p.answers for p in pumps) - start_count, time.perf_counter() - start
    for p in pumps:
        p.running = False
        p.transport.loseConnection()
    await client.close()
    print(f"GET_ROUTEINFO_BY_TOPIC: {done / elapsed:,.0f} requests/s "
          f"({done} answers in {elapsed:.1f} s, {conns} connections x {depth} in flight, 100 topics)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--depth", type=int, default=4)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        d = defer.ensureDeferred(run(port, args.conns, args.seconds, args.depth))
        d.addErrback(lambda f: print(f.getTraceback(), file=sys.stderr))
        d.addBoth(lambda _: reactor.stop())
        reactor.run()
    finally:
        child.terminate()
        child.wait()


if __name__ == "__main__":
    main()
