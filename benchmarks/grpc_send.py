"""Round trips through the gRPC endpoint (grpc.aio on its own loop, each call handed to the reactor):
sequential Heartbeat and SendMessage with a raw grpcio client, the 5.x Python SDK's producer
``send``, and a remoting SEND_MESSAGE_V2 over one socket for comparison. Prints a Markdown table.

    python benchmarks/grpc_send.py [--count 500]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqtx.remoting.codes import RequestCode  # noqa: E402
from rmqtx.remoting.command import RemotingCommand  # noqa: E402
from rmqtx.remoting.headers import SendMessageRequestHeader, send_header_to_v2  # noqa: E402
from rmqtx.remoting.serializer import decode_frame, encode_frame  # noqa: E402
from testkit.py5 import PY5_VENV, grpc_standalone, py5_python  # noqa: E402

SDK_LOOP = """
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, Message, Producer
endpoint, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=5), (topic,))
producer.startup()
times = []
for i in range(count):
    msg = Message(); msg.topic = topic; msg.body = b"x" * 100
    t = time.perf_counter(); producer.send(msg); times.append(time.perf_counter() - t)
producer.shutdown()
print(json.dumps(times))
"""


def row(name: str, times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    return f"| {name} | {len(ms)} | {statistics.mean(ms):.2f} | {ms[len(ms) // 2]:.2f} | {ms[int(len(ms) * 0.99) - 1]:.2f} |"


def remoting_sends(broker: str, topic: str, count: int) -> list[float]:
    host, port = broker.rsplit(":", 1)
    times = []
    with socket.create_connection((host, int(port))) as sock:
        for i in range(count):
            header = SendMessageRequestHeader(producerGroup="P_bench", topic=topic, defaultTopic="TBW102",
                                              defaultTopicQueueNums=4, queueId=i % 4, sysFlag=0,
                                              bornTimestamp=int(time.time() * 1000), flag=0, properties="WAIT\x01true")
            fields, order = send_header_to_v2(header)
            frame = encode_frame(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=b"x" * 100,
                                                 fast_keys=order, opaque=i))
            t = time.perf_counter()
            sock.sendall(frame)
            head = sock.recv(4, socket.MSG_WAITALL)
            decode_frame(head + sock.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL))
            times.append(time.perf_counter() - t)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    os.environ.setdefault("RMQTX_GRPC_STUBS", str(PY5_VENV))
    import grpc

    from rmqtx.grpc import stubs

    d, s, service_grpc = stubs.load()
    server = grpc_standalone().start()
    try:
        server.create_topic("GRPC_BENCH", 4)
        metadata = (("x-mq-client-id", "bench@1"),)
        with grpc.insecure_channel(server.grpc) as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            beats, sends = [], []
            for i in range(args.count):
                t = time.perf_counter()
                stub.Heartbeat(s.HeartbeatRequest(client_type=d.ClientType.PRODUCER), metadata=metadata, timeout=5)
                beats.append(time.perf_counter() - t)
            for i in range(args.count):
                msg = d.Message(topic=d.Resource(name="GRPC_BENCH"), body=b"x" * 100,
                                system_properties=d.SystemProperties(message_id=f"01BENCH{i:08d}",
                                                                     message_type=d.MessageType.NORMAL))
                t = time.perf_counter()
                resp = stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=metadata, timeout=5)
                sends.append(time.perf_counter() - t)
                assert resp.status.code == d.Code.OK, resp.status
        sdk = json.loads(subprocess.run([py5_python(), "-c", SDK_LOOP, server.grpc, "GRPC_BENCH", str(args.count)],
                                        capture_output=True, text=True, check=True, timeout=300).stdout.splitlines()[-1])
        remoting = remoting_sends(server.broker, "GRPC_BENCH", args.count)
    finally:
        server.close()
    print("| sequential round trip, 100-byte body | n | mean ms | p50 ms | p99 ms |")
    print("|---|---|---|---|---|")
    print(row("gRPC Heartbeat (raw grpcio client)", beats))
    print(row("gRPC SendMessage (raw grpcio client)", sends))
    print(row("gRPC send (rocketmq-python-client 5.1.2)", sdk))
    print(row("remoting SEND_MESSAGE_V2 (one socket)", remoting))
    print(f"\nload average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
