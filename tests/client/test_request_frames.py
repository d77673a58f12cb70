"""Requests our consumer and transaction producer send, recorded by a plain remoting server over
TCP and compared with the Java client's captured frames (ext field names, order and values)."""

from __future__ import annotations

import json

from twisted.internet import defer, reactor
from twisted.trial import unittest

from rmqtx.client.config import ClientConfig
from rmqtx.client.consumer import PushConsumer
from rmqtx.client.message import MessageExt, MessageQueue, SendResult, SendStatus, TransactionState
from rmqtx.client.mq_client import MQClientInstance
from rmqtx.client.offset_store import RemoteOffsetStore
from rmqtx.client.producer import Producer, TransactionProducer
from rmqtx.client.pull_api import pull
from rmqtx.client.route import TopicRoute
from rmqtx.common.subscription import SubscriptionData
from rmqtx.remoting import Dispatcher, RemotingServerFactory
from rmqtx.remoting.serializer import decode_frame, encode_frame
from rmqtx.store.record import encode_record
from tests.client.support import wait_until
from tests.client.test_wire_format import captured, header_json, message_like
from tests.fixtures import records


#: Request values that differ from the captured Java client's, with why.
VARIES: dict[tuple[int, str], str] = {}
#: Bodies not compared, with why.
BODY_VARIES: dict[int, str] = {}


