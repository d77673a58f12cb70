"""A broker that stores nothing and answers every send at once: the ceiling row of ``vs_java.py --ceiling``.

    python benchmarks/answer_only.py --namesrv-port N --port P --kv-config-path F [--topic T] [--queues 8]

One process runs rmqtx's NameServer and, beside it, a listener that speaks just enough of the
broker's protocol for Apache's benchmark Producer. Every SEND_MESSAGE or SEND_MESSAGE_V2 is answered
SEND_OK at once and written nowhere; GET_MAX_OFFSET of queue 0 says how many were answered (the other
queues say 0); any other request is answered SUCCESS without a body. The listener registers itself
with the NameServer as ``broker-a`` holding the topic, as a broker does.

The listener is built as rmqtx's broker is: Python on Twisted's reactor, a read's answers written
together. The rate the Producer reaches against it is therefore the most a broker built that way can
get from this machine, whatever work it leaves out: a send-rate ratio above (that rate / Java's rate)
is out of rmqtx's reach here. A listener in a compiled language would cost less and set a higher
bound. The listener's own CPU per answer is in vs_java's table beside it.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

from twisted.internet import protocol, reactor, task
from twisted.python import log

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqtx.common.topic_config import TopicConfig  # noqa: E402
from rmqtx.namesrv.config import NamesrvConfig  # noqa: E402
from rmqtx.namesrv.register_body import DataVersion, RegisterBrokerBody  # noqa: E402
from rmqtx.namesrv.service import NamesrvService  # noqa: E402
from rmqtx.remoting.client import RemotingClient  # noqa: E402
from rmqtx.remoting.codes import ONEWAY_FLAG, RequestCode, ResponseCode, SerializeType  # noqa: E402
from rmqtx.remoting.command import RemotingCommand  # noqa: E402
from rmqtx.remoting.headers import RegisterBrokerRequestHeader  # noqa: E402
from rmqtx.remoting.send_now import send_now  # noqa: E402
from rmqtx.remoting.serializer import decode_frame_payload, encode_frame, send_answer_frame  # noqa: E402

_SENDS = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
_BINARY = int(SerializeType.ROCKETMQ)
MSG_ID = "7F00000100002A9F0000000000000000"  # an offsetMsgId's shape; nothing reads it back
REGISTER_EVERY = 30.0  # seconds, as a broker's registerNameServerPeriod


class Answers:
    """The count of answered sends, shared by every connection."""

    def __init__(self) -> None:
        self.sent = 0


class Answerer(protocol.Protocol):
    """Answers each whole frame of a read; the answers of one read go out in one write, on the socket at
    once when nothing is queued (``send_now``), as rmqtx's broker writes them."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.pending = b""

    def dataReceived(self, data: bytes) -> None:
        buf = self.pending + data if self.pending else data
        pos, end, out = 0, len(buf), []
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if end - pos - 4 < size:
                break
            answer = self.answer(buf[pos + 4:pos + 4 + size])
            if answer:
                out.append(answer)
            pos += 4 + size
        self.pending = buf[pos:]
        if out and self.transport is not None and not send_now(self.transport, out):
            self.transport.writeSequence(out)  # as the broker's connections write

    def answer(self, payload: bytes) -> bytes:
        """One request's answer frame (b"" for a oneway request)."""
        if payload[0] == _BINARY and int.from_bytes(payload[4:6], "big") in _SENDS:
            self.answers.sent += 1
            if int.from_bytes(payload[13:17], "big") & ONEWAY_FLAG:
                return b""
            return send_answer_frame(ResponseCode.SUCCESS, int.from_bytes(payload[9:13], "big", signed=True),
                                     "DefaultRegion", "false", MSG_ID, 0, self.answers.sent - 1)
        request = decode_frame_payload(payload)
        fields: dict[str, str] = {}
        if request.code in _SENDS:
            self.answers.sent += 1
            fields = {"msgId": MSG_ID, "queueId": "0", "queueOffset": str(self.answers.sent - 1)}
        elif request.code == RequestCode.GET_MAX_OFFSET:
            queue = (request.ext_fields or {}).get("queueId")
            fields = {"offset": str(self.answers.sent if queue == "0" else 0)}
        if request.flag & ONEWAY_FLAG:
            return b""
        return encode_frame(request.make_response(ResponseCode.SUCCESS, ext_fields=fields))


class AnswererFactory(protocol.ServerFactory):
    def __init__(self) -> None:
        self.answers = Answers()

    def buildProtocol(self, addr: object) -> Answerer:
        return Answerer(self.answers)


def register_request(port: int, topic: str, queues: int) -> RemotingCommand:
    """REGISTER_BROKER for ``broker-a`` at 127.0.0.1:port with TBW102 and ``topic``."""
    body = RegisterBrokerBody(DataVersion(1, 0), [
        TopicConfig("TBW102", 8, 8, 7), TopicConfig(topic, queues, queues, 6)]).encode()
    header = RegisterBrokerRequestHeader(brokerName="broker-a", brokerAddr=f"127.0.0.1:{port}",
                                         clusterName="DefaultCluster", haServerAddr=f"127.0.0.1:{port + 1}",
                                         brokerId=0, compressed=False, bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_fields(), body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namesrv-port", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--topic", default="VsJavaBench")
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--kv-config-path", required=True, help="the NameServer's kvConfig.json (a temp path)")
    args = parser.parse_args()
    log.startLogging(sys.stderr)
    namesrv = NamesrvService(NamesrvConfig.from_properties({
        "listenAddress": "127.0.0.1", "listenPort": str(args.namesrv_port),
        "kvConfigPath": args.kv_config_path}))
    namesrv.startService()
    reactor.listenTCP(args.port, AnswererFactory(), interface="127.0.0.1")
    client = RemotingClient()
    request = register_request(args.port, args.topic, args.queues)
    task.LoopingCall(lambda: client.invoke(f"127.0.0.1:{args.namesrv_port}", request).addErrback(log.err)
                     ).start(REGISTER_EVERY)
    reactor.run()


if __name__ == "__main__":
    main()
