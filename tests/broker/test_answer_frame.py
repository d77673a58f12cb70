"""A stored message's answer built straight into frame bytes equals the encoded answer command."""

from __future__ import annotations

from twisted.trial import unittest

from rmqtx.remoting.codes import RESPONSE_FLAG, RequestCode, SerializeType
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import encode_frame
from rmqtx.store.results import PutResult, PutStatus
from testkit.hotpath import HotPath


class AnswerFrame(unittest.TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.hot = HotPath()
        self.proc = self.hot.broker.dispatcher.processors[int(RequestCode.SEND_MESSAGE_V2)].__self__

    def tearDown(self):
        return self.hot.close()

    def test_same_bytes_as_the_command(self) -> None:
        request = RemotingCommand(int(RequestCode.SEND_MESSAGE_V2), ext_fields={"b": "T"}, opaque=123456,
                                  serialize_type=SerializeType.ROCKETMQ)
        cases = 0
        for trace_on in (False, True):
            self.proc.ctx.config.update(traceOn=trace_on)
            for status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE):
                result = PutResult(status, 4096, 1100, "7F00000100002A9F0000000000001000", 77, 1, 1795264935148)
                expected = self.proc._answer(result, request, 3)
                expected.opaque = request.opaque
                expected.flag |= RESPONSE_FLAG  # what RemotingProtocol.answer does before encoding
                code = int(expected.code)
                self.assertEqual(self.proc._answer_frame(code, result, request.opaque, 3), encode_frame(expected))
                cases += 1
        self.assertEqual(cases, 6)
