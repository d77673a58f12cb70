"""A RocketMQ client on Twisted that speaks exactly as the Java 4.9 client does."""

from rmqtx.client.config import ClientConfig
from rmqtx.client.consumer import ConsumeContext, ConsumeStatus, OrderlyStatus, PullConsumer, PushConsumer
from rmqtx.client.errors import MQBrokerError, MQClientError, MQError
from rmqtx.client.pop import PopConsumer
from rmqtx.client.message import Message, MessageExt, MessageQueue, PullResult, PullStatus, SendResult, SendStatus, TransactionState
from rmqtx.client.producer import Producer, TransactionProducer
from rmqtx.client.request_reply import RequestTimeoutError, create_reply_message

__all__ = [
    "ClientConfig",
    "ConsumeContext",
    "ConsumeStatus",
    "MQBrokerError",
    "MQClientError",
    "MQError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "OrderlyStatus",
    "PopConsumer",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RequestTimeoutError",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionState",
    "create_reply_message",
]
