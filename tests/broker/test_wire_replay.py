"""Replay the Java client's captured frames to rmqtx's broker; compare with the Java broker's answers."""

from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.remoting import RemotingClient
from rmqtx.remoting.serializer import decode_frame
from tests.broker.inprocess import InProcessCluster
from tests.fixtures import records

REPLAYED = {10, 310, 320, 34, 35, 38, 14, 30, 31}


def broker_exchanges(name: str):
    """(request, Java's response or None) for the client->broker frames of one capture."""
    requests = {}
    pairs = []
    for rec in records(name):
        if rec.get("peer") != "broker" or "hex" not in rec:
            continue
        cmd = decode_frame(bytes.fromhex(rec["hex"]))
        key = (rec["conn"], cmd.opaque)
        if rec["dir"] == "c2s" and not cmd.is_response:
            requests[key] = len(pairs)
            pairs.append([cmd, None])
        elif rec["dir"] == "s2c" and cmd.is_response and key in requests:
            pairs[requests.pop(key)][1] = cmd
    return pairs


class ProducerReplayTest(unittest.TestCase):
    def setUp(self):
        self.cluster = InProcessCluster(defaultTopicQueueNums="8")
        self.cluster.start()
        self.client = RemotingClient()

    async def _down(self):
        await self.client.close()
        await self.cluster.stop()

    def tearDown(self):
        return defer.ensureDeferred(self._down())

    @defer.inlineCallbacks
    def _replay(self, name: str):
        compared = 0
        for request, java in broker_exchanges(name):
            if request.code not in REPLAYED:
                continue
            if request.is_oneway:
                yield self.client.invoke_oneway(self.cluster.broker_addr, request)
                continue
            ours = yield self.client.invoke(self.cluster.broker_addr, request, timeout=5)
            if java is None:
                continue
            where = f"{name} code {request.code} opaque {request.opaque}"
            self.assertEqual(ours.code, java.code, f"{where}: {ours.remark}")
            self.assertEqual(ours.remark, java.remark, where)
            self.assertEqual(list(ours.ext_fields or {}), list(java.ext_fields or {}), where)
            self.assertEqual(ours.serialize_type, java.serialize_type, where)
            for key in ("queueId", "queueOffset", "offset", "MSG_REGION", "TRACE_ON"):
                if key in (java.ext_fields or {}):
                    self.assertEqual(ours.ext_fields[key], java.ext_fields[key], f"{where} {key}")
            if "msgId" in (java.ext_fields or {}):
                # offset message ids: host and port differ, the commit log offsets must not
                ours_offsets = [m[-16:] for m in ours.ext_fields["msgId"].split(",")]
                java_offsets = [m[-16:] for m in java.ext_fields["msgId"].split(",")]
                self.assertEqual(ours_offsets, java_offsets, where)
            if request.code == 38:
                self.assertEqual(ours.body, java.body, where)
            compared += 1
        return compared

    @defer.inlineCallbacks
    def test_producer_send_capture(self):
        compared = yield self._replay("scenario-producer-send.jsonl")
        self.assertGreaterEqual(compared, 6)
