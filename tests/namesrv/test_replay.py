"""Replay every NameServer frame of the 4.9.8 capture session and compare the answers byte for byte."""

from __future__ import annotations

from collections import Counter

from twisted.trial import unittest

from rmqtx.remoting import decode_frame

from tests.namesrv.helpers import FIXTURES, connect, namesrv_frames, port_of, start_namesrv

#: Session 1 captures that talk to the NameServer (bad-input is direct, not proxied).
SESSION_FILES = [
    "scenario-broker-register.jsonl",
    "scenario-producer-send.jsonl",
    "scenario-push-consumer.jsonl",
    "scenario-orderly-consumer.jsonl",
    "scenario-retry.jsonl",
    "scenario-transaction.jsonl",
    "scenario-query.jsonl",
    "scenario-admin.jsonl",
    "scenario-bad-input.jsonl",
    "scenario-broker-shutdown.jsonl",
    "scenario-broker-register-noforce.jsonl",
]


def session_exchanges() -> list[tuple[float, str, bytes, bytes | None]]:
    """(time, connection key, request frame, captured answer or None) in capture-time order."""
    out = []
    for name in SESSION_FILES:
        frames = namesrv_frames(name)
        answers = {}
        for rec in frames:
            if rec["dir"] == "s2c":
                key = (rec.get("client") or rec.get("case"), rec["decoded"]["opaque"])
                answers[key] = bytes.fromhex(rec["hex"])
        for rec in frames:
            if rec["dir"] != "c2s":
                continue
            decoded = rec.get("decoded")
            if not isinstance(decoded, dict) or decoded.get("code") in (None, 9999):
                continue  # malformed frames and unknown codes have their own tests
            conn_key = rec.get("client") or f"{name}:{rec.get('case')}"
            answer = answers.get((rec.get("client") or rec.get("case"), decoded["opaque"]))
            out.append((rec["ts"], conn_key, bytes.fromhex(rec["hex"]), answer))
    out.sort(key=lambda x: x[0])
    return out


class CaptureReplayTest(unittest.TestCase):
    """The real broker's registrations, then every client request of the session, in order."""

    timeout = 20

    async def _replay(self) -> tuple[Counter, int]:
        svc = start_namesrv(self)
        port = port_of(svc)
        conns = {}
        compared: Counter = Counter()
        barrier = 0
        try:
            for _, key, frame, expected in session_exchanges():
                conn = conns.get(key)
                if conn is None:
                    conn = conns[key] = await connect(port)
                request = decode_frame(frame)
                if request.is_oneway:
                    conn.send_raw(frame)
                    # A request on the same connection that comes back proves the oneway was handled.
                    barrier += 1
                    await conn.call_raw(_probe_frame(900000 + barrier))
                    continue
                got = await conn.call_raw(frame)
                self.assertIsNotNone(expected, f"no captured answer for {request!r}")
                answer = decode_frame(got)
                want = decode_frame(expected)
                self.assertEqual(answer.code, want.code, f"{request!r}: {answer.remark}")
                self.assertEqual(answer.ext_fields, want.ext_fields, repr(request))
                self.assertEqual(answer.remark, want.remark, repr(request))
                self.assertEqual(answer.body.decode(), want.body.decode(), repr(request))
                self.assertEqual(got.hex(), expected.hex(), repr(request))
                compared[(request.code, answer.code)] += 1
        finally:
            for conn in conns.values():
                await conn.close()
        return compared, barrier

    async def test_session_replay_is_byte_identical(self) -> None:
        compared, oneway = await self._replay()
        self.assertGreaterEqual(sum(compared.values()), 65)
        self.assertGreaterEqual(oneway, 6)
        # register, unregister, routes (found and not), cluster info, topic list, delete, data version
        for code in [(103, 0), (104, 0), (105, 0), (105, 17), (106, 0), (206, 0), (216, 0), (322, 0)]:
            self.assertIn(code, compared)


def _probe_frame(opaque: int) -> bytes:
    """A GET_ROUTEINFO_BY_TOPIC for a topic nobody serves (any cheap answered request will do)."""
    from rmqtx.remoting import RemotingCommand, encode_frame

    return encode_frame(RemotingCommand.request(105, {"topic": "__rmqtx_probe__"}, opaque=opaque))


assert FIXTURES.exists(), f"fixtures not found at {FIXTURES} (set RMQTX_FIXTURES)"
