"""Apache's own mqadmin 4.9.8 (the Java tool, from Maven Central) against a real rmqtx standalone.

Every subcommand that applies to a one-broker cluster runs in its own JVM; each output's content is
checked (topics, offsets, counts, bodies, keys, config values), and where the fixtures hold the same
command's output against the Java broker (``scenario-admin.client.jsonl``) the lines are compared
after the normalizations in ``normalize``. mqadmin exits 0 even when a command fails, so the text
is searched for exceptions and error codes too.

Not run, with the reason: the ACL subcommands (updateAclConfig, deleteAclConfig,
clusterAclConfigVersion, updateGlobalWhiteAddr): rmqtx has no ACL yet and answers their codes with 3;
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

from tests.admin.mqadmin_java import BODY_DIR, FAILURE_TEXT, MQAdmin, Run, classpath, java_binary
from testkit.standalone import REPO, Standalone
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

    def cmd(self, *args: str) -> str:
        return self.ok(self.mqadmin.run(*args))

    def same_as_java(self, name: str, out: str) -> None:
        java = java_outputs()[name]
        self.assertEqual(normalize(out, self.server.broker, self.server.namesrv), normalize(java, self.server.broker, self.server.namesrv))

    def in_parallel(self, *chains) -> None:
        """Independent sequences of commands and checks, side by side (each runs its JVMs one after another)."""
        with ThreadPoolExecutor(min(len(chains), self.mqadmin.parallel)) as pool:
            for future in [pool.submit(chain) for chain in chains]:
                future.result()

    def group_offsets(self, group: str) -> dict[int, tuple[int, int]]:
        """consumerProgress: queue -> (broker offset, consumer offset) for T_data."""
        return {int(r[2]): (int(r[3]), int(r[4])) for r in table(self.cmd("consumerProgress", "-g", group)) if r[0] == "T_data"}

    def max_offsets_total(self) -> int:
        """topicStatus: every message T_data holds."""
        return sum(int(r[3]) for r in table(self.cmd("topicStatus", "-t", "T_data")) if r[0] == BROKER)

    def broker_group_offsets(self, group: str) -> dict[int, tuple[int, int]]:
        """brokerConsumeStats: queue -> (broker offset, consumer offset) of ``group`` on T_data."""
        rows = table(self.cmd("brokerConsumeStats", "-b", self.server.broker))
        return {int(r[3]): (int(r[4]), int(r[5])) for r in rows if r[0] == "T_data" and r[1] == group}

    def wait_route_perm(self, topic: str, perm: int) -> dict:
        deadline = time.monotonic() + 20
        while True:
            route = json.loads(re.sub(r"\{(\d+):", r'{"\1":', self.cmd("topicRoute", "-t", topic)))
            if route["queueDatas"][0]["perm"] == perm or time.monotonic() > deadline:
                self.assertEqual(route["queueDatas"][0]["perm"], perm, route)
                return route


class TopicClusterConfigTest(MQAdminTestCase):
    """Topic, cluster, broker/name server config and KV commands on a broker without clients."""

    def test_topic_cluster_and_config_commands(self) -> None:
        br, ns, home = self.server.broker, self.server.namesrv, self.mqadmin.home
        out = self.cmd("updateTopic", "-c", CLUSTER, "-t", "T_admin")
        self.same_as_java("updateTopic", out)

        runs = self.mqadmin.run_all([
            ("topicList",), ("topicRoute", "-t", "T_admin"), ("topicStatus", "-t", "T_admin"), ("clusterList",),
            ("brokerStatus", "-b", br), ("getBrokerConfig", "-b", br), ("getBrokerConfig", "-c", CLUSTER),
            ("topicClusterList", "-t", "T_admin"), ("allocateMQ", "-t", "T_admin", "-i", "127.0.0.1@a,127.0.0.1@b"),
            ("getNamesrvConfig",), ("clusterList", "-m"), ("exportMetadata", "-c", CLUSTER, "-f", f"{home}/meta"),
            ("exportConfigs", "-c", CLUSTER, "-f", f"{home}/cfg"), ("exportMetrics", "-c", CLUSTER, "-f", f"{home}/metrics"),
            ("updateBrokerConfig", "-b", br, "-k", "autoCreateTopicEnable", "-v", "false"),
            ("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"),
        ])
        (topic_list, route, status, cluster, broker_status, config_b, config_c, topic_cluster, allocate, ns_config,
         cluster_m, meta, configs, metrics, update_broker, update_ns) = runs

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

        def groups() -> None:
            out = self.cmd("updateSubGroup", "-c", CLUSTER, "-g", "G_admin")
            self.same_as_java("updateSubGroup", out)
            group = properties(self.cmd("getConsumerConfig", "-g", "G_admin"))
            self.assertEqual((group["groupName"], group["consumeBroadcastEnable"], group["retryMaxTimes"]), ("G_admin", "false", "16"))
            out = self.cmd("deleteSubGroup", "-c", CLUSTER, "-g", "G_admin")
            self.assertIn(f"delete subscription group [G_admin] from broker [{br}] in cluster [{CLUSTER}] success.", out)
            self.assertIn("delete topic [%RETRY%G_admin] from NameServer success.", out)
            self.assertNotIn("groupName", self.mqadmin.run("getConsumerConfig", "-g", "G_admin").out)

        def permissions() -> None:  # per topic, then the whole broker's write permission on the name server
            out = self.cmd("updateTopicPerm", "-t", "T_admin", "-c", CLUSTER, "-p", "4")
            self.assertIn(f"update topic perm from 6 to 4 in {br} success.", out)
            self.wait_route_perm("T_admin", 4)
            out = self.cmd("wipeWritePerm", "-b", BROKER)
            count = int(re.search(rf"wipe write perm of broker\[{BROKER}\] in name server\[{re.escape(ns)}\] OK, (\d+)", out).group(1))
            self.assertEqual(count, len(topics))
            out = self.cmd("addWritePerm", "-b", BROKER)
            self.assertRegex(out, rf"add write perm of broker\[{BROKER}\] in name server\[{re.escape(ns)}\] OK, {count}")

        def kv_config() -> None:  # the name server's KV store, through updateKvConfig / updateOrderConf / deleteKvConfig
            self.cmd("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T_admin", "-v", f"{BROKER}:8")
            self.assertIn(f"orderConf=[{BROKER}:8]", self.cmd("updateOrderConf", "-t", "T_admin", "-m", "get"))
            self.assertIn("delete kv config from namespace success.", self.cmd("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T_admin"))
            self.refused(self.mqadmin.run("updateOrderConf", "-t", "T_admin", "-m", "get"), 22,
                         "No config item, Namespace: ORDER_TOPIC_CONFIG Key: T_admin")

        def cleanups() -> None:
            for run in self.mqadmin.run_all([(name, "-b", br) for name in ("cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic")]):
                self.assertEqual(self.ok(run).strip(), "success")

        self.in_parallel(groups, permissions, kv_config, cleanups)

        out = self.cmd("deleteTopic", "-c", CLUSTER, "-t", "T_admin")
        self.same_as_java("deleteTopic", out)
        self.assertNotIn("T_admin", self.cmd("topicList").split())


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
        before, path_key = self.mqadmin.run_all([
            ("getBrokerConfig", "-b", br), ("updateBrokerConfig", "-b", br, "-k", "storePathRootDir", "-v", "/tmp/x")])
        self.assertEqual(properties(self.ok(before))["autoCreateTopicEnable"], "true")
        self.refused(path_key, 16, "Can not update config storePathRootDir")  # never a path or command key (CVE-2023-33246)
        out = self.cmd("updateBrokerConfig", "-b", br, "-k", "autoCreateTopicEnable", "-v", "false")
        self.assertIn(f"update broker config success, {br}", out)
        after = properties(self.cmd("getBrokerConfig", "-b", br))
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

        runs = self.mqadmin.run_all([
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

        # sending through mqadmin (four senders side by side), then finding what was sent
        def send_and_query() -> None:
            self.assertIn("SEND_OK", self.cmd("sendMessage", "-t", "T_data", "-p", "from-mqadmin", "-k", "K-admin", "-c", "TagA"))
            rows = table(self.cmd("queryMsgByKey", "-t", "T_data", "-k", "K-admin"))
            # one row (two if a send that timed out ran again) with the id of mqadmin's producer (IPv4: 32 hex digits, IPv6: 56)
            self.assertIn(len(rows), (1, 2), rows)
            self.assertTrue(all(re.fullmatch(r"[0-9A-F]{32}([0-9A-F]{24})?", r[0]) and r[0] not in {e["msg_id"] for e in sent} for r in rows), rows)

        def send_rt() -> None:
            out = self.cmd("checkMsgSendRT", "-t", "T_data", "-a", "4", "-s", "64")
            rows = [r for r in table(out) if r[0] == BROKER]
            self.assertEqual([r[2] for r in rows[1:]], ["true"] * 3, out)
            # the first send also starts the JVM's client (routes, connections): on a starved machine it can
            # pass mqadmin's 3 s send timeout, which the tool reports as false with the time it took
            self.assertTrue(rows[0][2] == "true" or int(rows[0][3]) >= 3000, out)

        def send_status() -> None:  # sends to the topic named after the broker
            out = self.cmd("sendMsgStatus", "-b", BROKER, "-s", "64", "-c", "2")
            self.assertEqual(out.count("sendStatus=SEND_OK"), 2, out)

        def cluster_rt() -> None:  # a monitor that never ends: its first row is enough
            run = self.mqadmin.run_until(rf"^{CLUSTER}\s+{BROKER}\s+\S+\s+2\s+0", "clusterRT", "-a", "2", "-s", "64", "-i", "60")
            self.assertRegex(run.out, rf"(?m)^{CLUSTER}\s+{BROKER}\s+[\d.]+\s+2\s+0", str(run))
            self.assertIsNone(FAILURE_TEXT.search(run.out), str(run))

        self.in_parallel(send_and_query, send_rt, send_status, cluster_rt)
        while not any(e["kind"] == "recv" and e["body"] == "from-mqadmin" for e in clients.events):
            clients.read_until("recv")  # the running consumer got mqadmin's message too

        # offsets of a group with no consumer online: clone, rewind to the start, skip to the end
        total = self.max_offsets_total()  # ours, sendMessage's, checkMsgSendRT's (sendMsgStatus and clusterRT use the topic broker-a)
        self.assertGreaterEqual(total, COUNT + 1 + 3)
        consumed: dict[int, tuple[int, int]] = {}

        def all_consumed() -> None:  # the consumer commits what it consumed every few seconds
            deadline = time.monotonic() + 30
            while True:
                consumed.update(self.broker_group_offsets("C_adm"))
                if sum(b for b, _ in consumed.values()) == total and all(b == c for b, c in consumed.values()):
                    return
                self.assertLess(time.monotonic(), deadline, consumed)

        self.in_parallel(all_consumed, lambda: self.cmd("updateSubGroup", "-c", CLUSTER, "-g", "G_clone"))  # brokerConsumeStats lists subscription groups
        out = self.cmd("cloneGroupOffset", "-s", "C_adm", "-d", "G_clone", "-t", "T_data")
        self.assertIn("clone group offset success. srcGroup[C_adm], destGroup=[G_clone], topic[T_data]", out)
        self.assertEqual(self.broker_group_offsets("G_clone"), consumed)

        def offline_group() -> None:  # the broker answers CONSUMER_NOT_ONLINE; mqadmin then sets the offsets itself
            out = self.cmd("resetOffsetByTime", "-g", "G_clone", "-t", "T_data", "-s", "0")
            rows = {int(r[1]): [int(x) for x in r[2:]] for r in table(out) if r[0] == BROKER}
            self.assertEqual(rows, {q: [b, b, 0, 0] for q, (b, _) in consumed.items()})  # broker, consumer, by time, now
            # (brokerConsumeStats leaves out queues never consumed, as Java's does: it prints no offset 0)
            out = self.cmd("skipAccumulatedMessage", "-g", "G_clone", "-t", "T_data")
            rows = {int(r[1]): [int(x) for x in r[2:]] for r in table(out) if r[0] == BROKER}
            self.assertEqual({q: (r[0], r[1], r[3]) for q, r in rows.items()},  # broker, consumer (the rewound 0), now
                             {q: (b, 0, b) for q, (b, _) in consumed.items()})

        def online_group() -> None:  # the broker has the running client rewind; it consumes everything again
            out = self.cmd("resetOffsetByTime", "-g", "C_adm", "-t", "T_data", "-s", "0")
            self.assertIn("rollback consumer offset by specified group[C_adm], topic[T_data], force[true]", out)
            self.assertEqual({int(r[1]): int(r[2]) for r in table(out) if r[0] == BROKER}, {q: 0 for q in range(4)})
            deadline = time.monotonic() + 30
            while sum(e["kind"] == "recv" and e["body"] == "body-0" for e in clients.events) < 2:
                self.assertLess(time.monotonic(), deadline, "the consumer did not consume again after resetOffsetByTime")
                clients.read_until("recv", deadline - time.monotonic())

        self.in_parallel(offline_group, online_group)

if __name__ == "__main__":
    unittest.main()
