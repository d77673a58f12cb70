"""Malformed or wrong-shaped request bodies get a clean error answer and one warning, no traceback."""

from __future__ import annotations

import socket
import unittest

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import decode_frame, encode_frame
from testkit.standalone import Standalone
from tests.security.hostile import BAD_BODIES, BODY_CODES


class Conn:
    """One blocking connection that sends requests and reads their answers in turn."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def call(self, request: RemotingCommand) -> RemotingCommand:
        self.sock.sendall(encode_frame(request))
        while True:  # the broker may send its own oneway requests (NOTIFY_CONSUMER_IDS_CHANGED) first
            head = self._read(4)
            cmd = decode_frame(head + self._read(int.from_bytes(head, "big")))
            if cmd.is_response and cmd.opaque == request.opaque:
                return cmd

    def close(self) -> None:
        self.sock.close()


class HostileBodyTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = Standalone().start()

    def tearDown(self) -> None:
        self.server.close()

    def test_bad_bodies_get_clean_errors(self) -> None:
        conn = Conn(self.server.broker)
        try:
            refused = 0
            for code, fields in BODY_CODES.items():
                for body in BAD_BODIES:
                    resp = conn.call(RemotingCommand.request(code, fields, body))
                    self.assertTrue(resp.is_response)
                    if resp.code != ResponseCode.SUCCESS:
                        refused += 1
                        self.assertIsNotNone(resp.remark, (code, body))
            # the broker still works on the same connection
            ok = conn.call(RemotingCommand.request(RequestCode.HEART_BEAT, {}, b'{"clientID":"c1","producerDataSet":[{"groupName":"pg"}]}'))
            self.assertEqual(ok.code, ResponseCode.SUCCESS)
        finally:
            conn.close()
        self.assertGreater(refused, len(BAD_BODIES) * 4)
        log = self.server.log_path.read_text()
        self.assertNotIn("Traceback", log)
        self.assertNotIn("CRITICAL", log.upper().replace("CRITICAL_", ""))

    def test_heartbeat_json_error_remark(self) -> None:
        conn = Conn(self.server.broker)
        try:
            resp = conn.call(RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"{"))
            group = conn.call(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, b'{"groupName":"g1","retryQueueNums":"x"}'))
        finally:
            conn.close()
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertTrue(resp.remark.startswith("com.alibaba.fastjson.JSONException: "), resp.remark)
        self.assertEqual(group.code, ResponseCode.SYSTEM_ERROR)
        log = self.server.log_path.read_text()
        self.assertEqual(log.count("bad HEART_BEAT body"), 1, log[-3000:])

    def test_every_code_survives_bad_bodies(self) -> None:
        conn = Conn(self.server.broker)
        try:
            for code in RequestCode:
                for body in BAD_BODIES[:8]:
                    resp = conn.call(RemotingCommand.request(int(code), {}, body))
                    self.assertTrue(resp.is_response)
        finally:
            conn.close()
        self.assertNotIn("Traceback", self.server.log_path.read_text())
