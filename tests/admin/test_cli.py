"""Each rmqadmin subcommand against a real rmqtx NameServer + Broker, output shaped like mqadmin's."""

from __future__ import annotations

import json
import os
import sys

from twisted.internet import defer, utils

from rmqtx.client.consumer import CONSUME_FROM_FIRST_OFFSET, ConsumeStatus, PushConsumer
from rmqtx.client.message import Message, MessageQueue
from rmqtx.client.producer import Producer
from tests.admin.support import AdminTestCase
from tests.client.support import wait_until
from testkit.standalone import REPO


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


class TopicCommandsTest(AdminTestCase):
    @defer.inlineCallbacks
    def test_topic_lifecycle(self):
        yield defer.ensureDeferred(self._topic_lifecycle())

    async def _topic_lifecycle(self) -> None:
        out = await self.ok("updateTopic", "-c", "DefaultCluster", "-t", "T_admin", "-r", "2", "-w", "2")
        self.assertEqual(
            out,
            f"create topic to {self.cluster.broker_addr} success.\n"
            "TopicConfig [topicName=T_admin, readQueueNums=2, writeQueueNums=2, perm=RW-, "
            "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]\n",
        )
        await self.until_routed("T_admin")
        self.assertIn("T_admin", (await self.ok("topicList")).splitlines())

        route = await self.ok("topicRoute", "-t", "T_admin")
        self.assertTrue(route.startswith('{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{"0":"'), route)
        parsed = json.loads(route)  # JSON tools read it (mqadmin's bare {0:...} they cannot)
        self.assertEqual(parsed["brokerDatas"][0]["brokerAddrs"], {"0": self.cluster.broker_addr})
        self.assertEqual([q["writeQueueNums"] for q in parsed["queueDatas"]], [2])

        status = await self.ok("topicStatus", "-t", "T_admin")
        self.assertEqual(status.splitlines()[0], "#Broker Name                      #QID  #Min Offset           #Max Offset             #Last Updated")
        self.assertEqual([r[:4] for r in _rows(status)[1:]], [["broker-a", "0", "0", "0"], ["broker-a", "1", "0", "0"]])

        out = await self.ok("deleteTopic", "-c", "DefaultCluster", "-t", "T_admin")
        self.assertEqual(out, "delete topic [T_admin] from cluster [DefaultCluster] success.\ndelete topic [T_admin] from NameServer success.\n")
        self.assertNotIn("T_admin", (await self.ok("topicList")).splitlines())

    @defer.inlineCallbacks
    def test_failures_exit_non_zero_with_one_line(self):
        code, out, err = yield defer.ensureDeferred(self.rmqadmin("topicRoute", "-t", "T_missing"))
        self.assertEqual(code, 1)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("CODE: 17", err)
        code, _, err = yield defer.ensureDeferred(self.rmqadmin("updateTopic", "-c", "NoSuchCluster", "-t", "T_x"))
        self.assertEqual(code, 1)
        self.assertIn("NoSuchCluster", err)
        code, _, err = yield defer.ensureDeferred(self.rmqadmin("updateTopic", "-b", self.cluster.broker_addr, "-t", "bad/name"))
        self.assertEqual(code, 1)
        self.assertIn("illegal characters", err)


class BrokerCommandsTest(AdminTestCase):
    @defer.inlineCallbacks
    def test_cluster_broker_status_and_config(self):
        yield defer.ensureDeferred(self._broker())

    async def _broker(self) -> None:
        addr = self.cluster.broker_addr
        clusters = await self.ok("clusterList")
        header, row = clusters.splitlines()
        self.assertEqual(header.split(), ["#Cluster", "Name", "#Broker", "Name", "#BID", "#Addr", "#Version",
                                          "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE"])
        self.assertEqual(row.split()[:5], ["DefaultCluster", "broker-a", "0", addr, "V4_9_8"])

        status = await self.ok("brokerStatus", "-b", addr)
        values = {k.strip(): v for k, v in (line.split(": ", 1) for line in status.splitlines())}
        self.assertEqual(values["brokerVersionDesc"], "V4_9_8")
        keys = [line[:32].strip() for line in status.splitlines()]
        self.assertEqual(keys, sorted(keys))

        config = await self.ok("getBrokerConfig", "-b", addr)
        lines = config.splitlines()
        self.assertEqual(lines[0], f"============{addr}============")
        settings = {line.split("=  ", 1)[0].strip(): line.split("=  ", 1)[1] for line in lines[1:] if "=  " in line}
        self.assertEqual(settings["brokerName"], "broker-a")
        self.assertEqual(settings["listenPort"], addr.rsplit(":", 1)[1])
        cluster_config = await self.ok("getBrokerConfig", "-c", "DefaultCluster")
        self.assertTrue(cluster_config.startswith(f"============Master: {addr}============\n"))


