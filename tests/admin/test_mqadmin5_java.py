"""Apache's own mqadmin 5.5.0 (rocketmq-tools, the newest 5.x on Maven Central) against one rmqtx standalone.

One standalone and one mqadmin home serve every case (started once for the class). Subcommands run in
batches, many to a JVM (``MQAdmin.run_batch``: a JVM start costs about a second of CPU, a subcommand
against a local broker milliseconds), three JVMs side by side, or one when the order matters. Each
output's content is checked, and mqadmin's exit code 0 is never taken as success alone (it exits 0 when
a command fails).

Three kinds of subcommand (docs/mqadmin5.md lists each one):

- those that pass: the 4.x subcommands that 5.x still has, and 5.x's own that rmqtx serves
  (updateTopic with ``-a +message.type=FIFO``, updateTopicList, updateSubGroupList, setConsumeMode,
  the cold-read flow control commands, haStatus, setCommitLogReadAheadMode, exportPopRecord,
  resetMasterFlushOffset, the export commands);
- those that get Java's answer for a broker or NameServer without the feature, each named in
  ``WITHOUT_FEATURE`` with the feature and the answer (the controller commands, static topics, the
  RocksDB and timer-engine switches, lite topics);
- those not run: the ACL 2.0 user/acl commands (their own suite), addBroker/removeBroker (a broker
  container), dumpCompactionLog (a local compaction file), startMonitoring (a daemon that only logs),
  queryMsgTraceById (needs trace records no client here writes), the lite-topic commands beyond
  getBrokerLiteInfo (the same code 3 for their request codes).
"""

from __future__ import annotations

import atexit
import json
import re
import time
import unittest
from pathlib import Path

from tests.admin.mqadmin_java import BODY_DIR, FAILURE_TEXT, MQAdmin, Run, classpath, java_binary
from tests.admin.test_mqadmin_java import Clients, colon_pairs, properties, table
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import Standalone, call

VERSION = "5.5.0"
CLUSTER = "DefaultCluster"
BROKER = "broker-a"
COUNT = 10  # messages tests/admin/mqadmin_clients.py sends to T_data

#: subcommand -> (what rmqtx lacks, the answer mqadmin must report). Each answer is what Apache's own
#: server gives when it runs without that feature; "Apache 5.4.0" notes what a default 5.4.0 broker says.
WITHOUT_FEATURE: dict[str, tuple[str, str]] = {
    "getControllerMetaData": ("a controller (enableControllerInNamesrv): Apache's NameServer without one answers the same",
                              "CODE: 3  DESC:  request type 1005 not supported"),
    "getSyncStateSet": ("a controller: mqadmin asks for the controller's metadata first", "request type 1005 not supported"),
    "electMaster": ("a controller", "request type 1005 not supported"),
    "cleanBrokerMetadata": ("a controller", "request type 1005 not supported"),
    "getControllerConfig": ("a controller", "request type 1010 not supported"),
    "updateControllerConfig": ("a controller", "request type 1009 not supported"),
    "getBrokerEpoch": ("controller mode (enableControllerMode): Apache 5.4.0's broker outside it answers the same",
                       "CODE: 1  DESC: this request only for controllerMode"),
    "updateStaticTopic": ("static topics (logic queue mappings): the answer of a broker without them, as 4.9.8's; "
                          "Apache 5.4.0 creates the topic", "request type 513 not supported"),
    "switchTimerEngine": ("the RocksDB timer: Apache 5.4.0 started without timerUseRocksDB answers the same",
                          "CODE: 29  DESC: timerUseRocksDB muse be configured true when broker start"),
    "getBrokerLiteInfo": ("lite topics (rocketmq-tools 5.5.0): Apache 5.4.0 answers the same",
                          "request type 200074 not supported"),
}


