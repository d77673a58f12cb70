"""Apache's own mqadmin 4.9.8 (the Java tool, from Maven Central) against a real rmqtx standalone.

Every subcommand that applies to a one-broker cluster runs, many to a JVM (``MQAdmin.run_batch`` and
``run_chains``, tests/admin/MQAdminBatch.java: a JVM start costs about a second of CPU, a subcommand
against a local broker tens of milliseconds): independent reads spread over JVMs side by side,
commands that depend on each other one after another in one JVM (a create before what reads it,
deletes last). Only clusterRT, a monitor that never ends by itself, gets a JVM of its own
(``run_until`` stops it once its first row is out). Each output's content is checked (topics,
offsets, counts, bodies, keys, config values), and where the fixtures hold the same command's output
against the Java broker (``scenario-admin.client.jsonl``) the lines are compared after the
normalizations in ``normalize``. mqadmin exits 0 even when a command fails, so the text is searched
for exceptions and error codes too.

Not run, with the reason: the ACL subcommands (updateAclConfig, deleteAccessConfig,
clusterAclConfigVersion, updateGlobalWhiteAddr): they need a broker with ACL on, and
tests/security/test_acl.py runs them (4.9.8's tool) against one;
startMonitoring: a daemon that only logs; queryMsgTraceById: it decodes trace records that only a
client with message tracing on writes, and neither rmqtx's client nor mqadmin's sendMessage writes any;
getKvConfig: 4.9.8 has no such subcommand (the KV read is checked through updateOrderConf -m get).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from tests.admin.mqadmin_java import BODY_DIR, FAILURE_TEXT, MQAdmin, Run, classpath, java_binary
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import REPO, Standalone, call
from tests.fixtures import records
from tests.replay.normalize import RUNTIME_ADDED

CLUSTER = "DefaultCluster"
BROKER = "broker-a"
JAVA_BROKER = "127.0.0.1:20911"
JAVA_NAMESRV = "127.0.0.1:19870"
COUNT = 10  # messages the client process sends


def java_outputs() -> dict[str, str]:
    """Apache mqadmin's stdout against the Java broker, by subcommand name."""
    return {r["argv"][1]: r["stdout"] for r in records("scenario-admin.client.jsonl") if r.get("kind") == "CMD"}


def normalize(text: str, broker: str, namesrv: str) -> str:
    """What may differ between the captured Java run and this one, each for a stated reason.

    - the broker and name server addresses: free ports here, 20911/19870 in the capture;
    - trailing blanks at line ends: the column padding of empty last columns (same format strings);
    Everything else stays and must match.
    """
    text = text.replace(broker, JAVA_BROKER).replace(namesrv, JAVA_NAMESRV)
    return "\n".join(line.rstrip() for line in text.splitlines())


def table(text: str) -> list[list[str]]:
    """Rows of a whitespace-aligned mqadmin table, header lines (#...) and blank lines left out."""
    return [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def properties(text: str) -> dict[str, str]:
    """``key = value`` lines (getBrokerConfig, getConsumerConfig, getNamesrvConfig)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+=  ?(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def colon_pairs(text: str) -> dict[str, str]:
    """``key : value`` lines (brokerStatus) and ``Key:   value`` lines (queryMsgById)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\S[^:]*?)\s*: ?(.*)$", line)
        if m:
            out[m.group(1).strip()] = m.group(2).strip()
    return out


