"""An rmqtx broker's own REGISTER_BROKER and UNREGISTER_BROKER frames beside Java 4.9.8's.

The broker runs as a real process with the capture's broker.conf; between it and a real rmqtx
NameServer sits a recording forwarder, as the captures' proxy sat between Java's broker and its
NameServer. What differs by nature (ports, the data version's clock, the CRC of a body holding
that clock, the opaque counter) is put back to Java's values; everything else must be the same bytes.
"""

from __future__ import annotations

import re
import socket
import threading
import unittest
import zlib
from pathlib import Path

from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.serializer import decode_frame
from testkit.ha import Broker, Cluster, wait_until
from tests.fixtures import FIXTURES, records

JAVA_PORT = 20911


class Recorder:
    """Forwards one port to another and keeps every whole frame the client side sent."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.server = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.frames: list[bytes] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        pending = b""
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                if record:
                    pending += data
                    while len(pending) >= 4 and len(pending) >= 4 + int.from_bytes(pending[:4], "big"):
                        size = 4 + int.from_bytes(pending[:4], "big")
                        with self._lock:
                            self.frames.append(pending[:size])
                        pending = pending[size:]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def of_code(self, code: int) -> list[bytes]:
        with self._lock:
            return [f for f in self.frames if decode_frame(f).code == code]

    def close(self) -> None:
        self.server.close()


def java_frames(capture: str, code: int) -> list[bytes]:
    return [bytes.fromhex(r["hex"]) for r in records(capture)
            if r.get("peer") == "namesrv" and r.get("dir") == "c2s" and "hex" in r
            and decode_frame(bytes.fromhex(r["hex"])).code == code]


def as_java(frame: bytes, port: int, ha_port: int, java: bytes) -> bytes:
    """``frame`` with what differs by nature taken from Java's frame ``java``, its lengths recomputed."""
    def parts(f: bytes) -> tuple[bytes, bytes]:
        header_len = int.from_bytes(f[4:8], "big") & 0xFFFFFF
        return f[8:8 + header_len], f[8 + header_len:]

    header, body = parts(frame)
    java_header, java_body = parts(java)
    ours = []
    for text in (header, body):
        text = text.replace(f"127.0.0.1:{port}".encode(), f"127.0.0.1:{JAVA_PORT}".encode())
        text = text.replace(f"127.0.0.1:{ha_port}".encode(), f"127.0.0.1:{JAVA_PORT + 1}".encode())
        for pattern in (rb'"timestamp":\d+', rb'"bodyCrc32":"\d+"', rb'"opaque":\d+'):
            theirs = re.search(pattern, java_header + java_body)
            if theirs:
                text = re.sub(pattern, theirs.group(0), text, count=1)
        ours.append(text)
    header, body = ours
    return (4 + len(header) + len(body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body


class RegisterFramesTest(unittest.TestCase):
    maxDiff = None

    def setUp(self) -> None:
        self.cluster = Cluster()
        self.addCleanup(self.cluster.close)
        host, port = self.cluster.namesrv.addr.split(":")
        self.recorder = Recorder((host, int(port)))
        self.addCleanup(self.recorder.close)

    def _broker(self, capture_conf: str) -> Broker:
        conf = {}
        for line in (Path(FIXTURES) / capture_conf).read_text().splitlines():
            key, _, value = line.partition("=")
            conf[key.strip()] = value.strip()
        root = self.cluster.root
        conf.update({"namesrvAddr": self.recorder.addr, "storePathRootDir": str(root / "wire" / "store"),
                     "storePathCommitLog": str(root / "wire" / "store" / "commitlog")})
        conf.pop("listenPort")
        broker = Broker(root, "wire", self.recorder.addr, conf)
        self.cluster.procs.append(broker)
        return broker

    def test_register_and_unregister_match_java_4_9_8(self) -> None:
        broker = self._broker("broker-wire.conf").start()
        ha_port = broker.ha_port
        java_register = java_frames("scenario-broker-register.jsonl", RequestCode.REGISTER_BROKER)
        wait_until(lambda: self.recorder.of_code(RequestCode.REGISTER_BROKER), 30, "a REGISTER_BROKER")
        ours = self.recorder.of_code(RequestCode.REGISTER_BROKER)[0]
        body = decode_frame(ours).body
        self.assertIn(f'"bodyCrc32":"{zlib.crc32(body) & 0x7FFFFFFF}"'.encode(), ours)  # Java's UtilAll.crc32
        expected = java_register[0]  # Java's first, sent at start as rmqtx's first is
        self.assertEqual(as_java(ours, broker.port, ha_port, expected).decode("latin-1"), expected.decode("latin-1"))

        self.assertTrue(broker.stop())
        java_unregister = java_frames("scenario-broker-shutdown.jsonl", RequestCode.UNREGISTER_BROKER)[0]
        theirs = self.recorder.of_code(RequestCode.UNREGISTER_BROKER)
        self.assertEqual(len(theirs), 1)
        self.assertEqual(as_java(theirs[0], broker.port, ha_port, java_unregister).decode("latin-1"), java_unregister.decode("latin-1"))


if __name__ == "__main__":
    unittest.main()