class MQAdmin5Test(unittest.TestCase):
    """trial runs no class fixtures: the first setUp starts the shared standalone there, and it is stopped
    at tearDownClass (pytest) or when the process ends (trial)."""

    server: Standalone
    mqadmin: MQAdmin
    _started_for: type | None = None

    @classmethod
    def setUpClass(cls) -> None:
        java_binary(), classpath(VERSION)  # skip (or fail in CI) before starting anything
        cls.server = Standalone({"brokerClusterName": CLUSTER, "brokerName": BROKER}).start()
        cls._started_for = cls
        atexit.register(cls.tearDownClass)
        cls.mqadmin = MQAdmin(cls.server.namesrv, version=VERSION)

    @classmethod
    def tearDownClass(cls) -> None:
        if cls._started_for is cls:
            cls._started_for = None
            cls.mqadmin.close()
            cls.server.close()

    def setUp(self) -> None:
        if type(self)._started_for is not type(self):
            type(self).setUpClass()

    def ok(self, run: Run) -> str:
        """The command succeeded: exit 0 and no exception or error code anywhere in its output."""
        self.assertEqual(run.code, 0, str(run))
        self.assertIsNone(FAILURE_TEXT.search(run.text), str(run))
        return run.out

    def cmd(self, *args: str) -> str:
        return self.ok(self.mqadmin.run(*args))

    def refused(self, run: Run, answer: str) -> None:
        self.assertIn(answer, run.text, str(run))

    def queue_offset(self, code: RequestCode, fields: dict[str, str]) -> int:
        response = call(self.server.broker, RemotingCommand.request(code, fields))
        self.assertEqual(response.code, 0, response.remark)
        return int(response.ext_fields["offset"])

    def stored_topics(self) -> dict:
        return json.loads((self.server.root / "store" / "config" / "topics.json").read_text())["topicConfigTable"]

    def test_topics_groups_and_broker_commands(self) -> None:
        br, ns, home = self.server.broker, self.server.namesrv, self.mqadmin.home
        (home / "topics.json").write_text(json.dumps([
            {"topicName": "T5_list1", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "attributes": {"+message.type": "FIFO"}},
            {"topicName": "T5_list2", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}]))
        (home / "groups.json").write_text(json.dumps([{"groupName": "G5_list1"}, {"groupName": "G5_list2", "retryMaxTimes": 3}]))
        (fifo, topic_list, group_list, sub_group, cold_update, read_ahead, ha, flush, pop_record,
         rocks_json, rocks_cq, update_broker, update_ns, cluster, status, config, ns_config) = self.mqadmin.run_batch([
            ("updateTopic", "-c", CLUSTER, "-t", "T5_fifo", "-a", "+message.type=FIFO"),
            ("updateTopicList", "-c", CLUSTER, "-f", f"{home}/topics.json"),
            ("updateSubGroupList", "-b", br, "-f", f"{home}/groups.json"),
            ("updateSubGroup", "-c", CLUSTER, "-g", "G5_one"),
            ("updateColdDataFlowCtrGroupConfig", "-b", br, "-g", "G5_cold", "-v", "1000"),
            ("setCommitLogReadAheadMode", "-b", br, "-m", "1"),
            ("haStatus", "-b", br), ("resetMasterFlushOffset", "-b", br, "-o", "0"), ("exportPopRecord", "-b", br),
            ("rocksDBConfigToJson", "-c", CLUSTER, "-t", "topics"), ("checkRocksdbCqWriteProgress", "-c", CLUSTER, "-t", "T5_fifo"),
            ("updateBrokerConfig", "-b", br, "-k", "autoCreateTopicEnable", "-v", "false"),
            ("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"),
            ("clusterList",), ("brokerStatus", "-b", br), ("getBrokerConfig", "-b", br), ("getNamesrvConfig",),
        ])
        self.assertIn(f"create topic to {br} success.", self.ok(fifo))
        self.assertIn("attributes={+message.type=FIFO}", fifo.out)
        # -c: one line per master, then (as Apache's tool does after a cluster-wide run) its usage text
        self.assertIn(f"submit batch of topic config to {br} success, please check the result later.", self.ok(topic_list))
        self.assertIn(f"submit batch of group config to {br} success, please check the result later.", self.ok(group_list))
        self.assertIn(f"create subscription group to {br} success.", self.ok(sub_group))
        self.assertIn(f"updateColdDataFlowCtrGroupConfig success, {br}", self.ok(cold_update))
        self.assertIn("set commitlog readahead mode success, mode: 1", self.ok(read_ahead))
        out = self.ok(ha)
        self.assertRegex(out, rf"#MasterAddr\s+{re.escape(br)}\n#MasterCommitLogMaxOffset\s+\d+\n#SlaveNum\s+0\n#InSyncSlaveNum\s+0")
        self.assertIn("reset master flush offset to 0 success", self.ok(flush))
        self.assertIn(f"Export broker records, brokerName={BROKER}, brokerAddr={br}, dryRun=false", self.ok(pop_record))
        self.assertIn("broker export done.", self.ok(rocks_json))  # topics are a JSON file, nothing in RocksDB
        self.assertIn(f"{BROKER} check doing, please wait and get the result from log...", self.ok(rocks_cq))
        self.refused(update_broker, "CODE: 16  DESC: Can not update config: enableUpdateBrokerConfig is false on this broker.")
        self.refused(update_ns, "CODE: 16  DESC: Updating the name server config is disabled (enableUpdateNamesrvConfig=false).")

        lines = self.ok(cluster).splitlines()
        self.assertEqual(lines[0].split(), ["#Cluster", "Name", "#Broker", "Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
                                            "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED"])
        row = lines[1].split()
        # 5.x reads getTransferredTps, the ack pool's queue (N when absent) and brokerActive (#ACTIVATED)
        self.assertEqual(row[:5], [CLUSTER, BROKER, "0", br, "V4_9_8"])
        # in: TPS(send queue, its head's wait); out: TPS(pull queue, wait|ack queue, wait), "N,Nms" without the ack keys
        self.assertRegex(" ".join(row[5:9]), r"^[\d.]+\(0,0ms\) [\d.]+\(0,0ms\|0,0ms\) \d+-\d+\([\d.]+w, [\d.]+,$")
        self.assertEqual(row[-1], "true")
        runtime = colon_pairs(self.ok(status))
        self.assertEqual(runtime["brokerActive"], "true")
        self.assertEqual(runtime["getTransferredTps"], runtime["getTransferedTps"])  # 5.x's name, 4.9.8's figure
        # one figure per window (10 s, 1 min, 10 min) the broker's uptime covers: none in its first seconds
        self.assertRegex(runtime["getTransferredTps"], r"^([\d.]+( [\d.]+){0,2} ?)?$")
        broker_config = properties(self.ok(config))
        self.assertEqual((broker_config["brokerName"], broker_config["brokerClusterName"], broker_config["namesrvAddr"]), (BROKER, CLUSTER, ns))
        self.assertEqual(properties(self.ok(ns_config))["listenPort"], ns.rsplit(":", 1)[1])

        # what the lists and the attributes made: routes, the stored table (one write), the groups
        (route, topics, topic_status, group2, cold, mode, meta, configs, metrics, topic_cluster, read_normal) = self.mqadmin.run_batch([
            ("topicRoute", "-t", "T5_list1"), ("topicList",), ("topicStatus", "-t", "T5_list2"), ("getConsumerConfig", "-g", "G5_list2"),
            ("getColdDataFlowCtrInfo", "-b", br), ("setConsumeMode", "-b", br, "-g", "G5_one", "-t", "T5_fifo", "-m", "POP", "-q", "2"),
            ("exportMetadata", "-c", CLUSTER, "-f", f"{home}/meta"), ("exportConfigs", "-c", CLUSTER, "-f", f"{home}/cfg"),
            ("exportMetrics", "-c", CLUSTER, "-f", f"{home}/metrics"), ("topicClusterList", "-t", "T5_list1"),
            ("setCommitLogReadAheadMode", "-b", br, "-m", "0"),
        ])
        route_json = re.sub(r"([{,]\s*)(\d+):", r'\1"\2":', self.ok(route))  # fastjson's bare number keys
        queue_data = json.loads(route_json)["queueDatas"]
        self.assertEqual([(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in queue_data], [(4, 4, 6)])
        self.assertLessEqual({"T5_fifo", "T5_list1", "T5_list2"}, set(self.ok(topics).split()))
        self.assertEqual([r[1] for r in table(self.ok(topic_status)) if r[0] == BROKER], ["0", "1"])
        stored = self.stored_topics()
        self.assertEqual(stored["T5_list1"]["attributes"], {"message.type": "FIFO"})
        self.assertEqual(stored["T5_fifo"]["attributes"], {"message.type": "FIFO"})
        self.assertNotIn("attributes", stored["T5_list2"])
        group = properties(self.ok(group2))
        self.assertEqual((group["groupName"], group["retryMaxTimes"], group["consumeEnable"]), ("G5_list2", "3", "true"))
        self.assertIn("{\n\t\"globalAcc\":0,", self.ok(cold))
        cold_info = json.loads(cold.out[cold.out.index("{"):])
        self.assertEqual(cold_info, {"globalAcc": 0, "cgColdReadThreshold": 3 * 1024 * 1024, "configTable": {"G5_cold": 1000},
                                     "globalColdReadThreshold": 100 * 1024 * 1024, "runtimeTable": {}})
        self.assertIn("topic[T5_fifo] group[G5_one] consume mode[POP] popShareQueueNum[2]", self.ok(mode))
        self.assertIn("export", self.ok(meta))
        metadata = json.loads((home / "meta" / "metadata.json").read_text())
        self.assertEqual(metadata["topicConfigTable"]["T5_list1"]["attributes"], {"message.type": "FIFO"})
        self.assertIn("G5_list1", metadata["subscriptionGroupTable"])
        self.ok(configs)
        exported = json.loads((home / "cfg" / "configs.json").read_text())
        self.assertEqual(exported["clusterScale"], {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0})
        self.assertIn(f"export {home}/metrics/metrics.json success", self.ok(metrics))
        report = json.loads((home / "metrics" / "metrics.json").read_text())["evaluateReport"][BROKER]
        self.assertEqual(report["runtimeVersion"]["rocketmqVersion"], "V5_5_0")  # the tool's own version
        self.assertEqual(report["runtimeQuota"]["diskRatio"]["commitLogDiskRatio"], runtime["commitLogDiskRatio"])
        self.assertEqual(self.ok(topic_cluster).split(), [CLUSTER])
        self.assertIn("set commitlog readahead mode success, mode: 0", self.ok(read_normal))

        # removing: the cold threshold, the list's groups and topics (as 4.x's commands do)
        removed, cold, deleted_topic, deleted_group = self.mqadmin.run_batch([  # in this order, in one JVM
            ("removeColdDataFlowCtrGroupConfig", "-b", br, "-g", "G5_cold"), ("getColdDataFlowCtrInfo", "-b", br),
            ("deleteTopic", "-c", CLUSTER, "-t", "T5_list2"), ("deleteSubGroup", "-c", CLUSTER, "-g", "G5_list1")], jvms=1)
        self.assertIn(f"remove broker cold read threshold success, {br}", self.ok(removed))
        self.assertIn('"configTable":{}', self.ok(cold))
        self.assertIn(f"delete topic [T5_list2] from cluster [{CLUSTER}] success.", self.ok(deleted_topic))
        self.assertIn(f"delete subscription group [G5_list1] from broker [{br}] in cluster [{CLUSTER}] success.", self.ok(deleted_group))
        self.assertNotIn("T5_list2", self.stored_topics())

    def test_java_answers_without_the_feature(self) -> None:
        br, ns = self.server.broker, self.server.namesrv
        commands = {
            "getControllerMetaData": ("-a", ns), "getSyncStateSet": ("-a", ns, "-b", BROKER),
            "electMaster": ("-a", ns, "-bn", BROKER, "-c", CLUSTER, "-b", "0"),
            "cleanBrokerMetadata": ("-a", ns, "-bn", BROKER, "-c", CLUSTER, "-b", "0"),
            "getControllerConfig": ("-a", ns), "updateControllerConfig": ("-a", ns, "-k", "notifyBrokerRoleChanged", "-v", "true"),
            "getBrokerEpoch": ("-b", BROKER), "updateStaticTopic": ("-c", CLUSTER, "-t", "T5_static", "-qn", "4"),
            "switchTimerEngine": ("-b", br, "-e", "R"), "getBrokerLiteInfo": ("-b", br),
        }
        self.assertEqual(set(commands), set(WITHOUT_FEATURE))
        runs = self.mqadmin.run_batch([(name, *args) for name, args in commands.items()])
        for name, run in zip(commands, runs):
            with self.subTest(name):
                self.refused(run, WITHOUT_FEATURE[name][1])
        self.assertNotIn("T5_static", self.stored_topics())  # mqadmin had asked before creating: nothing made

    def test_message_group_and_offset_commands(self) -> None:
        """The 4.x subcommands 5.x still has, around a live producer and push consumer."""
        br = self.server.broker
        clients = Clients(self.server.namesrv, str(self.mqadmin.home))
        self.addCleanup(clients.stop)
        self.assertEqual(clients.read_until("ready")["received"], COUNT)
        sent = [e for e in clients.events if e["kind"] == "sent"]
        for e in sent:
            self.addCleanup(lambda path=BODY_DIR / e["msg_id"]: path.unlink(missing_ok=True))
        per_queue = {q: sorted(e["queue_offset"] for e in sent if e["queue_id"] == q) for q in range(4)}
        first = sent[3]
        queue = first["queue_id"]
        (producer_conn, consumer_conn, progress, status, by_id, by_key, by_unique, by_offset, print_msg, print_queue, cq,
         consume_stats, stats_all, producer, group_config, consume, allocate, clone_group) = self.mqadmin.run_batch([
            ("producerConnection", "-g", "P_adm", "-t", "T_data"), ("consumerConnection", "-g", "C_adm"),
            ("consumerProgress", "-g", "C_adm"), ("consumerStatus", "-g", "C_adm"), ("queryMsgById", "-t", "T_data", "-i", first["offset_msg_id"]),
            ("queryMsgByKey", "-t", "T_data", "-k", "K-3"), ("queryMsgByUniqueKey", "-t", "T_data", "-i", first["msg_id"]),
            ("queryMsgByOffset", "-t", "T_data", "-b", BROKER, "-i", str(queue), "-o", str(first["queue_offset"])),
            ("printMsg", "-t", "T_data", "-d", "true"), ("printMsgByQueue", "-t", "T_data", "-a", BROKER, "-i", str(queue), "-p", "true", "-d", "true"),
            ("queryCq", "-t", "T_data", "-q", str(queue), "-i", "0"), ("brokerConsumeStats", "-b", br),
            ("statsAll", "-t", "T_data"), ("producer", "-b", br), ("getConsumerConfig", "-g", "C_adm"),
            ("consumeMessage", "-t", "T_data", "-b", BROKER, "-i", str(queue), "-o", "0", "-c", "32"),
            ("allocateMQ", "-t", "T_data", "-i", "127.0.0.1@a,127.0.0.1@b"), ("updateSubGroup", "-c", CLUSTER, "-g", "G5_clone"),
        ])
        rows = table(self.ok(producer_conn))
        self.assertEqual([r[3:] for r in rows], [["JAVA", "V4_9_8"]])
        client_id = rows[0][1]
        out = self.ok(consumer_conn)
        self.assertIn("T_data               TagA || TagB", out)
        self.assertIn("ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET", out)
        offsets = {int(r[2]): (int(r[3]), int(r[4])) for r in table(self.ok(progress)) if r[0] == "T_data"}
        self.assertEqual(offsets, {q: (len(o), len(o)) for q, o in per_queue.items()})
        self.assertIn("Rebalance OK", self.ok(status))
        for run in (by_id, by_offset):
            fields = colon_pairs(self.ok(run))
            self.assertEqual((fields["Topic"], fields["Tags"], fields["Keys"], fields["Queue ID"], fields["Queue Offset"]),
                             ("T_data", "[TagB]", "[K-3]", str(queue), str(first["queue_offset"])))
            self.assertEqual(Path(fields["Message Body Path"]).read_text(), "body-3")
        # 5.x adds the index entry's key (store time@topic@K@key@id@offset) as a fourth column
        self.assertEqual([r[:3] for r in table(self.ok(by_key))], [[first["msg_id"], str(queue), str(first["queue_offset"])]])
        self.assertEqual(colon_pairs(self.ok(by_unique))["Keys"], "[K-3]")
        self.assertEqual(sorted(re.findall(r"BODY: (body-\d+)", self.ok(print_msg))), sorted(f"body-{i}" for i in range(COUNT)))
        self.assertEqual(re.findall(r"BODY: (body-\d+)", self.ok(print_queue)),
                         [f"body-{e['i']}" for e in sorted(sent, key=lambda e: e["queue_offset"]) if e["queue_id"] == queue])
        self.assertIn(f"max: {len(per_queue[queue])}, min: 0", self.ok(cq))
        rows = [r for r in table(self.ok(consume_stats)) if r[0] == "T_data"]
        self.assertEqual({(r[1], int(r[3]), int(r[4]), int(r[5])) for r in rows}, {("C_adm", q, len(o), len(o)) for q, o in per_queue.items()})
        self.assertEqual(table(self.ok(stats_all))[0][:2] + table(stats_all.out)[0][5:], ["T_data", "C_adm", str(COUNT), str(COUNT)])
        self.assertIn(f"producer group (P_adm) instance : clientId={client_id}", self.ok(producer))
        self.assertEqual(properties(self.ok(group_config))["groupName"], "C_adm")
        self.assertEqual(len(re.findall(r"BODY: body-\d+", self.ok(consume))), len(per_queue[queue]))
        allocation = json.loads(self.ok(allocate))["result"]
        self.assertEqual(sorted(q["queueId"] for qs in allocation.values() for q in qs), list(range(4)))
        self.assertIn(f"create subscription group to {br} success.", self.ok(clone_group))

        send, send_status = self.mqadmin.run_batch([  # after the checks above, which count the client's messages
            ("sendMessage", "-t", "T_data", "-p", "from-mqadmin5", "-k", "K-admin5", "-c", "TagA"),
            ("sendMsgStatus", "-b", BROKER, "-s", "64", "-c", "2")])
        self.assertIn("SEND_OK", self.ok(send))
        self.assertEqual(self.ok(send_status).count("sendStatus=SEND_OK"), 2)

        # the running consumer gets mqadmin's message; then offsets of a group with nobody online
        while not any(e["kind"] == "recv" and e["body"] == "from-mqadmin5" for e in clients.events):
            clients.read_until("recv")
        deadline = time.monotonic() + 30
        while True:  # the consumer commits what it consumed every few seconds (asked directly: no JVM per look)
            consumed = {q: (self.queue_offset(RequestCode.GET_MAX_OFFSET, {"topic": "T_data", "queueId": str(q)}),
                            self.queue_offset(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "C_adm", "topic": "T_data", "queueId": str(q)}))
                        for q in range(4)}
            if sum(b for b, _ in consumed.values()) == COUNT + 1 and all(b == c for b, c in consumed.values()):
                break
            self.assertLess(time.monotonic(), deadline, consumed)
            time.sleep(0.5)
        cloned, reset, skipped = self.mqadmin.run_batch([  # in this order, in one JVM
            ("cloneGroupOffset", "-s", "C_adm", "-d", "G5_clone", "-t", "T_data"),
            ("resetOffsetByTime", "-g", "G5_clone", "-t", "T_data", "-s", "0"),
            ("skipAccumulatedMessage", "-g", "G5_clone", "-t", "T_data")], jvms=1)
        self.assertIn("clone group offset success. srcGroup[C_adm], destGroup=[G5_clone], topic[T_data]", self.ok(cloned))
        # nobody of G5_clone is online: mqadmin sets the offsets itself (broker, consumer, by time, now)
        rows = {int(r[1]): [int(x) for x in r[2:]] for r in table(self.ok(reset)) if r[0] == BROKER}
        self.assertEqual(rows, {q: [b, b, 0, 0] for q, (b, _) in consumed.items()})
        rows = {int(r[1]): [int(x) for x in r[2:]] for r in table(self.ok(skipped)) if r[0] == BROKER}
        self.assertEqual({q: (r[0], r[1], r[3]) for q, r in rows.items()}, {q: (b, 0, b) for q, (b, _) in consumed.items()})

    def test_name_server_and_permission_commands(self) -> None:
        br, ns = self.server.broker, self.server.namesrv
        runs = self.mqadmin.run_batch([  # in this order, in one JVM
            ("updateTopic", "-c", CLUSTER, "-t", "T5_perm"),
            ("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T5_perm", "-v", f"{BROKER}:8"),
            ("updateOrderConf", "-t", "T5_perm", "-m", "get"), ("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T5_perm"),
            ("updateOrderConf", "-t", "T5_perm", "-m", "get"), ("updateTopicPerm", "-t", "T5_perm", "-c", CLUSTER, "-p", "4"),
            ("wipeWritePerm", "-b", BROKER), ("addWritePerm", "-b", BROKER),
            ("cleanExpiredCQ", "-b", br), ("deleteExpiredCommitLog", "-b", br), ("cleanUnusedTopic", "-b", br),
        ], jvms=1)
        created, kv_set, order_conf, kv_deleted, order_gone, perm, wipe, add, *cleanups = runs
        self.assertIn(f"create topic to {br} success.", self.ok(created))
        self.assertIn("create or update kv config to namespace success.", self.ok(kv_set))
        self.assertIn(f"orderConf=[{BROKER}:8]", self.ok(order_conf))
        self.assertIn("delete kv config from namespace success.", self.ok(kv_deleted))
        self.refused(order_gone, "CODE: 22  DESC: No config item, Namespace: ORDER_TOPIC_CONFIG Key: T5_perm")
        self.assertIn(f"update topic perm from 6 to 4 in {br} success.", self.ok(perm))
        count = int(re.search(rf"wipe write perm of broker\[{BROKER}\] in name server\[{re.escape(ns)}\] OK, (\d+)", self.ok(wipe)).group(1))
        self.assertGreater(count, 0)
        self.assertRegex(self.ok(add), rf"add write perm of broker\[{BROKER}\] in name server\[{re.escape(ns)}\] OK, {count}")
        for run in cleanups:
            self.assertEqual(self.ok(run).strip(), "success")


if __name__ == "__main__":
    unittest.main()