class RecordingBrokerCase(unittest.TestCase):
    """A plain remoting server that records every request and answers like a broker with nothing in it."""

    def setUp(self) -> None:
        self.seen: list = []
        dispatcher = Dispatcher()

        def record(request, conn):
            self.seen.append(request)
            if request.is_oneway:
                return None
            ext = {"offset": "0", "suggestWhichBrokerId": "0", "nextBeginOffset": "0", "minOffset": "0", "maxOffset": "0"}
            return request.make_response(19 if request.code == 11 else 0, ext_fields=ext, body=b'{"lockOKMQSet":[]}' if request.code == 41 else b"")

        for code in (11, 14, 15, 36, 37, 41, 42, 320):
            dispatcher.register(code, record)
        self.port = reactor.listenTCP(0, RemotingServerFactory(dispatcher), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        addr = f"127.0.0.1:{self.port.getHost().port}"
        self.config = ClientConfig("127.0.0.1:1", instance_name="fix_consumer", client_ip="127.0.0.1")
        self.client = MQClientInstance(self.config)
        self.addCleanup(self.client.remoting.close)
        self.orderly_config = ClientConfig("127.0.0.1:1", instance_name="fix_orderly", client_ip="127.0.0.1")
        self.orderly_client = MQClientInstance(self.orderly_config)
        self.addCleanup(self.orderly_client.remoting.close)
        route = {"brokerDatas": [{"brokerAddrs": {"0": addr}, "brokerName": "broker-a", "cluster": "c"}],
                 "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}]}
        for topic in ("T_fix", "T_retry_fix", "T_tx_fix", "%RETRY%C_order_fix"):
            for client in (self.client, self.orderly_client):
                client.routes[topic] = TopicRoute.from_body(json.dumps(route).encode())

class RequestFramesTest(RecordingBrokerCase):
    def assert_like_java(self, code: int, capture: str, java_index: int = 0) -> None:
        """Same ext field names in the same order with the same values (but VARIES), same flag and body."""
        java = captured(capture, code)[java_index]
        ours = next(r for r in self.seen if r.code == code)
        ours_header = header_json(encode_frame(ours))
        ours_ext, java_ext = ours_header.get("extFields", {}), java["header"].get("extFields", {})
        self.assertEqual(list(ours_ext), list(java_ext), f"code {code}")
        for key, value in java_ext.items():
            if (code, key) not in VARIES:
                self.assertEqual(ours_ext[key], value, f"code {code} field {key}")
        self.assertEqual(ours_header["flag"], java["header"]["flag"], f"flag of code {code}")
        if code not in BODY_VARIES:
            self.assertEqual(ours.body.decode(), java.get("body_text", ""), f"body of code {code}")

    @defer.inlineCallbacks
    def test_consumer_and_transaction_requests(self):
        yield defer.ensureDeferred(self._requests())

    async def _requests(self) -> None:
        """Each request driven with the inputs the Java harness had (groups, offsets, ids), so values compare."""
        mq = MessageQueue("T_fix", "broker-a", 0)
        consumer = PushConsumer("C_fix", config=self.config, listener=lambda msgs, ctx: None)
        consumer.client = self.client
        await pull(self.client, "C_fix", mq, SubscriptionData.build("T_fix", "TagA || TagB"), 4, 32, commit_offset=4,
                   suspend=True, send_subscription=False, suspend_timeout=15, timeout=3, sub_version=1795264465323)
        retry = PushConsumer("C_retry_fix", config=self.config, listener=lambda msgs, ctx: None)
        retry.client = self.client
        stored = encode_record(0, 0, 0, 0, 2506, 1, ("127.0.0.1", 1), 2, ("127.0.0.1", 20911), 0, 0, b"body", "T_retry_fix",
                               "UNIQ_KEY\x01FD0000000000000000000000000000025A125FFD2B2769B25BB70000\x02TAGS\x01TagA")
        await retry.send_back(MessageExt.from_stored(stored, broker_name="broker-a"))
        orderly = PushConsumer("C_order_fix", config=self.orderly_config, listener=lambda msgs, ctx: None)
        orderly.client = self.orderly_client
        await orderly._lock_request("broker-a", [mq], 41)
        all_queues = [MessageQueue("%RETRY%C_order_fix", "broker-a", 0), MessageQueue("T_fix", "broker-a", 1), mq]
        await orderly._lock_request("broker-a", all_queues, 42)
        offsets = RemoteOffsetStore(self.client, "C_fix")
        await offsets.read_store(mq)
        offsets.update(mq, 4)
        await offsets.persist([mq])
        producer = TransactionProducer("P_tx_fix", config=self.config, execute=lambda m, a: None, check=lambda m: None)
        producer.client = self.client
        sent = SendResult(SendStatus.SEND_OK, "FD0000000000000000000000000000025AE05FFD2B2769B2A1220000",
                          "7F000001000051AF0000000000000DA2", MessageQueue("T_tx_fix", "broker-a", 0), 0)
        await producer._end_transaction(sent, TransactionState.UNKNOW, None)
        await wait_until(lambda: any(r.code == 37 for r in self.seen), timeout=5)  # oneway: no answer to wait for

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


class BatchSendTest(RecordingBrokerCase):
    """SEND_BATCH_MESSAGE as our producer sends it over TCP, against the Java client's captured frame."""

    @defer.inlineCallbacks
    def test_batch_send_matches_java(self):
        yield defer.ensureDeferred(self._batch())

    async def _batch(self) -> None:
        name = "scenario-producer-send.jsonl"
        [rec] = [r for r in records(name) if r.get("dir") == "c2s" and r.get("decoded", {}).get("code") == 320]
        java = decode_frame(bytes.fromhex(rec["hex"]))
        items = rec["decoded"]["body_batch"]
        msgs = [message_like("T_fix", item["properties"]) for item in items]
        for msg, item in zip(msgs, items):
            msg.body = item["body_text"].encode()
            msg.properties["UNIQ_KEY"] = item["properties"]["UNIQ_KEY"]  # the ids Java's client made
        producer = Producer("P_fix", config=ClientConfig("127.0.0.1:1", instance_name="fix_producer", client_ip="127.0.0.1"))
        producer.client = self.client
        await producer.send_batch(msgs, queue=MessageQueue("T_fix", "broker-a", int(java.field("e"))))
        ours = next(r for r in self.seen if r.code == 320)
        self.assertEqual(ours.body, java.body)  # every message's flag, body and properties, byte for byte
        self.assertEqual(list(ours.ext_fields), list(java.ext_fields))
        for key, value in java.ext_fields.items():
            if key != "g":  # born timestamp: the client's clock when it sent
                self.assertEqual(ours.ext_fields[key], value, f"field {key}")
        self.assertEqual((ours.flag, ours.language, ours.version), (java.flag, java.language, java.version))
