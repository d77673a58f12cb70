"""RocketMQ's remoting protocol: codes, RemotingCommand, header codecs, Twisted server and client."""

from rmqtx.remoting.client import RemotingClient, split_addr
from rmqtx.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.header import CommandHeader, HeaderError
from rmqtx.remoting.protocol import (
    ConnectionClosedError,
    Dispatcher,
    RemotingCommandError,
    RemotingError,
    RemotingProtocol,
    RemotingServerFactory,
    RemotingTimeoutError,
)
from rmqtx.remoting.serializer import FrameError, decode_frame, encode_frame

__all__ = [
    "CommandHeader",
    "ConnectionClosedError",
    "Dispatcher",
    "FrameError",
    "HeaderError",
    "LanguageCode",
    "RemotingClient",
    "RemotingCommand",
    "RemotingCommandError",
    "RemotingError",
    "RemotingProtocol",
    "RemotingServerFactory",
    "RemotingTimeoutError",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_frame",
    "encode_frame",
    "split_addr",
]