class MQAdminTestCase(unittest.TestCase):
    server_conf: dict[str, str] = {}

    def setUp(self) -> None:
        java_binary(), classpath()  # skip (or fail in CI) before starting anything
        self.server = Standalone({"brokerClusterName": CLUSTER, "brokerName": BROKER, **self.server_conf}).start()
        self.addCleanup(self.server.close)
        self.mqadmin = MQAdmin(self.server.namesrv)
        self.addCleanup(self.mqadmin.close)

    def ok(self, run: Run) -> str:
        """The command succeeded: exit 0 and no exception or error code anywhere in its output."""
        self.assertEqual(run.code, 0, str(run))
        self.assertIsNone(FAILURE_TEXT.search(run.text), str(run))
        return run.out

    def refused(self, run: Run, code: int, remark: str) -> None:
        """mqadmin reported the broker's or name server's refusal (it still exits 0)."""
        self.assertIn(f"CODE: {code}", run.text, str(run))
        self.assertIn(remark, run.text, str(run))

    def same_as_java(self, name: str, out: str) -> None:
        java = java_outputs()[name]
        self.assertEqual(normalize(out, self.server.broker, self.server.namesrv), normalize(java, self.server.broker, self.server.namesrv))

    def in_parallel(self, *steps: Callable[[], Any]) -> list:
        """Independent steps side by side; their results in the given order."""
        with ThreadPoolExecutor(len(steps)) as pool:
            return [future.result() for future in [pool.submit(step) for step in steps]]

    def group_offsets(self, run: Run, group: str) -> dict[int, tuple[int, int]]:
        """brokerConsumeStats: queue -> (broker offset, consumer offset) of ``group`` on T_data."""
        return {int(r[3]): (int(r[4]), int(r[5])) for r in table(self.ok(run)) if r[0] == "T_data" and r[1] == group}

    def queue_offset(self, code: RequestCode, fields: dict[str, str]) -> int | None:
        """An offset asked of the broker directly (no JVM per look); None while it has none (code 22)."""
        response = call(self.server.broker, RemotingCommand.request(code, fields))
        return int(response.ext_fields["offset"]) if response.code == 0 and response.ext_fields else None


