"""NOTIFY_CONSUMER_IDS_CHANGED: when the broker tells a consumer group to rebalance.

The broker writes the notice to a member's connection before it answers that member's own
heartbeat, so after a heartbeat's answer the notices it caused for that member have arrived.
"""

from __future__ import annotations

import json
import time

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.protocol import Dispatcher
from tests.broker.inprocess import InProcessCluster


class Member:
    """A raw consumer connection that counts the notices it is sent."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.notices: list[str] = []
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._notice)
        self.client = RemotingClient(dispatcher=dispatcher)

    def _notice(self, request: RemotingCommand, conn) -> None:
        self.notices.append(request.field("consumerGroup") or "")

    async def heartbeat(self, addr: str, group: str, topics: list[str]) -> None:
        subs = [{"topic": t, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1, "expressionType": "TAG",
                 "classFilterMode": False} for t in topics]
        body = {"clientID": self.client_id, "producerDataSet": [], "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": subs, "unitMode": False}]}
        resp = await self.client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, json.dumps(body).encode()))
        assert resp.code == ResponseCode.SUCCESS, resp.remark


class GroupNotifyTest(unittest.TestCase):
    timeout = 30

    def setUp(self) -> None:
        self.cluster = InProcessCluster()
        self.cluster.start()
        self.a, self.b = Member("127.0.0.1@a"), Member("127.0.0.1@b")

    async def _down(self) -> None:
        await self.a.client.close()
        await self.b.client.close()
        await self.cluster.stop()

    def tearDown(self) -> defer.Deferred:
        return defer.ensureDeferred(self._down())

    @defer.inlineCallbacks
    def test_members_and_subscribed_topics_changing_notify_the_group(self):
        yield defer.ensureDeferred(self._notify())

    async def _notify(self) -> None:
        addr, group = self.cluster.broker_addr, "G_notify"
        await self.a.heartbeat(addr, group, ["T1"])
        self.assertEqual(self.a.notices, [group])  # a new member: the whole group, itself included
        await self.b.heartbeat(addr, group, ["T1"])
        self.assertEqual(len(self.b.notices), 1)
        deadline = time.monotonic() + 5
        while len(self.a.notices) < 2 and time.monotonic() < deadline:
            await task.deferLater(reactor, 0.02, lambda: None)
        self.assertEqual(len(self.a.notices), 2, "the first member was not told that a second one joined")
        await self.a.heartbeat(addr, group, ["T1"])  # nothing changed: no notice
        self.assertEqual(len(self.a.notices), 2)
        await self.a.heartbeat(addr, group, ["T1", "T2"])  # a topic joins the group's subscriptions
        self.assertEqual(len(self.a.notices), 3)
        await self.a.heartbeat(addr, group, ["T1", "T2"])
        self.assertEqual(len(self.a.notices), 3)
        await self.a.heartbeat(addr, group, ["T2"])  # and one leaves
        self.assertEqual(len(self.a.notices), 4)
