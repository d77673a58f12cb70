"""SEND_REPLY_MESSAGE (324/325) and the broker's PUSH_REPLY_MESSAGE_TO_CLIENT (326): a real broker over TCP."""

from __future__ import annotations

import time
import zlib

import orjson
from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.common.message import parse_properties, properties_to_string
from rmqtx.remoting import Dispatcher, RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqtx.remoting.headers import SendMessageRequestHeader, send_header_to_v2
from rmqtx.store.record import decode_offset_msg_id, decode_record
from tests.broker.inprocess import InProcessCluster

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
REQUESTER = "127.0.0.1@requester"


class Requester:
    """A client connection that registered as a producer and answers pushed replies with ``code``."""

    def __init__(self, code: int = ResponseCode.SUCCESS) -> None:
        self.pushed: list[RemotingCommand] = []
        self.code = code
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_push)
        self.client = RemotingClient(dispatcher=dispatcher)

    def _on_push(self, request: RemotingCommand, conn) -> RemotingCommand:
        self.pushed.append(request)
        return request.make_response(self.code, None if self.code == ResponseCode.SUCCESS else "nope")

    async def register(self, addr: str) -> None:
        body = orjson.dumps({"clientID": REQUESTER, "consumerDataSet": [], "producerDataSet": [{"groupName": "P_requester"}]})
        resp = await self.client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
        assert resp.code == ResponseCode.SUCCESS, resp.remark


def reply_request(code: int, props: dict[str, str], body: bytes = b"pong", topic: str = REPLY_TOPIC, **fields) -> RemotingCommand:
    values = dict(
        producerGroup="P_replier", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=0, sysFlag=0,
        bornTimestamp=int(time.time() * 1000), flag=0, properties=properties_to_string(props), reconsumeTimes=0,
        unitMode=False, batch=False,
    )
    values.update(fields)
    header = SendMessageRequestHeader(**values)
    if code == RequestCode.SEND_REPLY_MESSAGE_V2:
        fields, order = send_header_to_v2(header)
        return RemotingCommand(code, ext_fields=fields, body=body, fast_keys=order)
    return header.apply_to(RemotingCommand(code, body=body))


def reply_props(to: str | None = REQUESTER) -> dict[str, str]:
    props = {"MSG_TYPE": "reply", "CORRELATION_ID": "c0ffee", "TTL": "3000", "UNIQ_KEY": "AB12"}
    if to is not None:
        props["REPLY_TO_CLIENT"] = to
    return props