class TopicClusterConfigTest(MQAdminTestCase):
    """Topic, cluster, broker/name server config and KV commands on a broker without clients."""

    def test_topic_cluster_and_config_commands(self) -> None:
        br, ns, home = self.server.broker, self.server.namesrv, self.mqadmin.home
        # two JVMs side by side, each running its chain in this order: T_admin's life (created first; read,
        # exported, its group and permissions changed; deleted last), and the cluster, config, KV and
        # cleanup commands, which neither read T_admin's route nor change what the first chain reads
        topic_chain, config_chain = self.mqadmin.run_chains([
            ("updateTopic", "-c", CLUSTER, "-t", "T_admin"),
            ("topicList",), ("topicRoute", "-t", "T_admin"), ("topicStatus", "-t", "T_admin"), ("topicClusterList", "-t", "T_admin"),
            ("allocateMQ", "-t", "T_admin", "-i", "127.0.0.1@a,127.0.0.1@b"), ("exportMetadata", "-c", CLUSTER, "-f", f"{home}/meta"),
            ("exportConfigs", "-c", CLUSTER, "-f", f"{home}/cfg"), ("exportMetrics", "-c", CLUSTER, "-f", f"{home}/metrics"),
            # a subscription group's life, after the exports (they read the groups)
            ("updateSubGroup", "-c", CLUSTER, "-g", "G_admin"), ("getConsumerConfig", "-g", "G_admin"),
            ("deleteSubGroup", "-c", CLUSTER, "-g", "G_admin"), ("getConsumerConfig", "-g", "G_admin"),
            # per topic, then the whole broker's write permission on the name server
            ("updateTopicPerm", "-t", "T_admin", "-c", CLUSTER, "-p", "4"), ("topicRoute", "-t", "T_admin"),
            ("wipeWritePerm", "-b", BROKER), ("addWritePerm", "-b", BROKER),
            ("deleteTopic", "-c", CLUSTER, "-t", "T_admin"), ("topicList",),
        ], [
            ("clusterList",), ("brokerStatus", "-b", br), ("getBrokerConfig", "-b", br), ("getBrokerConfig", "-c", CLUSTER),
            ("getNamesrvConfig",), ("clusterList", "-m"),
            ("updateBrokerConfig", "-b", br, "-k", "autoCreateTopicEnable", "-v", "false"),
            ("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"),
            # the name server's KV store, through updateKvConfig / updateOrderConf / deleteKvConfig
            ("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T_admin", "-v", f"{BROKER}:8"), ("updateOrderConf", "-t", "T_admin", "-m", "get"),
            ("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T_admin"), ("updateOrderConf", "-t", "T_admin", "-m", "get"),
            ("cleanExpiredCQ", "-b", br), ("deleteExpiredCommitLog", "-b", br), ("cleanUnusedTopic", "-b", br),
        ])
        (created, topic_list, route, status, topic_cluster, allocate, meta, configs, metrics, group_created, group_config,
         group_deleted, group_gone, perm, route_after, wipe, add, deleted, topic_list_after) = topic_chain
        (cluster, broker_status, config_b, config_c, ns_config, cluster_m, update_broker, update_ns,
         kv_set, order_conf, kv_deleted, order_gone, *cleanups) = config_chain
        self.same_as_java("updateTopic", self.ok(created))

        topics = set(self.ok(topic_list).split())
        system = {"TBW102", "SELF_TEST_TOPIC", CLUSTER, BROKER, "BenchmarkTest", "OFFSET_MOVED_EVENT",
                  "SCHEDULE_TOPIC_XXXX", f"{CLUSTER}_REPLY_TOPIC"}
        self.assertEqual(topics, system | {"T_admin"})
        java_topics = set(java_outputs()["topicList"].split())
        # the Java capture also lists what its earlier scenarios created (T_fix, %RETRY%C_fix, the half topic...)
        self.assertLessEqual(system | {"T_admin"}, java_topics)

        self.same_as_java("topicRoute", self.ok(route))
        self.same_as_java("topicStatus", self.ok(status))

        rows = table(self.ok(cluster))
        self.assertEqual(len(rows), 1, cluster)
        java_rows = table(java_outputs()["clusterList"])
        # cluster, broker, id, address, version, in/out TPS, PCWait; #Hour and #SPACE are the machine's disk
        self.assertEqual(rows[0][:8], [CLUSTER, BROKER, "0", br, "V4_9_8", "0.00(0,0ms)", "0.00(0,0ms)", "0"])
        self.assertEqual(java_rows[0][:3] + java_rows[0][4:8], rows[0][:3] + rows[0][4:8])
        self.assertEqual(self.ok(cluster).splitlines()[0], java_outputs()["clusterList"].splitlines()[0])

        status_keys = colon_pairs(self.ok(broker_status))
        java_keys = colon_pairs(java_outputs()["brokerStatus"])
        # path-named ratio keys and scheduleMessageOffset_<level> (only after delayed messages) are data-dependent
        varying = re.compile(r"^(commitLogDiskRatio_|scheduleMessageOffset_)")
        # and 5.x's timer keys, which 4.9.8 has not (tests/replay/normalize.py RUNTIME_ADDED)
        self.assertEqual({k for k in status_keys if not varying.match(k) and k not in RUNTIME_ADDED},
                         {k for k in java_keys if not varying.match(k)})
        self.assertEqual(status_keys["brokerVersionDesc"], "V4_9_8")
        self.assertEqual(status_keys["msgPutTotalTodayNow"], "0")

        config = properties(self.ok(config_b))
        java_config = properties(java_outputs()["getBrokerConfig"])
        self.assertEqual(set(config) - RMQTX_ONLY_CONFIG, set(java_config))
        for key, value in java_config.items():
            if key not in CAPTURE_SPECIFIC_CONFIG:
                self.assertEqual(config[key], value, key)
        self.assertEqual((config["brokerName"], config["brokerClusterName"], config["listenPort"]),
                         (BROKER, CLUSTER, br.rsplit(":", 1)[1]))
        self.assertEqual(config["namesrvAddr"], ns)
        self.assertIn(f"============Master: {br}============", self.ok(config_c))
        self.assertEqual(properties(config_c.out), config)

        self.assertEqual(self.ok(topic_cluster).split(), [CLUSTER])
        allocation = json.loads(self.ok(allocate))["result"]
        self.assertEqual(sorted(q["queueId"] for qs in allocation.values() for q in qs), list(range(8)))
        self.assertEqual([len(qs) for qs in allocation.values()], [4, 4])

        ns_props = properties(self.ok(ns_config))
        self.assertEqual(ns_props["listenPort"], ns.rsplit(":", 1)[1])
        self.assertEqual(ns_props["enableUpdateNamesrvConfig"], "false")

        self.assertEqual(table(self.ok(cluster_m)), [[CLUSTER, BROKER, "0", "0", "0", "0"]])
        metadata = json.loads((home / "meta" / "metadata.json").read_text())
        self.assertIn("T_admin", metadata["topicConfigTable"])
        self.assertIn("export", self.ok(meta))
        exported = json.loads((home / "cfg" / "configs.json").read_text())
        self.ok(configs)
        self.assertEqual(exported["clusterScale"], {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0})
        self.assertEqual(exported["brokerConfigs"][BROKER]["brokerClusterName"], CLUSTER)
        self.ok(metrics)
        report = json.loads((home / "metrics" / "metrics.json").read_text())["evaluateReport"][BROKER]
        self.assertEqual(report["runtimeVersion"]["rocketmqVersion"], "V4_9_8")
        self.assertEqual(report["runtimeEnv"]["cpuNum"], str(os.cpu_count()))  # Java reads clientCallbackExecutorThreads

        self.refused(update_broker, 16, "enableUpdateBrokerConfig is false")
        self.refused(update_ns, 16, "enableUpdateNamesrvConfig=false")

        self.same_as_java("updateSubGroup", self.ok(group_created))
        group = properties(self.ok(group_config))
        self.assertEqual((group["groupName"], group["consumeBroadcastEnable"], group["retryMaxTimes"]), ("G_admin", "false", "16"))
        out = self.ok(group_deleted)
        self.assertIn(f"delete subscription group [G_admin] from broker [{br}] in cluster [{CLUSTER}] success.", out)
        self.assertIn("delete topic [%RETRY%G_admin] from NameServer success.", out)
        self.assertNotIn("groupName", group_gone.out)

        self.assertIn(f"update topic perm from 6 to 4 in {br} success.", self.ok(perm))
        # the next subcommand of the chain already sees it: the standalone's NameServer shares the broker's
        # reactor and reads the broker's (oneway) registration before the next client's request
        self.assertEqual(json.loads(re.sub(r"\{(\d+):", r'{"\1":', self.ok(route_after)))["queueDatas"][0]["perm"], 4, route_after)
        count = int(re.search(rf"wipe write perm of broker\[{BROKER}\] in name server\[{re.escape(ns)}\] OK, (\d+)", self.ok(wipe)).group(1))
        self.assertEqual(count, len(topics))
        self.assertRegex(self.ok(add), rf"add write perm of broker\[{BROKER}\] in name server\[{re.escape(ns)}\] OK, {count}")

        self.ok(kv_set)
        self.assertIn(f"orderConf=[{BROKER}:8]", self.ok(order_conf))
        self.assertIn("delete kv config from namespace success.", self.ok(kv_deleted))
        self.refused(order_gone, 22, "No config item, Namespace: ORDER_TOPIC_CONFIG Key: T_admin")

        for run in cleanups:
            self.assertEqual(self.ok(run).strip(), "success")

        self.same_as_java("deleteTopic", self.ok(deleted))
        self.assertNotIn("T_admin", self.ok(topic_list_after).split())


