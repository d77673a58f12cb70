"""Which puts a SYNC_MASTER holds for its slave, as Java 4.9.8 decides it: client sends, reply messages
(SEND_REPLY_MESSAGE_V2) and transaction commits (END_TRANSACTION) wait unless their WAIT says false;
send-backs are stored with WAIT=false and answer at once. The slave is held with SIGSTOP, so an answer
that does not wait arrives while the slave cannot have the bytes."""

from __future__ import annotations

import signal
import socket
import unittest

from rmqtx.common import fastjson
from rmqtx.common.message import properties_to_string
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.headers import (ConsumerSendMsgBackRequestHeader, EndTransactionRequestHeader,
                                    SendMessageRequestHeader, send_header_to_v2)
from rmqtx.remoting.serializer import decode_frame, encode_frame
from rmqtx.store.record import RecordError, decode_record
from testkit.ha import Cluster, Sender, stored_offset, wait_until

TOPIC = "T_waits"
GROUP = "P_ha"  # the Sender's producer group
COMMIT = 0x8
#: Long enough that the checks made while the slave is stopped finish before a waiting put times out.
SLAVE_TIMEOUT_MS = 8000


class Conn:
    """One request on its own connection, whose answer may be read later (or not come yet)."""

    def __init__(self, addr: str, request: RemotingCommand) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.sock.sendall(encode_frame(request))

    def answer(self, timeout: float) -> RemotingCommand | None:
        """The answer, or None if nothing came within timeout."""
        self.sock.settimeout(timeout)
        try:
            head = self.sock.recv(4, socket.MSG_PEEK)
        except socket.timeout:
            return None
        if not head:
            raise ConnectionError("closed without an answer")
        self.sock.settimeout(10)
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed mid-answer")
            data += chunk
        self.sock.close()
        return decode_frame(data)


def reply_request(body: bytes) -> RemotingCommand:
    """SEND_REPLY_MESSAGE_V2 without REPLY_TO_CLIENT: the push fails at once, the reply is stored all the same."""
    header = SendMessageRequestHeader(
        producerGroup="P_replier", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=0, sysFlag=0,
        bornTimestamp=1_700_000_000_000, flag=0, properties=properties_to_string({"CORRELATION_ID": "c1"}),
        reconsumeTimes=0, unitMode=False, batch=False)
    fields, order = send_header_to_v2(header)
    return RemotingCommand(RequestCode.SEND_REPLY_MESSAGE_V2, ext_fields=fields, body=body, fast_keys=order)


def commit_request(half: RemotingCommand) -> RemotingCommand:
    header = EndTransactionRequestHeader(
        producerGroup=GROUP, tranStateTableOffset=int(half.ext_fields["queueOffset"]),
        commitLogOffset=stored_offset(half), commitOrRollback=COMMIT, fromTransactionCheck=False,
        msgId=half.ext_fields["msgId"])
    return header.apply_to(RemotingCommand(RequestCode.END_TRANSACTION))


def send_back_request(sent: RemotingCommand) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(offset=stored_offset(sent), group="C_waits", delayLevel=1,
                                              originMsgId=sent.ext_fields["msgId"], originTopic=TOPIC,
                                              maxReconsumeTimes=16)
    return header.apply_to(RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK))


def find_record(data: bytes, topic: str, body: bytes) -> tuple[int, int] | None:
    """(offset, size) of the record of topic with body in a commit log's bytes."""
    pos = 0
    while pos < len(data):
        try:
            rec = decode_record(data, pos)
        except (RecordError, ValueError, IndexError):
            return None
        if rec.total_size <= 0:
            return None
        if rec.topic == topic and rec.body == body:
            return pos, rec.total_size
        pos += rec.total_size
    return None


class SyncMasterWaitsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = Cluster()
        self.stopped = None

    def tearDown(self) -> None:
        if self.stopped is not None and self.stopped.alive():
            self.stopped.proc.send_signal(signal.SIGCONT)
        self.assertEqual(self.cluster.close(), [])

    def _on_slave(self, master, slave, body: bytes) -> bool:
        """Whether the record with body is on the slave, byte for byte as the master stored it."""
        m = master.commit_log_bytes()
        where = find_record(m, TOPIC, body)
        self.assertIsNotNone(where, body)
        off, size = where
        return slave.commit_log_bytes(off + size)[off:] == m[off:off + size]

    def test_reply_and_commit_wait_for_the_slave_send_back_does_not(self) -> None:
        master = self.cluster.broker("master", brokerRole="SYNC_MASTER", slaveTimeout=SLAVE_TIMEOUT_MS).start()
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1).start()
        wait_until(lambda: "requests offset" in master.log(), 20, "the slave's first report")
        sender = Sender(master.addr)
        plain = sender.send(TOPIC, b"plain")
        self.assertEqual(plain.code, ResponseCode.SUCCESS)
        halves = [sender.send(TOPIC, b"half-%d" % i, TRAN_MSG="true", PGROUP=GROUP) for i in range(3)]
        self.assertEqual([h.code for h in halves], [ResponseCode.SUCCESS] * 3)

        # 1. the slave stopped past slaveTimeout: commit and reply answer as stored (FLUSH_SLAVE_TIMEOUT counts)
        slave.proc.send_signal(signal.SIGSTOP)
        self.stopped = slave
        commit = Conn(master.addr, commit_request(halves[0]))
        reply = Conn(master.addr, reply_request(b"reply-0"))
        send = Conn(master.addr, _send_request(b"timed-out"))
        self.assertIsNone(commit.answer(1.0), "a commit answered before the slave could have it")
        self.assertIsNone(reply.answer(0.1), "a reply answered before the slave could have it")
        back = Conn(master.addr, send_back_request(plain)).answer(SLAVE_TIMEOUT_MS / 1000 + 10)
        self.assertEqual((back.code, back.remark), (ResponseCode.SUCCESS, None), "send-back is stored with WAIT=false")
        no_wait = sender.send(TOPIC, b"no wait", WAIT="false")
        self.assertEqual(no_wait.code, ResponseCode.SUCCESS)
        answered = commit.answer(SLAVE_TIMEOUT_MS / 1000 + 10)
        self.assertEqual((answered.code, answered.remark), (ResponseCode.SUCCESS, None))
        answered = reply.answer(10)
        self.assertEqual(answered.code, ResponseCode.SYSTEM_ERROR)
        self.assertEqual(answered.remark, "reply message properties[REPLY_TO_CLIENT] is null")
        self.assertIn("msgId", answered.ext_fields)  # stored: Java's putOk takes FLUSH_SLAVE_TIMEOUT
        self.assertEqual(send.answer(10).code, ResponseCode.FLUSH_SLAVE_TIMEOUT)
        # brokerStatus's slowest put is that send's wait for the slave, as in Java (its future includes it):
        # min(slaveTimeout, syncFlushTimeout's default 5000 ms)
        runtime = Conn(master.addr, RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO)).answer(5)
        self.assertGreaterEqual(int(fastjson.loads(runtime.body)["table"]["putMessageEntireTimeMax"]), 5000)
        slave.proc.send_signal(signal.SIGCONT)
        self.stopped = None
        wait_until(lambda: self._on_slave(master, slave, b"no wait"), 20, "the slave to catch up")

        # 2. the slave stopped, then resumed: the answers come only once it has the bytes
        wait_until(lambda: sender.send(TOPIC, b"resync").code == ResponseCode.SUCCESS, 20, "acks again")
        slave.proc.send_signal(signal.SIGSTOP)
        self.stopped = slave
        commit = Conn(master.addr, commit_request(halves[1]))
        reply = Conn(master.addr, reply_request(b"reply-1"))
        self.assertIsNone(commit.answer(1.0), "a commit answered before the slave could have it")
        self.assertIsNone(reply.answer(0.1), "a reply answered before the slave could have it")
        slave.proc.send_signal(signal.SIGCONT)
        self.stopped = None
        self.assertEqual(commit.answer(SLAVE_TIMEOUT_MS / 1000).code, ResponseCode.SUCCESS)
        self.assertIn("msgId", reply.answer(SLAVE_TIMEOUT_MS / 1000).ext_fields)
        self.assertTrue(self._on_slave(master, slave, b"half-1"))  # the committed copy, on its real topic
        self.assertTrue(self._on_slave(master, slave, b"reply-1"))

        # 3. no slave: SLAVE_NOT_AVAILABLE at once; a commit still answers SUCCESS, a reply is still stored
        slave.kill9()
        wait_until(lambda: sender.send(TOPIC, b"alone").code == ResponseCode.SLAVE_NOT_AVAILABLE, 30, "the slave dropped")
        answered = Conn(master.addr, commit_request(halves[2])).answer(5)
        self.assertEqual((answered.code, answered.remark), (ResponseCode.SUCCESS, None))
        self.assertIn("msgId", Conn(master.addr, reply_request(b"reply-2")).answer(5).ext_fields)
        self.assertIsNotNone(find_record(master.commit_log_bytes(), TOPIC, b"half-2"))
        sender.close()


def _send_request(body: bytes) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producerGroup=GROUP, topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=1, sysFlag=0,
        bornTimestamp=1_700_000_000_000, flag=0, properties="", reconsumeTimes=0, unitMode=False, batch=False)
    fields, order = send_header_to_v2(header)
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=body, fast_keys=order)


if __name__ == "__main__":
    unittest.main()
