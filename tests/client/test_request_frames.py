"""Requests our consumer and transaction producer send, recorded by a plain remoting server over
TCP and compared with the Java client's captured frames (ext field names, order and values)."""

from __future__ import annotations

import json

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from rmqtx.client.config import ClientConfig
from rmqtx.client.consumer import PushConsumer
from rmqtx.client.message import MessageExt, MessageQueue, SendResult, SendStatus, TransactionState
from rmqtx.client.mq_client import MQClientInstance
from rmqtx.client.offset_store import RemoteOffsetStore
from rmqtx.client.producer import TransactionProducer
from rmqtx.client.pull_api import pull
from rmqtx.client.route import TopicRoute
from rmqtx.client.subscription import SubscriptionData
from rmqtx.remoting import Dispatcher, RemotingServerFactory
from rmqtx.remoting.serializer import encode_frame
from rmqtx.store.record import encode_record
from tests.client.test_wire_format import captured, header_json


class RequestFramesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.seen: list = []
        dispatcher = Dispatcher()

        def record(request, conn):
            self.seen.append(request)
            if request.is_oneway:
                return None
            ext = {"offset": "0", "suggestWhichBrokerId": "0", "nextBeginOffset": "0", "minOffset": "0", "maxOffset": "0"}
            return request.make_response(19 if request.code == 11 else 0, ext_fields=ext, body=b'{"lockOKMQSet":[]}' if request.code == 41 else b"")

        for code in (11, 14, 15, 36, 37, 41, 42):
            dispatcher.register(code, record)
        self.port = reactor.listenTCP(0, RemotingServerFactory(dispatcher), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        addr = f"127.0.0.1:{self.port.getHost().port}"
        self.config = ClientConfig("127.0.0.1:1", instance_name="fix_consumer", client_ip="127.0.0.1")
        self.client = MQClientInstance(self.config)
        self.addCleanup(self.client.remoting.close)
        route = {"brokerDatas": [{"brokerAddrs": {"0": addr}, "brokerName": "broker-a", "cluster": "c"}],
                 "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}]}
        for topic in ("T_fix", "T_retry_fix", "T_tx_fix"):
            self.client.routes[topic] = TopicRoute.from_body(json.dumps(route).encode())

    def assert_like_java(self, code: int, capture: str, java_index: int = 0) -> None:
        java = captured(capture, code)[java_index]
        ours = next(r for r in self.seen if r.code == code)
        ours_header = header_json(encode_frame(ours))
        self.assertEqual(list(ours_header.get("extFields", {})), list(java["header"].get("extFields", {})), f"code {code}")
        self.assertEqual(ours_header["flag"], java["header"]["flag"], f"flag of code {code}")

    @defer.inlineCallbacks
    def test_consumer_and_transaction_requests(self):
        yield defer.ensureDeferred(self._requests())

    async def _requests(self) -> None:
        mq = MessageQueue("T_fix", "broker-a", 0)
        consumer = PushConsumer("C_fix", config=self.config, listener=lambda msgs, ctx: None)
        consumer.client = self.client
        await pull(self.client, "C_fix", mq, SubscriptionData.build("T_fix", "TagA || TagB"), 4, 32, commit_offset=4,
                   suspend=True, send_subscription=False, suspend_timeout=15, timeout=3, sub_version=1)
        stored = encode_record(0, 0, 0, 0, 2506, 1, ("127.0.0.1", 1), 2, ("127.0.0.1", 20911), 0, 0, b"body", "T_retry_fix",
                               "UNIQ_KEY\x01FD00\x02TAGS\x01TagA")
        await consumer.send_back(MessageExt.from_stored(stored, broker_name="broker-a"))
        await consumer._lock_request("broker-a", [mq], 41)
        await consumer._lock_request("broker-a", [mq], 42)
        offsets = RemoteOffsetStore(self.client, "C_fix")
        await offsets.read_store(mq)
        await offsets.persist([mq])
        producer = TransactionProducer("P_tx_fix", config=self.config, execute=lambda m, a: None, check=lambda m: None)
        producer.client = self.client
        sent = SendResult(SendStatus.SEND_OK, "FD00", "7F000001000051AF0000000000000DA2", MessageQueue("T_tx_fix", "broker-a", 0), 0)
        await producer._end_transaction(sent, TransactionState.UNKNOW, None)
        await task.deferLater(reactor, 0.2, lambda: None)

        self.assert_like_java(11, "scenario-push-consumer.jsonl", 5)  # a pull with the commit flag
        self.assert_like_java(14, "scenario-push-consumer.jsonl")
        self.assert_like_java(15, "scenario-push-consumer.jsonl")
        self.assert_like_java(36, "scenario-retry.jsonl")
        self.assert_like_java(37, "scenario-transaction.jsonl")
        self.assert_like_java(41, "scenario-orderly-consumer.jsonl")
        self.assert_like_java(42, "scenario-orderly-consumer.jsonl")
        lock = next(r for r in self.seen if r.code == 41)
        self.assertEqual(sorted(json.loads(lock.body)), ["clientId", "consumerGroup", "mqSet"])
        pull_request = next(r for r in self.seen if r.code == 11)
        self.assertEqual(pull_request.field("sysFlag"), "3")
        end = next(r for r in self.seen if r.code == 37)
        self.assertEqual((end.field("commitLogOffset"), end.field("commitOrRollback")), ("3490", "0"))