#: Keys rmqtx reports that the Java broker has no such setting for.
RMQTX_ONLY_CONFIG = frozenset({"listenAddress", "channelExpiredTimeout", "enableUpdateBrokerConfig", "aclFilePath"})
#: Keys the capture's broker.conf set, or that name its machine (paths, ports, home).
CAPTURE_SPECIFIC_CONFIG = frozenset({
    "namesrvAddr", "listenPort", "haListenPort", "storePathRootDir", "storePathCommitLog", "rocketmqHome",
    "brokerIP1", "brokerIP2", "diskMaxUsedSpaceRatio", "fileReservedTime", "mappedFileSizeConsumeQueue",
    "transactionCheckInterval", "transactionTimeOut", "mappedFileSizeCommitLog", "deleteWhen", "flushDiskType",
    # thread counts Java derives from the machine's cores
    "pullMessageThreadPoolNums", "sendMessageThreadPoolNums", "processReplyMessageThreadPoolNums",
    "queryMessageThreadPoolNums", "adminBrokerThreadPoolNums", "clientManageThreadPoolNums",
    "consumerManageThreadPoolNums", "heartbeatThreadPoolNums", "endTransactionThreadPoolNums",
    "putMessageFutureThreadPoolNums", "serverSelectorThreads", "serverWorkerThreads",
})


