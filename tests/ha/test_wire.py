"""The HA wire protocol against hand-written peers: a fake slave reads the master's frames, a fake
master feeds a real rmqtx slave good and bad frames."""

from __future__ import annotations

import socket
import struct
import threading
import time
import unittest

from rmqtx.remoting.codes import ResponseCode
from testkit.ports import free_port
from testkit.ha import Cluster, Sender, wait_until
from tests.ha.test_replication import TOPIC, commit_log_end, send_many

HEADER = struct.Struct(">qi")


def read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    offset, size = HEADER.unpack(read_exact(sock, 12))
    return offset, read_exact(sock, size) if size else b""


class FakeSlaveTest(unittest.TestCase):
    """A socket speaking the slave's side (8-byte reports) to a real rmqtx master."""

    def setUp(self) -> None:
        self.cluster = Cluster()

    def tearDown(self) -> None:
        self.assertEqual(self.cluster.close(), [])

    def test_master_frames_batches_heartbeats_and_start_at_last_file(self) -> None:
        master = self.cluster.broker("master", brokerRole="SYNC_MASTER", haSendHeartbeatInterval=1000,
                                     haTransferBatchSize=4096).start()
        sender = Sender(master.addr)
        codes = [sender.send(TOPIC, b"z" * 600, i % 4, WAIT="false").code for i in range(2000)]  # ~1.6 MB: 2 files
        self.assertEqual(set(codes), {ResponseCode.SUCCESS})
        data = master.commit_log_bytes()
        with socket.create_connection(("127.0.0.1", master.ha_port), timeout=10) as sock:
            sock.sendall(struct.pack(">q", 0))  # an empty slave: the master starts at its last file's start
            offset, body = read_frame(sock)
            self.assertEqual(offset, 1024 * 1024)
            self.assertEqual(len(body), 4096)  # haTransferBatchSize
            self.assertEqual(body, data[offset:offset + 4096])
        with socket.create_connection(("127.0.0.1", master.ha_port), timeout=10) as sock:
            sock.sendall(struct.pack(">q", 100))  # any other offset: from exactly there, frames never cross a file
            pos, got = 100, bytearray()
            while pos < len(data.rstrip(b"\0")):
                offset, body = read_frame(sock)
                self.assertEqual(offset, pos)
                self.assertLessEqual(len(body), 4096)
                self.assertEqual(offset // (1024 * 1024), (offset + len(body) - 1) // (1024 * 1024))
                got += body
                pos += len(body)
            self.assertEqual(bytes(got), data[100:pos])
            start = time.monotonic()
            offset, body = read_frame(sock)  # idle: a header-only heartbeat at the next offset
            self.assertEqual((offset, body), (pos, b""))
            self.assertLess(time.monotonic() - start, 5)
            # SYNC_MASTER: a send waits for this slave's ack; without one it times out after slaveTimeout (3 s)
            t0 = time.monotonic()
            resp = sender.send(TOPIC, b"wait for me")
            self.assertEqual(resp.code, ResponseCode.FLUSH_SLAVE_TIMEOUT)
            self.assertGreaterEqual(time.monotonic() - t0, 2.5)
            # an ack releases the next send at once
            holder: list = []
            th = threading.Thread(target=lambda: holder.append(sender.send(TOPIC, b"acked")))
            th.start()
            end = pos
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and th.is_alive():
                sock.settimeout(0.2)
                try:
                    offset, body = read_frame(sock)
                    end = max(end, offset + len(body))
                except (socket.timeout, TimeoutError):
                    pass
                sock.sendall(struct.pack(">q", end))
            th.join(5)
            self.assertEqual(holder[0].code, ResponseCode.SUCCESS)
        sender.close()

    def test_report_beyond_master_closes_connection(self) -> None:
        master = self.cluster.broker("master").start()
        Sender(master.addr).send(TOPIC, b"one")
        with socket.create_connection(("127.0.0.1", master.ha_port), timeout=10) as sock:
            sock.sendall(struct.pack(">q", 0))
            read_frame(sock)
            sock.sendall(struct.pack(">q", 1 << 40))  # more than the master ever wrote
            wait_until(lambda: sock.recv(65536) == b"", 10, "the master to close the connection")


class FakeMaster:
    """A listening socket that plays the master's side for one slave connection at a time."""

    def __init__(self) -> None:
        self.port = free_port()
        self.server = socket.create_server(("127.0.0.1", self.port))
        self.server.settimeout(30)

    def accept(self) -> socket.socket:
        conn, _ = self.server.accept()
        conn.settimeout(10)
        return conn

    def close(self) -> None:
        self.server.close()


class FakeMasterTest(unittest.TestCase):
    """A real rmqtx slave fed by hand: out-of-order or bad frames close the connection, the store stays intact."""

    def setUp(self) -> None:
        self.cluster = Cluster()
        self.fake = FakeMaster()

    def tearDown(self) -> None:
        self.fake.close()
        self.assertEqual(self.cluster.close(), [])

    def test_wrong_offset_closes_and_leaves_store_intact(self) -> None:
        source = self.cluster.broker("source").start()  # a real master, only to produce real commit log bytes
        acked = send_many(source.addr, 10, size=100)
        good = source.commit_log_bytes(commit_log_end(acked, source))
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1,
                                    haMasterAddress=f"127.0.0.1:{self.fake.port}").start()
        conn = self.fake.accept()
        self.assertEqual(read_exact(conn, 8), struct.pack(">q", 0))
        half = len(good) // 2
        conn.sendall(HEADER.pack(0, half) + good[:half])  # a record split over two frames
        conn.sendall(HEADER.pack(half, len(good) - half) + good[half:])
        wait_until(lambda: read_exact(conn, 8) == struct.pack(">q", len(good)), 10, "the slave's ack")
        conn.sendall(HEADER.pack(len(good) + 100, 5) + b"junk!")  # not the slave's max offset
        wait_until(lambda: conn.recv(65536) == b"", 10, "the slave to close the connection")
        conn.close()
        self.assertEqual(slave.commit_log_bytes(len(good) + 4096), good + bytes(4096))
        # the slave dispatched its consume queue from the replicated bytes (the fake master has no topic
        # table to sync, so it is read from disk): queue 1 holds messages 1, 5 and 9
        cq_file = slave.store / "consumequeue" / TOPIC / "1" / f"{0:020d}"
        units = wait_until(lambda: (u := cq_file.read_bytes()[:80])[40:60] != bytes(20) and u, 10, "queue 1's units")
        self.assertEqual([struct.unpack_from(">qi", units, 20 * i)[0] for i in range(4)],
                         [acked[1][0], acked[5][0], acked[9][0], 0])
        conn = self.fake.accept()  # it reconnects and asks for what follows its data
        self.assertEqual(read_exact(conn, 8), struct.pack(">q", len(good)))
        conn.sendall(HEADER.pack(len(good), -1))  # a negative size: closed as well
        wait_until(lambda: conn.recv(65536) == b"", 10, "the slave to close the connection")
        conn.close()
        self.assertEqual(slave.commit_log_bytes(len(good) + 4096), good + bytes(4096))


if __name__ == "__main__":
    unittest.main()
