"""Requests our producer builds and heartbeat bodies against the Java client's captured frames.

SEND_MESSAGE_V2 headers: field names, order and values; heartbeats: the whole body (subVersion aside).
The batch body is checked by driving the producer over TCP (tests/client/test_request_frames.py).
"""

from __future__ import annotations

import json
import re

from twisted.trial import unittest

from rmqtx.client.config import ClientConfig
from rmqtx.client.consumer import CONSUME_FROM_FIRST_OFFSET, ConsumeStatus, PushConsumer
from rmqtx.client.message import Message, MessageQueue
from rmqtx.client.mq_client import MQClientInstance
from rmqtx.client.producer import Producer
from rmqtx.common.message import parse_properties
from rmqtx.remoting.serializer import encode_frame
from tests.fixtures import records

_SET_BY_CONSTRUCTOR = {"TAGS", "KEYS", "WAIT", "UNIQ_KEY", "DELAY", "TRAN_MSG", "PGROUP"}


def captured(name: str, code: int, direction: str = "c2s") -> list[dict]:
    """Decoded frames of one request code from a capture."""
    return [r["decoded"] for r in records(name) if r.get("decoded", {}).get("code") == code and r.get("dir") == direction
            and r["decoded"].get("rpc") in ("request", "oneway")]


def header_json(frame: bytes) -> dict:
    """The JSON header of an encoded frame, key order kept."""
    header_len = int.from_bytes(frame[4:8], "big") & 0xFFFFFF
    return json.loads(frame[8 : 8 + header_len])


def message_like(topic: str, props: dict[str, str]) -> Message:
    """The Message the Java harness built for a captured send (tags, keys, user properties, delay)."""
    user = {k: v for k, v in props.items() if k not in _SET_BY_CONSTRUCTOR}
    msg = Message(topic, b"x", tags=props.get("TAGS"), keys=props.get("KEYS", "").split() or None, properties=user,
                  delay_level=int(props.get("DELAY", "0")))
    for name in ("TRAN_MSG", "PGROUP"):
        if name in props:
            msg.properties[name] = props[name]
    return msg


class SendHeaderTest(unittest.TestCase):
    def test_send_message_v2_header_matches_java(self):
        producer = Producer("P_fix", config=ClientConfig("127.0.0.1:1", instance_name="fix_producer", client_ip="127.0.0.1"))
        frames = captured("scenario-producer-send.jsonl", 310) + captured("scenario-transaction.jsonl", 310)
        self.assertGreaterEqual(len(frames), 8)
        for frame in frames:
            java = frame["header"]["extFields"]
            props = parse_properties(java["i"])
            msg = message_like(java["b"], props)
            producer.group = java["a"]
            ours_cmd = producer.build_request(msg, MessageQueue(java["b"], java["n"], int(java["e"])))
            ours_header = header_json(encode_frame(ours_cmd))
            ours = ours_header["extFields"]
            self.assertEqual(list(ours), list(java), "ext field names or order differ")
            for key in java:
                if key not in ("g", "i"):  # born timestamp and properties (UNIQ_KEY) differ per send
                    self.assertEqual(ours[key], java[key], f"field {key}")
            self.assertEqual(list(parse_properties(ours["i"])), list(props), "property order differs")
            self.assertEqual(len(ours_cmd.field("i").split("UNIQ_KEY\x01")[1][:32]), 32)
            self.assertEqual(ours_header["code"], frame["header"]["code"])
            self.assertEqual(ours_header["language"], "JAVA")


class HeartbeatBodyTest(unittest.TestCase):
    def shape(self, value):
        """Keys and value types, recursively; list items by the shape of their first item."""
        if isinstance(value, dict):
            return {k: self.shape(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.shape(value[0])] if value else []
        return type(value).__name__

    def test_consumer_heartbeat_matches_java(self):
        java_text = captured("scenario-push-consumer.jsonl", 34)[0]["body_text"]
        java = json.loads(java_text)
        config = ClientConfig("127.0.0.1:1", instance_name="fix_consumer", client_ip="127.0.0.1")
        client = MQClientInstance(config)
        consumer = PushConsumer("C_fix", config=config, listener=lambda m, c: ConsumeStatus.CONSUME_SUCCESS,
                                consume_from=CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("%RETRY%C_fix", "*")
        consumer.subscribe("T_fix", "TagA || TagB")
        client.register_consumer("C_fix", consumer)
        ours_text = client.heartbeat_body().decode()
        ours = json.loads(ours_text)
        self.assertEqual(list(ours), list(java))
        self.assertEqual(self.shape(ours), self.shape(java))
        for data in (ours, java):
            for sub in data["consumerDataSet"][0]["subscriptionDataSet"]:
                sub["subVersion"] = 0
        self.assertEqual(ours, java)
        # and byte for byte, the subscription versions (the client's clock at subscribe) aside
        version = re.compile(r'"subVersion":\d+')
        self.assertEqual(version.sub('"subVersion":0', ours_text), version.sub('"subVersion":0', java_text))

    def test_producer_heartbeat_matches_java(self):
        java = json.loads(captured("scenario-producer-send.jsonl", 34)[0]["body_text"])
        client = MQClientInstance(ClientConfig("127.0.0.1:1", instance_name="fix_producer", client_ip="127.0.0.1"))
        client.register_producer("P_fix", Producer("P_fix", "127.0.0.1:1"))
        ours = json.loads(client.heartbeat_body())
        self.assertEqual(list(ours), list(java))
        self.assertEqual(ours["clientID"], java["clientID"])
        self.assertEqual(ours["consumerDataSet"], [])
        # Java's producerDataSet is a HashSet of beans without hashCode(): its order is the JVM's identity hashes
        self.assertEqual(sorted(ours["producerDataSet"], key=str), sorted(java["producerDataSet"], key=str))