class ConsumerCommandsTest(AdminTestCase):
    @defer.inlineCallbacks
    def test_groups_progress_connection_and_reset(self):
        yield defer.ensureDeferred(self._consumers())

    async def _consumers(self) -> None:
        out = await self.ok("updateSubGroup", "-b", self.cluster.broker_addr, "-g", "G_admin")
        self.assertTrue(out.startswith(f"create subscription group to {self.cluster.broker_addr} success.\nSubscriptionGroupConfig [groupName=G_admin, consumeEnable=true"))
        self.assertIn("G_admin", self.cluster.broker.ctx.groups.table)
        self.assertFalse(self.cluster.broker.ctx.groups.table["G_admin"].v5, "no 5.x field unless given")
        await self.ok("updateSubGroup", "-b", self.cluster.broker_addr, "-g", "G_fifo", "-o", "true", "-p",
                      '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":2}}')
        fifo = self.cluster.broker.ctx.groups.table["G_fifo"]  # as 5.x mqadmin updateSubGroup -o true -p ...
        self.assertTrue(fifo.consumeMessageOrderly)
        self.assertEqual(fifo.groupRetryPolicy["type"], "EXPONENTIAL")

        await self.ok("updateTopic", "-c", "DefaultCluster", "-t", "T_fix", "-r", "2", "-w", "2")
        await self.until_routed("T_fix")
        producer = Producer("P_admin", config=self.config())
        await producer.start()
        sent = [await producer.send(Message("T_fix", f"m{i}".encode(), tags="TagA", keys=f"K{i}"), queue=MessageQueue("T_fix", "broker-a", i % 2)) for i in range(5)]
        await producer.shutdown()

        got: list[bytes] = []

        def listener(msgs, ctx):
            got.extend(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("C_fix", config=self.config(), listener=listener, consume_from=CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("T_fix", "TagA || TagB")
        await consumer.start()
        try:
            await wait_until(lambda: len(got) >= 5)
            await wait_until(lambda: sum(self.cluster.broker.ctx.offsets.queues_of("C_fix", "T_fix").values()) >= 5)

            progress = await self.ok("consumerProgress", "-g", "C_fix")
            lines = progress.splitlines()
            self.assertEqual(lines[0].split(), ["#Topic", "#Broker", "Name", "#QID", "#Broker", "Offset", "#Consumer", "Offset", "#Diff", "#LastTime"])
            rows = {(r[0], r[2]): r for r in _rows(progress)[1:] if r[0] in ("T_fix", "%RETRY%C_fix")}
            self.assertEqual(rows[("T_fix", "0")][3:6], ["3", "3", "0"])
            self.assertEqual(rows[("T_fix", "1")][3:6], ["2", "2", "0"])
            self.assertEqual(lines[-2:], ["Consume TPS: 0.00", "Diff Total: 0"])

            summary = await self.ok("consumerProgress")
            row = next(r for r in _rows(summary) if r[0] == "C_fix")
            self.assertEqual(row[1:5], ["1", "V4_9_8", "PUSH", "CLUSTERING"])

            conn = await self.ok("consumerConnection", "-g", "C_fix")
            lines = conn.splitlines()
            self.assertEqual(lines[0].split(), ["#ClientId", "#ClientAddr", "#Language", "#Version"])
            self.assertEqual(lines[1].split()[2:], ["JAVA", "V4_9_8"])
            self.assertIn("T_fix                TagA || TagB", lines)
            self.assertEqual(lines[-3:], ["ConsumeType: CONSUME_PASSIVELY", "MessageModel: CLUSTERING", "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET"])

            reset = await self.ok("resetOffsetByTime", "-g", "C_fix", "-t", "T_fix", "-s", "0")
            self.assertTrue(reset.startswith("rollback consumer offset by specified group[C_fix], topic[T_fix], force[true], timestamp(string)[0], timestamp(long)[0]\n"))
            self.assertEqual(sorted(r[1:] for r in _rows(reset)[2:]), [["0", "0"], ["1", "0"]])
            await wait_until(lambda: len(got) >= 10)  # the consumer re-reads from the start
        finally:
            await consumer.shutdown()

        by_key = await self.ok("queryMsgByKey", "-t", "T_fix", "-k", "K3")
        rows = _rows(by_key)
        self.assertEqual(rows[0], ["#Message", "ID", "#QID", "#Offset"])
        self.assertEqual(rows[1], [sent[3].msg_id, "1", "1"])

        by_id = await self.ok("queryMsgById", "-i", sent[3].offset_msg_id)
        fields = {line[:20].strip(): line[21:] for line in by_id.splitlines() if line[:20].strip().endswith(":")}
        self.assertEqual(fields["OffsetID:"], sent[3].offset_msg_id)
        self.assertEqual(fields["Topic:"], "T_fix")
        self.assertEqual(fields["Keys:"], "[K3]")
        self.assertEqual(fields["Queue Offset:"], "1")
        self.assertIn("MessageTrack [consumerGroup=C_fix, trackType=CONSUMED", by_id)

    @defer.inlineCallbacks
    def test_reset_without_consumer_commits_in_broker(self):
        yield defer.ensureDeferred(self._offline_reset())

    async def _offline_reset(self) -> None:
        await self.ok("updateTopic", "-c", "DefaultCluster", "-t", "T_off", "-r", "1", "-w", "1")
        await self.until_routed("T_off")
        producer = Producer("P_off", config=self.config())
        await producer.start()
        for i in range(3):
            await producer.send(Message("T_off", b"x"))
        await producer.shutdown()
        self.cluster.broker.ctx.offsets.commit("C_off", "T_off", 0, 3)
        out = await self.ok("resetOffsetByTime", "-g", "C_off", "-t", "T_off", "-s", "0")
        self.assertIn("#timestampOffset", out)
        self.assertEqual(self.cluster.broker.ctx.offsets.query("C_off", "T_off", 0), 0)


class ConsoleScriptTest(AdminTestCase):
    @defer.inlineCallbacks
    def test_console_script_runs_as_a_process(self):
        out, err, code = yield utils.getProcessOutputAndValue(
            sys.executable, ["-m", "rmqtx.tools.admin", "clusterList", "-n", self.cluster.namesrv_addr], path=str(REPO), env=os.environ
        )
        self.assertEqual(code, 0, err)
        self.assertIn(b"DefaultCluster", out)
        out, err, code = yield utils.getProcessOutputAndValue(
            sys.executable, ["-m", "rmqtx.tools.admin", "topicRoute", "-t", "nope", "-n", self.cluster.namesrv_addr], path=str(REPO), env=os.environ
        )
        self.assertEqual(code, 1)
        self.assertEqual(len(err.decode().strip().splitlines()), 1, err)
