"""Real TCP round trips on loopback between the remoting server and client."""

from __future__ import annotations

import socket
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import defer, reactor, task, threads
from twisted.trial import unittest

from rmqtx.remoting import (
    Dispatcher,
    RemotingClient,
    RemotingCommand,
    RemotingServerFactory,
    RemotingTimeoutError,
    ResponseCode,
    SerializeType,
)
from rmqtx.remoting.serializer import decode_frame, encode_frame
from tests.client.support import wait_until

ECHO, FAIL, CALL_BACK, SLOW_ONEWAY_LOG, HOLD, ECHO_NOW = 1001, 1002, 1003, 1004, 1005, 1006


def build_server_dispatcher(seen_oneway: list, held: dict | None = None) -> Dispatcher:
    """``held``: HOLD requests park their answer there by tag, until the test fires it."""
    dispatcher = Dispatcher()

    def hold(request: RemotingCommand, conn):
        d: defer.Deferred = defer.Deferred()
        response = request.make_response(ResponseCode.SUCCESS, remark=request.field("tag"), body=request.body)
        held[request.field("tag")] = lambda: d.callback(response)  # type: ignore[index]
        return d

    def echo(request: RemotingCommand, conn):
        delay = float(request.field("delay", "0"))
        response = request.make_response(ResponseCode.SUCCESS, remark=request.field("tag"), body=request.body)
        return task.deferLater(reactor, delay, lambda: response)

    def fail(request, conn):
        raise RuntimeError("boom")

    async def call_back(request, conn):
        answer = await conn.invoke(RemotingCommand.request(40, {"consumerGroup": "g"}), timeout=2)
        return request.make_response(ResponseCode.SUCCESS, remark=f"client said {answer.remark}")

    def oneway(request, conn):
        seen_oneway.append(request.field("n"))
        return request.make_response()

    dispatcher.register(ECHO, echo)
    dispatcher.register(FAIL, fail)
    dispatcher.register(CALL_BACK, call_back)
    dispatcher.register(SLOW_ONEWAY_LOG, oneway)
    dispatcher.register(HOLD, hold)
    dispatcher.register(ECHO_NOW, lambda request, conn: request.make_response(  # answered within the read
        ResponseCode.SUCCESS, remark=request.field("tag"), body=request.body))
    return dispatcher


class ServerClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.oneway_seen: list = []
        self.held: dict = {}
        self.factory = RemotingServerFactory(build_server_dispatcher(self.oneway_seen, self.held))
        self.port = reactor.listenTCP(0, self.factory, interface="127.0.0.1")
        self.addr = f"127.0.0.1:{self.port.getHost().port}"
        client_dispatcher = Dispatcher()
        client_dispatcher.register(40, lambda req, conn: req.make_response(remark=f"ids changed for {req.field('consumerGroup')}"))
        self.client = RemotingClient(dispatcher=client_dispatcher)

    async def _teardown(self) -> None:
        await self.client.close()
        self.factory.close_all()
        await self.port.stopListening()

    def tearDown(self):
        return defer.ensureDeferred(self._teardown())

    @defer.inlineCallbacks
    def test_concurrent_requests_answered_out_of_order(self):
        """Four requests in flight on one connection; the server answers them in another order."""
        finished: list[str] = []
        calls = []
        for i in range(4):
            req = RemotingCommand.request(HOLD, {"tag": f"r{i}"}, body=b"x" * i)
            d = self.client.invoke(self.addr, req, timeout=5)
            d.addCallback(lambda resp: finished.append(resp.remark) or resp)
            calls.append((req, d))
        yield defer.ensureDeferred(wait_until(lambda: len(self.held) == 4, timeout=5))
        for tag in ("r1", "r3", "r2", "r0"):
            self.held[tag]()
            yield defer.ensureDeferred(wait_until(lambda: finished[-1:] == [tag], timeout=5))
        results = yield defer.gatherResults([d for _, d in calls])
        for (req, _), resp in zip(calls, results):
            self.assertEqual(resp.opaque, req.opaque)
            self.assertTrue(resp.is_response)
        self.assertEqual([r.body for r in results], [b"", b"x", b"xx", b"xxx"])
        self.assertEqual(finished, ["r1", "r3", "r2", "r0"])
        self.assertEqual(len(self.factory.connections), 1)

    @defer.inlineCallbacks
    def test_answers_leave_at_once_and_through_twisted_when_its_fields_are_missing(self):
        """send_now writes a read's answers on the socket itself; a Twisted without the private field it
        reads turns the shortcut off for good, and answers go on through writeSequence."""
        from rmqtx.remoting import protocol as protocol_module
        from rmqtx.remoting import send_now as send_now_module

        results: list[bool] = []
        strip = {"on": False}

        def watched(transport, parts):
            if not strip["on"]:
                results.append(send_now_module.send_now(transport, parts))
                return results[-1]
            saved = transport._tempDataBuffer
            del transport._tempDataBuffer  # what a Twisted that renamed the field would look like
            try:
                results.append(send_now_module.send_now(transport, parts))
            finally:
                transport._tempDataBuffer = saved
            return results[-1]

        self.patch(protocol_module, "send_now", watched)
        self.addCleanup(setattr, send_now_module, "enabled", True)
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(ECHO_NOW, {"tag": "fast"}, body=b"a" * 100))
        self.assertEqual((resp.remark, resp.body, results), ("fast", b"a" * 100, [True]))
        strip["on"] = True
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(ECHO_NOW, {"tag": "slow"}, body=b"b" * 100))
        self.assertEqual((resp.remark, resp.body, results[-1], send_now_module.enabled), ("slow", b"b" * 100, False, False))
        strip["on"] = False
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(ECHO_NOW, {"tag": "after"}))
        self.assertEqual((resp.remark, results[-1]), ("after", False))  # off for good, answered all the same

    @defer.inlineCallbacks
    def test_oneway_gets_no_answer(self):
        yield self.client.invoke_oneway(self.addr, RemotingCommand.request(SLOW_ONEWAY_LOG, {"n": "1"}))
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(ECHO, {"tag": "after"}))
        self.assertEqual(self.oneway_seen, ["1"])
        self.assertEqual(resp.remark, "after")
        conn = yield self.client.connection(self.addr)
        self.assertEqual(conn.pending, {})

    @defer.inlineCallbacks
    def test_unknown_code_json_and_binary(self):
        for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
            req = RemotingCommand.request(9999, serialize_type=stype)
            resp = yield self.client.invoke(self.addr, req)
            self.assertEqual(resp.code, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
            self.assertEqual(resp.remark, " request type 9999 not supported")
            self.assertEqual(resp.serialize_type, stype)

    @defer.inlineCallbacks
    def test_handler_error_keeps_connection(self):
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(FAIL))
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertIn("boom", resp.remark)
        self.flushLoggedErrors(RuntimeError)
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(ECHO, {"tag": "still"}))
        self.assertEqual(resp.remark, "still")

    @defer.inlineCallbacks
    def test_server_to_client_request(self):
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(CALL_BACK))
        self.assertEqual(resp.remark, "client said ids changed for g")

    @defer.inlineCallbacks
    def test_invoke_timeout(self):
        req = RemotingCommand.request(HOLD, {"tag": "slow"})
        yield self.assertFailure(self.client.invoke(self.addr, req, timeout=0.2), RemotingTimeoutError)
        yield defer.ensureDeferred(wait_until(lambda: "slow" in self.held, timeout=5))
        self.held["slow"]()  # the server answers late; the client has given up on it

    def _raw_exchange(self, payload: bytes, read: bool = True) -> bytes:
        """Blocking socket client (run in a thread): send bytes, read until the server closes or 1 s."""
        with socket.create_connection(("127.0.0.1", self.port.getHost().port), timeout=1) as sock:
            sock.sendall(payload)
            data = b""
            try:
                while read:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return data + b"<closed>"
                    data += chunk
            except socket.timeout:
                pass
            return data

    @defer.inlineCallbacks
    def test_malformed_frames_close_only_that_connection(self):
        good = yield self.client.connection(self.addr)
        cases = [
            struct.pack(">ii", 13, 9) + b"{not json",
            struct.pack(">i", 16777217) + b"x" * 100,
            struct.pack(">i", -1),
            struct.pack(">i", 0),
            struct.pack(">ii", 8, 200) + b"abcd",
            struct.pack(">ii", 6, 2 << 24 | 2) + b"{}",
        ]
        for payload in cases:
            out = yield threads.deferToThread(self._raw_exchange, payload)
            self.assertEqual(out, b"<closed>", payload[:12])
        self.assertFalse(good.closed)
        resp = yield self.client.invoke(self.addr, RemotingCommand.request(ECHO, {"tag": "alive"}))
        self.assertEqual(resp.remark, "alive")

    @defer.inlineCallbacks
    def test_many_frames_in_one_write_and_one_frame_over_many_writes(self):
        frames = b"".join(encode_frame(RemotingCommand.request(ECHO, {"tag": f"t{i}"}, opaque=100 + i)) for i in range(5))

        def split_send() -> bytes:
            with socket.create_connection(("127.0.0.1", self.port.getHost().port), timeout=2) as sock:
                for i in range(0, len(frames), 7):  # one frame spread over many writes, several per read
                    sock.sendall(frames[i : i + 7])
                data = b""
                while data.count(b'"remark"') < 5:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                return data

        data = yield threads.deferToThread(split_send)
        remarks = []
        while data:
            (total,) = struct.unpack(">i", data[:4])
            remarks.append(decode_frame(data[: 4 + total]).remark)
            data = data[4 + total :]
        self.assertEqual(sorted(remarks), [f"t{i}" for i in range(5)])


class FuzzServerTest(unittest.TestCase):
    """Random, truncated and oversized input never takes the server down."""

    def setUp(self) -> None:
        self.factory = RemotingServerFactory(build_server_dispatcher([]))
        self.port = reactor.listenTCP(0, self.factory, interface="127.0.0.1")

    def tearDown(self):
        self.factory.close_all()
        return self.port.stopListening()

    def _blast(self, blobs: list[bytes]) -> bytes:
        port = self.port.getHost().port
        for blob in blobs:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(blob)
                try:
                    sock.recv(65536)
                except (socket.timeout, ConnectionResetError):
                    pass
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(encode_frame(RemotingCommand.request(ECHO, {"tag": "ok"})))
            (total,) = struct.unpack(">i", sock.recv(4))
            data = b""
            while len(data) < total:
                data += sock.recv(total - len(data))
            return data

    @defer.inlineCallbacks
    def test_random_input(self):
        blobs = []

        @settings(max_examples=60, deadline=None, database=None)
        @given(st.one_of(
            st.binary(max_size=300),
            st.builds(lambda n, b: struct.pack(">i", n) + b, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=64)),
            st.builds(lambda b: b[: len(b) // 2], st.just(encode_frame(RemotingCommand.request(ECHO, {"tag": "half"})))),
        ))
        def collect(blob: bytes) -> None:
            blobs.append(blob)

        collect()
        data = yield threads.deferToThread(self._blast, blobs)
        self.assertIn(b'"remark":"ok"', data)