class UpdateBrokerConfigAllowedTest(MQAdminTestCase):
    server_conf = {"enableUpdateBrokerConfig": "true"}

    def test_update_broker_config_when_enabled(self) -> None:
        br = self.server.broker
        [(before, path_key, update, after_run)] = self.mqadmin.run_chains([  # in this order, in one JVM
            ("getBrokerConfig", "-b", br), ("updateBrokerConfig", "-b", br, "-k", "storePathRootDir", "-v", "/tmp/x"),
            ("updateBrokerConfig", "-b", br, "-k", "autoCreateTopicEnable", "-v", "false"), ("getBrokerConfig", "-b", br)])
        self.assertEqual(properties(self.ok(before))["autoCreateTopicEnable"], "true")
        self.refused(path_key, 16, "Can not update config storePathRootDir")  # never a path or command key (CVE-2023-33246)
        self.assertIn(f"update broker config success, {br}", self.ok(update))
        after = properties(self.ok(after_run))
        self.assertEqual((after["autoCreateTopicEnable"], after["storePathRootDir"]), ("false", properties(before.out)["storePathRootDir"]))


class Clients:
    """tests/admin/mqadmin_clients.py: a producer and a push consumer that stay connected."""

    def __init__(self, namesrv: str, home: str) -> None:
        argv = [sys.executable, "-m", "tests.admin.mqadmin_clients", namesrv, "T_data", "P_adm", "C_adm", str(COUNT), home]
        self.proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={"HOME": home, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
        self.events: list[dict] = []

    def read_until(self, kind: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                event = json.loads(line)
                self.events.append(event)
                if event["kind"] == kind:
                    return event
        raise AssertionError(f"client process gave no {kind!r}: {self.events[-5:]}\n{self.proc.stderr.read()[-3000:] if self.proc.poll() is not None else ''}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            pipe.close()


class MessageGroupOffsetTest(MQAdminTestCase):
    """Connection, progress, status, message query, stats and offset commands around live clients."""

    def test_message_group_and_offset_commands(self) -> None:
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

        runs = self.mqadmin.run_batch([  # reads only, independent of each other: their order does not matter
            ("producerConnection", "-g", "P_adm", "-t", "T_data"), ("consumerConnection", "-g", "C_adm"),
            ("consumerProgress", "-g", "C_adm"), ("consumerProgress",), ("consumerProgress", "-g", "C_adm", "-s", "true"),
            ("consumerStatus", "-g", "C_adm"), ("queryMsgById", "-i", first["offset_msg_id"]),
            ("queryMsgByKey", "-t", "T_data", "-k", "K-3"), ("queryMsgByUniqueKey", "-t", "T_data", "-i", first["msg_id"]),
            ("queryMsgByOffset", "-t", "T_data", "-b", BROKER, "-i", str(queue), "-o", str(first["queue_offset"])),
            ("printMsg", "-t", "T_data", "-d", "true"), ("printMsgByQueue", "-t", "T_data", "-a", BROKER, "-i", str(queue), "-p", "true", "-d", "true"),
            ("queryCq", "-t", "T_data", "-q", str(queue), "-i", "0"), ("brokerConsumeStats", "-b", br),
            ("statsAll", "-t", "T_data"), ("producer", "-b", br), ("topicList", "-c"), ("getConsumerConfig", "-g", "C_adm"),
            ("consumeMessage", "-t", "T_data", "-b", BROKER, "-i", str(queue), "-o", "0", "-c", "32"),
        ])
        (producer_conn, consumer_conn, progress, progress_all, progress_s, status, by_id, by_key, by_unique, by_offset,
         print_msg, print_queue, cq, consume_stats, stats_all, producer, topic_list_c, group_config, consume) = runs

        rows = table(self.ok(producer_conn))
        self.assertEqual(len(rows), 1, producer_conn)
        self.assertEqual(rows[0][3:], ["JAVA", "V4_9_8"])  # rmqtx's client presents itself as Java 4.9.8
        client_id = rows[0][1]

        out = self.ok(consumer_conn)
        self.assertIn("T_data               TagA || TagB", out)
        self.assertIn("%RETRY%C_adm         *", out)
        self.assertIn("MessageModel: CLUSTERING", out)
        self.assertIn("ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET", out)
        consumer_id = table(out.split("Below is subscription")[0])[0][0]

        java_progress = java_outputs()["consumerProgress"]
        out = self.ok(progress)
        self.assertEqual(out.splitlines()[0], java_progress.splitlines()[0])
        rows = table(out)
        offsets = {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows if r[0] == "T_data"}
        self.assertEqual(offsets, {q: (len(o), len(o), 0) for q, o in per_queue.items()})
        # the retry queue shows up once the consumer commits an offset for it (after its first long poll ends)
        self.assertLessEqual({r[0] for r in rows if r[0].startswith("%")}, {"%RETRY%C_adm"})
        self.assertIn("Diff Total: 0", out)
        footer = lambda text: [line.split(":")[0] for line in text.splitlines() if re.match(r"^[A-Z][A-Za-z ]*: ", line)]  # noqa: E731
        self.assertEqual(footer(out), footer(java_progress))  # Consume TPS, Diff Total

        rows = table(self.ok(progress_all))
        self.assertEqual(rows, [["C_adm", "1", "V4_9_8", "PUSH", "CLUSTERING", "0", "0"]])
        rows = [r for r in table(self.ok(progress_s)) if r[0] == "T_data"]
        self.assertEqual([r[5] for r in rows], [client_id.split("@")[0]] * 4)  # -s: the IP of the client holding each queue

        out = self.ok(status)
        self.assertIn(consumer_id, out)
        self.assertIn("Same subscription in the same group of consumer", out)
        self.assertIn("Rebalance OK", out)
        info_file = self.mqadmin.home / table(out.split("Same subscription")[0])[0][3]
        info = info_file.read_text()
        self.assertRegex(info, r"Topic: T_data\s+ClassFilter: false\s+SubExpression: TagA \|\| TagB")
        for q, o in per_queue.items():
            self.assertRegex(info, rf"(?m)^T_data\s+{BROKER}\s+{q}\s+{len(o)}\s*$")

        for run in (by_id, by_offset):
            fields = colon_pairs(self.ok(run))
            self.assertEqual((fields["Topic"], fields["Tags"], fields["Keys"], fields["Queue ID"], fields["Queue Offset"]),
                             ("T_data", "[TagB]", "[K-3]", str(queue), str(first["queue_offset"])))
            self.assertEqual(fields["OffsetID"], first["offset_msg_id"])
            self.assertIn("seq=3", fields["Properties"])
            self.assertEqual(fields["Store Host"], br)
            self.assertEqual(Path(fields["Message Body Path"]).read_text(), "body-3")
            self.assertIn("MessageTrack [consumerGroup=C_adm, trackType=CONSUMED", run.out)
        rows = table(self.ok(by_key))
        self.assertEqual(rows, [[first["msg_id"], str(queue), str(first["queue_offset"])]])
        fields = colon_pairs(self.ok(by_unique))
        self.assertEqual((fields["Topic"], fields["Keys"], fields["Queue Offset"]), ("T_data", "[K-3]", str(first["queue_offset"])))
        self.assertEqual(Path(fields["Message Body Path"]).read_text(), "body-3")

        bodies = re.findall(r"BODY: (body-\d+)", self.ok(print_msg))
        self.assertEqual(sorted(bodies), sorted(f"body-{i}" for i in range(COUNT)))
        bodies = re.findall(r"BODY: (body-\d+)", self.ok(print_queue))
        self.assertEqual(bodies, [f"body-{e['i']}" for e in sorted(sent, key=lambda e: e["queue_offset"]) if e["queue_id"] == queue])

        out = self.ok(cq)
        self.assertIn(f"max: {len(per_queue[queue])}, min: 0", out)
        physical = [int(e["offset_msg_id"][16:], 16) for e in sorted(sent, key=lambda e: e["queue_offset"]) if e["queue_id"] == queue]
        self.assertEqual([int(x) for x in re.findall(r"physicOffset=(\d+)", out)], physical)

        out = self.ok(consume_stats)
        rows = [r for r in table(out) if r[0] == "T_data"]
        self.assertEqual({(r[1], int(r[3]), int(r[4]), int(r[5]), int(r[6])) for r in rows},
                         {("C_adm", q, len(o), len(o), 0) for q, o in per_queue.items()})
        self.assertIn("Diff Total: 0", out)

        rows = table(self.ok(stats_all))
        self.assertEqual(rows, [["T_data", "C_adm", "0", rows[0][3], rows[0][4], str(COUNT), str(COUNT)]])

        out = self.ok(producer)
        self.assertIn(f"producer group (P_adm) instance : clientId={client_id}", out)
        self.assertIn(["DefaultCluster", "T_data", "C_adm"], table(self.ok(topic_list_c)))
        self.assertEqual(properties(self.ok(group_config))["groupName"], "C_adm")
        out = self.ok(consume)
        self.assertIn("Consume ok", out)
        self.assertEqual(len(re.findall(r"BODY: body-\d+", out)), len(per_queue[queue]))

        # sending through mqadmin, then finding what was sent: one JVM, in this order. Beside it clusterRT, a
        # monitor that never ends by itself, keeps a JVM of its own: run_until stops it once its first row is out
        def sends() -> list[Run]:
            return self.mqadmin.run_chains([
                ("sendMessage", "-t", "T_data", "-p", "from-mqadmin", "-k", "K-admin", "-c", "TagA"),
                ("queryMsgByKey", "-t", "T_data", "-k", "K-admin"),
                ("checkMsgSendRT", "-t", "T_data", "-a", "4", "-s", "64"),
                ("sendMsgStatus", "-b", BROKER, "-s", "64", "-c", "2"),  # sends to the topic named after the broker
            ])[0]

        def cluster_rt() -> Run:
            return self.mqadmin.run_until(rf"^{CLUSTER}\s+{BROKER}\s+\S+\s+2\s+0", "clusterRT", "-a", "2", "-s", "64", "-i", "60")

        (send, by_key_admin, send_rt, send_status), rt = self.in_parallel(sends, cluster_rt)
        self.assertIn("SEND_OK", self.ok(send))
        rows = table(self.ok(by_key_admin))
        # one row (two if a send that timed out ran again) with the id of mqadmin's producer (IPv4: 32 hex digits, IPv6: 56)
        self.assertIn(len(rows), (1, 2), rows)
        self.assertTrue(all(re.fullmatch(r"[0-9A-F]{32}([0-9A-F]{24})?", r[0]) and r[0] not in {e["msg_id"] for e in sent} for r in rows), rows)
        out = self.ok(send_rt)
        rows = [r for r in table(out) if r[0] == BROKER]
        self.assertEqual([r[2] for r in rows[1:]], ["true"] * 3, out)
        # the first send also starts the JVM's client (routes, connections): on a starved machine it can
        # pass mqadmin's 3 s send timeout, which the tool reports as false with the time it took
        self.assertTrue(rows[0][2] == "true" or int(rows[0][3]) >= 3000, out)
        out = self.ok(send_status)
        self.assertEqual(out.count("sendStatus=SEND_OK"), 2, out)
        self.assertRegex(rt.out, rf"(?m)^{CLUSTER}\s+{BROKER}\s+[\d.]+\s+2\s+0", str(rt))
        self.assertIsNone(FAILURE_TEXT.search(rt.out), str(rt))

        while not any(e["kind"] == "recv" and e["body"] == "from-mqadmin" for e in clients.events):
            clients.read_until("recv")  # the running consumer got mqadmin's message too

        # the consumer commits what it consumed every few seconds: wait for it asking the broker directly
        # (no JVM per look); brokerConsumeStats below then shows it
        deadline = time.monotonic() + 30
        while True:
            committed = {q: (self.queue_offset(RequestCode.GET_MAX_OFFSET, {"topic": "T_data", "queueId": str(q)}),
                             self.queue_offset(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "C_adm", "topic": "T_data", "queueId": str(q)}))
                         for q in range(4)}
            if all(b == c for b, c in committed.values()):
                break
            self.assertLess(time.monotonic(), deadline, committed)
            time.sleep(0.5)

        # offsets of a group with no consumer online (clone, rewind to the start, skip to the end), then the
        # online group's rewind: one JVM, in this order
        [(topic_status, stats, clone_group, cloned, clone_stats, offline_reset, skipped, online_reset)] = self.mqadmin.run_chains([
            ("topicStatus", "-t", "T_data"), ("brokerConsumeStats", "-b", br),
            ("updateSubGroup", "-c", CLUSTER, "-g", "G_clone"),  # brokerConsumeStats lists subscription groups
            ("cloneGroupOffset", "-s", "C_adm", "-d", "G_clone", "-t", "T_data"), ("brokerConsumeStats", "-b", br),
            ("resetOffsetByTime", "-g", "G_clone", "-t", "T_data", "-s", "0"), ("skipAccumulatedMessage", "-g", "G_clone", "-t", "T_data"),
            ("resetOffsetByTime", "-g", "C_adm", "-t", "T_data", "-s", "0"),
        ])
        # every message T_data holds: ours, sendMessage's, checkMsgSendRT's (sendMsgStatus and clusterRT use the topic broker-a)
        total = sum(int(r[3]) for r in table(self.ok(topic_status)) if r[0] == BROKER)
        self.assertGreaterEqual(total, COUNT + 1 + 3)
        consumed = self.group_offsets(stats, "C_adm")
        self.assertEqual(sum(b for b, _ in consumed.values()), total, consumed)
        self.assertTrue(all(b == c for b, c in consumed.values()), consumed)
        self.ok(clone_group)
        self.assertIn("clone group offset success. srcGroup[C_adm], destGroup=[G_clone], topic[T_data]", self.ok(cloned))
        self.assertEqual(self.group_offsets(clone_stats, "G_clone"), consumed)

        # the broker answers CONSUMER_NOT_ONLINE; mqadmin then sets the offsets itself
        reset_rows = {int(r[1]): [int(x) for x in r[2:]] for r in table(self.ok(offline_reset)) if r[0] == BROKER}
        self.assertEqual(reset_rows, {q: [b, b, 0, 0] for q, (b, _) in consumed.items()})  # broker, consumer, by time, now
        # (brokerConsumeStats leaves out queues never consumed, as Java's does: it prints no offset 0)
        skip_rows = {int(r[1]): [int(x) for x in r[2:]] for r in table(self.ok(skipped)) if r[0] == BROKER}
        self.assertEqual({q: (r[0], r[1], r[3]) for q, r in skip_rows.items()},  # broker, consumer (the rewound 0), now
                         {q: (b, 0, b) for q, (b, _) in consumed.items()})

        # the broker has the running client rewind; it consumes everything again
        out = self.ok(online_reset)
        self.assertIn("rollback consumer offset by specified group[C_adm], topic[T_data], force[true]", out)
        self.assertEqual({int(r[1]): int(r[2]) for r in table(out) if r[0] == BROKER}, {q: 0 for q in range(4)})
        deadline = time.monotonic() + 30
        while sum(e["kind"] == "recv" and e["body"] == "body-0" for e in clients.events) < 2:
            self.assertLess(time.monotonic(), deadline, "the consumer did not consume again after resetOffsetByTime")
            clients.read_until("recv", deadline - time.monotonic())


if __name__ == "__main__":
    unittest.main()