class ReplyTest(unittest.TestCase):
    timeout = 30
    broker_conf: dict[str, str] = {}

    def setUp(self):
        self.cluster = InProcessCluster(brokerClusterName="DefaultCluster", **self.broker_conf)
        self.cluster.start()
        self.addr = self.cluster.broker_addr
        self.replier = RemotingClient()
        self.requester = Requester()

    async def _down(self):
        await self.replier.close()
        await self.requester.client.close()
        await self.cluster.stop()

    def tearDown(self):
        return defer.ensureDeferred(self._down())

    def stored(self) -> list:
        store = self.cluster.broker.ctx.store
        got = store.get_message(REPLY_TOPIC, 0, 0, 32)
        return [decode_record(raw) for raw in got.messages]

    async def _pushed_and_stored(self) -> None:
        await self.requester.register(self.addr)
        props = reply_props()
        resp = await self.replier.invoke(self.addr, reply_request(RequestCode.SEND_REPLY_MESSAGE_V2, props))
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        self.assertIsNone(resp.remark)
        (push,) = self.requester.pushed
        self.assertEqual(push.code, RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT)
        ext = push.ext_fields
        self.assertEqual(set(ext), {"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                                    "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "bornHost",
                                    "storeHost", "storeTimestamp"})
        self.assertEqual((ext["producerGroup"], ext["topic"], ext["queueId"], ext["unitMode"]), ("P_replier", REPLY_TOPIC, "0", "false"))
        self.assertEqual(ext["storeHost"], self.addr)
        self.assertTrue(ext["bornHost"].startswith("127.0.0.1:"))
        pushed_props = parse_properties(ext["properties"])
        self.assertLessEqual(abs(int(pushed_props.pop("PUSH_REPLY_TIME")) - time.time() * 1000), 5000)
        self.assertEqual(pushed_props, props)
        self.assertEqual(push.body, b"pong")
        # stored as the replier sent it, and the answer names the stored copy
        (rec,) = self.stored()
        self.assertEqual(rec.properties, properties_to_string(props))
        self.assertEqual(rec.body, b"pong")
        self.assertEqual(decode_offset_msg_id(resp.ext_fields["msgId"])[2], rec.physical_offset)
        self.assertEqual((resp.ext_fields["queueId"], resp.ext_fields["queueOffset"]), ("0", "0"))
        self.assertEqual((resp.ext_fields["MSG_REGION"], resp.ext_fields["TRACE_ON"]), ("DefaultRegion", "true"))

    def test_v2_reply_is_pushed_to_the_requester_and_stored(self):
        return defer.ensureDeferred(self._pushed_and_stored())

    async def _header_copied(self) -> None:
        await self.requester.register(self.addr)
        body = zlib.compress(b"pong" * 100)
        born = int(time.time() * 1000) - 1234
        request = reply_request(RequestCode.SEND_REPLY_MESSAGE, reply_props(), body, queueId=0, sysFlag=1, flag=7,
                                reconsumeTimes=3, bornTimestamp=born, defaultTopicQueueNums=8)
        before = int(time.time() * 1000)
        resp = await self.replier.invoke(self.addr, request)
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        (push,) = self.requester.pushed
        ext = push.ext_fields
        # As Apache's broker (4.9.8 and 5.3.3 alike): the replier's header fields as it sent them, the body
        # as it came (still compressed: the client inflates it by sysFlag), the push's own store time.
        want = {"producerGroup": "P_replier", "topic": REPLY_TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": "8",
                "queueId": "0", "sysFlag": "1", "bornTimestamp": str(born), "flag": "7", "reconsumeTimes": "3", "unitMode": "false"}
        self.assertEqual({k: ext[k] for k in want}, want)
        self.assertEqual(push.body, body)
        self.assertLessEqual(before, int(ext["storeTimestamp"]))
        self.assertLessEqual(int(ext["storeTimestamp"]), int(time.time() * 1000))
        self.assertEqual(parse_properties(ext["properties"])["CORRELATION_ID"], "c0ffee")

    def test_push_carries_the_repliers_header_and_raw_body(self):
        return defer.ensureDeferred(self._header_copied())

    async def _gone(self) -> None:
        resp = await self.replier.invoke(self.addr, reply_request(RequestCode.SEND_REPLY_MESSAGE, reply_props("127.0.0.1@gone")))
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertEqual(resp.remark, "push reply message fail, channel of <127.0.0.1@gone> not found.")
        self.assertEqual(len(self.stored()), 1)  # still stored, and the answer says where
        self.assertEqual(resp.ext_fields["queueOffset"], "0")
        resp = await self.replier.invoke(self.addr, reply_request(RequestCode.SEND_REPLY_MESSAGE, reply_props(None)))
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertEqual(resp.remark, "reply message properties[REPLY_TO_CLIENT] is null")

    def test_requester_gone_or_unnamed(self):
        return defer.ensureDeferred(self._gone())

    async def _refused(self) -> None:
        self.requester.code = ResponseCode.SYSTEM_ERROR
        await self.requester.register(self.addr)
        resp = await self.replier.invoke(self.addr, reply_request(RequestCode.SEND_REPLY_MESSAGE_V2, reply_props()))
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertEqual(resp.remark, f"push reply message to {REQUESTER}fail.")
        self.assertEqual(len(self.requester.pushed), 1)

    def test_requester_refuses_the_push(self):
        return defer.ensureDeferred(self._refused())

    async def _malformed(self) -> None:
        for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
            resp = await self.replier.invoke(self.addr, RemotingCommand.request(code, {"b": "x"}))
            self.assertNotEqual(resp.code, ResponseCode.SUCCESS)
        resp = await self.replier.invoke(self.addr, reply_request(RequestCode.SEND_REPLY_MESSAGE_V2, reply_props(), topic="bad topic!"))
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertIn("illegal characters", resp.remark)
        self.assertEqual(dict(resp.ext_fields), {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
        self.assertEqual(self.requester.pushed, [])

    def test_malformed_requests_are_answered(self):
        return defer.ensureDeferred(self._malformed())

    async def _route(self) -> None:
        route = await self.replier.invoke(self.cluster.namesrv_addr, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": REPLY_TOPIC}))
        self.assertEqual(route.code, ResponseCode.SUCCESS, route.remark)

    def test_reply_topic_is_registered(self):
        return defer.ensureDeferred(self._route())


class ReplyNotStoredTest(ReplyTest):
    broker_conf = {"storeReplyMessageEnable": "false"}

    async def _pushed_only(self) -> None:
        await self.requester.register(self.addr)
        resp = await self.replier.invoke(self.addr, reply_request(RequestCode.SEND_REPLY_MESSAGE, reply_props()))
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        self.assertEqual((resp.ext_fields["msgId"], resp.ext_fields["queueId"], resp.ext_fields["queueOffset"]), ("0", "0", "0"))
        self.assertEqual(len(self.requester.pushed), 1)
        self.assertEqual(self.stored(), [])

    def test_v2_reply_is_pushed_to_the_requester_and_stored(self):
        return defer.ensureDeferred(self._pushed_only())

    async def _gone(self) -> None:
        resp = await self.replier.invoke(self.addr, reply_request(RequestCode.SEND_REPLY_MESSAGE, reply_props("127.0.0.1@gone")))
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertEqual(dict(resp.ext_fields), {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
        self.assertEqual(self.stored(), [])

    def test_requester_gone_or_unnamed(self):
        return defer.ensureDeferred(self._gone())
