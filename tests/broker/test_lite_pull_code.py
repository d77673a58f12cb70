"""LITE_PULL_MESSAGE (361), which the 5.x lite pull consumer sends instead of PULL_MESSAGE and never falls back from."""

from __future__ import annotations

from twisted.internet import defer

from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.headers import PullMessageRequestHeader
from tests.broker.wire import decode_records, send
from tests.client.support import ClusterTestCase

TOPIC = "T_lite_pull_code"
#: What DefaultLitePullConsumer 5.3 sends: suspend, subscription and the lite pull bit (0x10).
LITE_SYS_FLAG = 0x2 | 0x4 | 0x10


def pull_request(code: int, offset: int = 0) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumerGroup="G_lite", topic=TOPIC, queueId=0, queueOffset=offset, maxMsgNums=10, sysFlag=LITE_SYS_FLAG,
        commitOffset=0, suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG",
    )
    cmd = header.apply_to(RemotingCommand(code))
    cmd.ext_fields["bname"] = "broker-a"  # 5.x adds the broker name to every request header
    return cmd


class LitePullCodeTest(ClusterTestCase):
    def setUp(self):
        super().setUp()
        self.client = RemotingClient()
        self.addCleanup(lambda: defer.ensureDeferred(self.client.close()))

    async def _send_three(self) -> None:
        for i in range(3):
            resp = await send(self.client, self.cluster.broker_addr, TOPIC, f"lite-{i}".encode())
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)

    async def _answers_like_pull(self) -> None:
        await self._send_three()
        lite = await self.client.invoke(self.cluster.broker_addr, pull_request(RequestCode.LITE_PULL_MESSAGE))
        plain = await self.client.invoke(self.cluster.broker_addr, pull_request(RequestCode.PULL_MESSAGE))
        self.assertEqual(lite.code, ResponseCode.SUCCESS, lite.remark)
        self.assertEqual([r.body for r in decode_records(lite.body)], [b"lite-0", b"lite-1", b"lite-2"])
        self.assertEqual(lite.ext_fields, plain.ext_fields)
        later = await self.client.invoke(self.cluster.broker_addr, pull_request(RequestCode.LITE_PULL_MESSAGE, offset=3))
        self.assertEqual(later.code, ResponseCode.PULL_NOT_FOUND)

    def test_lite_pull_answers_like_pull(self):
        return defer.ensureDeferred(self._answers_like_pull())


class LitePullDisabledTest(ClusterTestCase):
    broker_conf = {"litePullMessageEnable": "false"}

    def setUp(self):
        super().setUp()
        self.client = RemotingClient()
        self.addCleanup(lambda: defer.ensureDeferred(self.client.close()))

    async def _refused(self) -> None:
        resp = await send(self.client, self.cluster.broker_addr, TOPIC, b"only")
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        lite = await self.client.invoke(self.cluster.broker_addr, pull_request(RequestCode.LITE_PULL_MESSAGE))
        self.assertEqual(lite.code, ResponseCode.NO_PERMISSION)
        self.assertIn("for lite pull consumer is forbidden", lite.remark)
        plain = await self.client.invoke(self.cluster.broker_addr, pull_request(RequestCode.PULL_MESSAGE))
        self.assertEqual(plain.code, ResponseCode.SUCCESS, plain.remark)

    def test_lite_pull_refused_when_disabled(self):
        return defer.ensureDeferred(self._refused())
