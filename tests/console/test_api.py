"""The console's JSON endpoints and /metrics over HTTP, against a real standalone (pytest and trial)."""

from __future__ import annotations

import time
import unittest

from prometheus_client.parser import text_string_to_metric_families

from rmqtx.broker.console_settings import ConsoleConfig
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from tests.console.support import (
    OnlineConsumer,
    basic,
    commit_offset,
    console_server,
    get_json,
    http,
    post_json,
    query_offset,
    send_back_to_dlq,
    wait_for,
)
from testkit.ha import pull, stored_offset
from testkit.standalone import call


def _route_code(server, topic: str) -> int:
    return call(server.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).code


#: The labels Apache 5.x's broker puts on every OpenTelemetry sample (no metricsLabel, metricsInDelta off).
BROKER_LABELS = {"otel_scope_name": "broker-meter", "node_type": "broker", "cluster": "DefaultCluster", "node_id": "broker-a"}


def otel(by_name: dict[str, list], name: str, **labels: str) -> list:
    """The samples of a 5.x series whose labels include ``labels`` (each also checked for the broker's own)."""
    found = [s for s in by_name.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    for sample in found:
        assert {k: sample.labels.get(k) for k in BROKER_LABELS} == BROKER_LABELS, sample
    return found


def samples(base: str) -> dict[str, list]:
    """/metrics parsed back: metric name -> its samples."""
    status, headers, raw = http(base, "GET", "metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4"), (status, headers)
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(raw.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


class _ServerTest(unittest.TestCase):
    admin = True
    acl = False

    def setUp(self) -> None:
        if self.acl:
            from tests.security.acl_support import acl_server

            self.server = console_server(self.admin, server=acl_server())
        else:
            self.server = console_server(self.admin)
        self.server.start()
        self.base = self.server.console

    def tearDown(self) -> None:
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        self.assertTrue(clean, f"standalone did not shut down cleanly\n{log}")


class ConsoleTopicsAndMessagesTest(_ServerTest):
    def test_broker_topics_send_and_search(self) -> None:
        status, who = get_json(self.base, "whoami")
        self.assertEqual((status, who["adminEnable"], who["aclEnable"]), (200, True, False))
        status, cluster = get_json(self.base, "cluster")
        self.assertEqual(status, 200)
        self.assertEqual((cluster["broker"]["version"], cluster["broker"]["address"]), ("V4_9_8", self.server.broker))
        self.assertEqual(cluster["broker"]["role"], "ASYNC_MASTER")
        mine = [b for b in cluster["brokers"] if b["self"]]
        self.assertEqual([(b["address"], b["role"]) for b in mine], [(self.server.broker, "MASTER")])

        status, created = post_json(self.base, "topic", {"topic": "ConsoleT", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6})
        self.assertEqual((status, created), (200, {"topic": "ConsoleT", "created": True}))
        wait_for(lambda: _route_code(self.server, "ConsoleT") == ResponseCode.SUCCESS, 5, "the route of ConsoleT")
        topics = {t["topic"]: t for t in get_json(self.base, "topics")[1]["topics"]}
        self.assertEqual((topics["ConsoleT"]["readQueueNums"], topics["ConsoleT"]["writeQueueNums"]), (3, 3))
        self.assertFalse(topics["ConsoleT"]["system"])
        self.assertTrue(topics["TBW102"]["system"])

        status, sent = post_json(self.base, "send", {"topic": "ConsoleT", "tags": "TagA", "keys": "k1 k2", "body": "h\u00e9llo", "queueId": 2})
        self.assertEqual(status, 200, sent)
        self.server.send_to_queue("ConsoleT", 1, "plain")
        for query in ({"by": "id", "id": sent["offsetMsgId"]}, {"by": "id", "id": sent["msgId"], "topic": "ConsoleT"},
                      {"by": "key", "topic": "ConsoleT", "key": "k2"},
                      {"by": "offset", "topic": "ConsoleT", "queueId": sent["queueId"], "offset": sent["queueOffset"]}):
            status, found = get_json(self.base, "messages", **query)
            self.assertEqual(status, 200, found)
            self.assertEqual(len(found["messages"]), 1, query)
            message = found["messages"][0]
            self.assertEqual((message["msgId"], message["offsetMsgId"]), (sent["msgId"], sent["offsetMsgId"]))
            self.assertEqual((message["bodyText"], message["bodyHex"]), ("h\u00e9llo", "h\u00e9llo".encode().hex()))
            self.assertEqual((message["properties"]["TAGS"], message["properties"]["KEYS"]), ("TagA", "k1 k2"))
        status, found = get_json(self.base, "messages", by="offset", topic="ConsoleT", queueId=1, offset=0)
        self.assertEqual([m["bodyText"] for m in found["messages"]], ["plain"])
        status, topic = get_json(self.base, "topic", topic="ConsoleT")
        self.assertEqual((status, topic["messages"]), (200, 2))
        self.assertGreater(topic["tps"], 0)
        self.assertGreaterEqual(get_json(self.base, "broker")[1]["putTotal"], 2)

        # refusals and bad requests answer with a status and a reason
        self.assertEqual(get_json(self.base, "messages", by="key", key="k1")[0], 400)
        self.assertEqual(get_json(self.base, "messages", by="offset", topic="ConsoleT", queueId="x", offset=0)[0], 400)
        self.assertEqual(get_json(self.base, "topic", topic="Nope")[0], 404)
        self.assertEqual(get_json(self.base, "nothing")[0], 404)
        status, _, _ = http(self.base, "POST", "api/topic", body=b"topic=X", headers={"content-type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 415)
        self.assertEqual(http(self.base, "POST", "api/topic", body=b"{not json")[0], 400)
        self.assertEqual(post_json(self.base, "topic", {"topic": "bad topic!"})[0], 400)
        self.assertEqual(post_json(self.base, "send", {"topic": "ConsoleT"})[0], 400)

        status, deleted = post_json(self.base, "topic/delete", {"topic": "ConsoleT"})
        self.assertEqual((status, deleted["deleted"], deleted["namesrvErrors"]), (200, True, []))
        self.assertEqual(get_json(self.base, "topic", topic="ConsoleT")[0], 404)
        self.assertEqual(_route_code(self.server, "ConsoleT"), ResponseCode.TOPIC_NOT_EXIST)
        status, index, body = http(self.base, "GET", "")
        self.assertEqual((status, index["content-type"]), (200, "text/html"))
        self.assertIn(b"app.js", body)
        # a rebound DNS name does not reach a loopback console
        self.assertEqual(http(self.base, "GET", "api/whoami", headers={"host": "evil.example:80"})[0], 421)
        self.assertEqual(http(self.base, "GET", "api/whoami", headers={"host": f"localhost:{self.base.rsplit(':', 1)[1]}"})[0], 200)


class ConsoleGroupsTest(_ServerTest):
    def test_lag_connections_reset_dlq_and_metrics(self) -> None:
        self.assertEqual(post_json(self.base, "topic", {"topic": "LagT", "readQueueNums": 2, "writeQueueNums": 2})[0], 200)
        for i in range(5):
            self.server.send_to_queue("LagT", 0, f"m{i}")
        commit_offset(self.server, "CG", "LagT", 0, 2)
        status, group = get_json(self.base, "group", group="CG")
        self.assertEqual((status, group["online"], group["lag"]), (200, False, 3))
        row = [q for q in group["queues"] if q["queueId"] == 0][0]
        self.assertEqual((row["brokerOffset"], row["consumerOffset"], row["lag"]), (5, 2, 3))

        consumer = OnlineConsumer(self.server, "CG", "LagT")
        try:
            group = wait_for(lambda: (lambda g: g if g["online"] else None)(get_json(self.base, "group", group="CG")[1]), 5, "CG online")
            self.assertEqual([(c["clientId"], c["language"], c["version"]) for c in group["connections"]],
                             [("127.0.0.1@console-test", "JAVA", 409)])
            self.assertEqual((group["messageModel"], group["versions"], list(group["subscriptions"])), ("CLUSTERING", ["409"], ["LagT"]))
            listed = {g["group"]: g for g in get_json(self.base, "groups")[1]["groups"]}
            self.assertEqual((listed["CG"]["lag"], len(listed["CG"]["connections"])), (3, 1))
            by_name = samples(self.base)
            diff = [s for s in by_name["rocketmq_group_diff"] if s.labels["group"] == "CG"]
            self.assertEqual([(s.labels["topic"], s.labels["countOfOnlineConsumers"], s.labels["msgModel"], s.value) for s in diff],
                             [("LagT", "1", "1", 3.0)])
            latency = [s for s in by_name["rocketmq_group_get_latency_by_storetime"] if s.labels["group"] == "CG"]
            self.assertEqual(len(latency), 1)
            self.assertGreaterEqual(latency[0].value, 0)
            count = [s for s in by_name["rocketmq_group_count"] if s.labels["group"] == "CG"]
            self.assertEqual([s.value for s in count], [1.0])
            # Apache 5.x's names: sends of a normal message, their bytes and sizes
            sent = dict(topic="LagT", message_type="normal", is_system="false")
            self.assertEqual([s.value for s in otel(by_name, "rocketmq_messages_in_total", **sent)], [5.0])
            wrote = otel(by_name, "rocketmq_throughput_in_total", **sent)[0].value
            self.assertTrue(5 * 100 < wrote < 5 * 400, wrote)  # five stored records of a short body
            self.assertEqual([s.value for s in otel(by_name, "rocketmq_message_size_count", **sent)], [5.0])
            self.assertEqual([s.value for s in otel(by_name, "rocketmq_message_size_sum", **sent)], [wrote])
            buckets = {s.labels["le"]: s.value for s in otel(by_name, "rocketmq_message_size_bucket", **sent)}
            self.assertEqual(buckets, {"1024.0": 5.0, "4096.0": 5.0, "524288.0": 5.0, "1048576.0": 5.0, "2097152.0": 5.0,
                                       "4194304.0": 5.0, "+Inf": 5.0})
            # the online group: lag past its committed offset (queue 1 never committed: no lag, as in Java)
            lag = otel(by_name, "rocketmq_consumer_lag_messages", consumer_group="CG", topic="LagT")
            self.assertEqual([(s.labels["is_retry"], s.labels["is_system"], s.value) for s in lag], [("false", "false", 3.0)])
            age = otel(by_name, "rocketmq_consumer_lag_latency_milliseconds", consumer_group="CG", topic="LagT")[0].value
            self.assertTrue(0 < age < 120_000, age)
            conns = otel(by_name, "rocketmq_consumer_connections", consumer_group="CG")
            self.assertEqual([(s.labels["language"], s.labels["version"], s.labels["consume_mode"], s.labels["protocol_type"],
                               s.labels["is_system"], s.value) for s in conns], [("java", "v4_9_8", "push", "remoting", "false", 1.0)])
            self.assertEqual(otel(by_name, "rocketmq_broker_permission")[0].value, 6.0)
            # nothing pulled yet: what follows the committed offset is ready, nothing in flight
            self.assertEqual(otel(by_name, "rocketmq_consumer_ready_messages", consumer_group="CG")[0].value, 3.0)
            self.assertEqual(otel(by_name, "rocketmq_consumer_inflight_messages", consumer_group="CG")[0].value, 0.0)
            # a pull of two past the committed offset: two in flight, one ready, the lag unchanged
            first_pull, records = pull(self.server.broker, "LagT", 0, 2, group="CG", max_nums=2)
            self.assertEqual(len(records), 2)
            by_name = samples(self.base)
            group_labels = dict(consumer_group="CG", topic="LagT", is_retry="false", is_system="false")
            self.assertEqual([otel(by_name, name, **group_labels)[0].value for name in (
                "rocketmq_consumer_lag_messages", "rocketmq_consumer_inflight_messages", "rocketmq_consumer_ready_messages")],
                [3.0, 2.0, 1.0])
            queueing = otel(by_name, "rocketmq_consumer_queueing_latency_milliseconds", **group_labels)[0].value
            self.assertTrue(0 < queueing <= age + 60_000, (queueing, age))  # the fifth message is younger than the third
            self.assertGreaterEqual(otel(by_name, "rocketmq_topic_number")[0].value, 2)
            # as in Java, a queue the group never committed refuses the reset (the broker's own remark)
            status, refused = post_json(self.base, "group/reset", {"group": "CG", "topic": "LagT", "timestamp": -1})
            self.assertEqual(status, 400)
            self.assertIn("THe consumer group <CG> not exist", refused["error"])
            commit_offset(self.server, "CG", "LagT", 1, 0)
            status, reset = post_json(self.base, "group/reset", {"group": "CG", "topic": "LagT", "timestamp": -1})
            self.assertEqual((status, reset["online"], reset["offsets"]), (200, True, {"0": 5, "1": 0}))
        finally:
            consumer.close()
        wait_for(lambda: not get_json(self.base, "group", group="CG")[1]["online"], 5, "CG offline")
        status, reset = post_json(self.base, "group/reset", {"group": "CG", "topic": "LagT", "timestamp": 0})
        self.assertEqual((status, reset["online"]), (200, False))
        self.assertEqual(query_offset(self.server, "CG", "LagT", 0), 0)
        self.assertEqual(get_json(self.base, "group", group="CG")[1]["lag"], 5)

        first = get_json(self.base, "messages", by="offset", topic="LagT", queueId=0, offset=1)[1]["messages"][0]
        send_back_to_dlq(self.server, "CG", first["offsetMsgId"], "LagT")
        self.assertIn("CG", get_json(self.base, "dlq")[1]["groups"])
        status, page = get_json(self.base, "dlq", group="CG")
        dead = [m for q in page["queues"] for m in q["messages"]]
        self.assertEqual((status, page["topic"], [m["bodyText"] for m in dead]), (200, "%DLQ%CG", ["m1"]))
        self.assertEqual(dead[0]["properties"]["RETRY_TOPIC"], "LagT")
        status, resent = post_json(self.base, "dlq/resend", {"group": "CG", "offsetMsgId": dead[0]["offsetMsgId"]})
        self.assertEqual((status, resent["topic"], resent["originalTopic"]), (200, "%RETRY%CG", "LagT"))
        again = get_json(self.base, "messages", by="id", id=resent["offsetMsgId"])[1]["messages"]
        self.assertEqual([(m["topic"], m["bodyText"], m["reconsumeTimes"]) for m in again], [("%RETRY%CG", "m1", 0)])
        self.assertEqual(post_json(self.base, "dlq/resend", {"group": "CG", "offsetMsgId": first["offsetMsgId"]})[0], 404)

        by_name = samples(self.base)
        put = {s.labels["topic"]: s.value for s in by_name["rocketmq_producer_tps"]}
        self.assertGreater(put["LagT"], 0)
        sizes = {s.labels["topic"]: s.value for s in by_name["rocketmq_producer_message_size"]}
        self.assertGreater(sizes["LagT"], 0)
        offsets = {s.labels["topic"]: s.value for s in by_name["rocketmq_producer_offset"]}
        self.assertEqual(offsets["LagT"], 5.0)
        self.assertEqual({s.labels["group"]: s.value for s in by_name["rocketmq_topic_dlq_offset"]}["CG"], 1.0)
        self.assertGreater(by_name["rocketmq_broker_tps"][0].value, 0)
        self.assertEqual(by_name["rocketmq_brokeruntime_msg_put_total_today_now"][0].labels["des"], "V4_9_8")
        self.assertGreaterEqual(by_name["rocketmq_brokeruntime_msg_put_total_today_now"][0].value, 7)
        ratio = by_name["rocketmq_brokeruntime_commitlog_disk_ratio"][0].value
        self.assertTrue(0 < ratio < 1, ratio)
        self.assertGreater(by_name["process_resident_memory_bytes"][0].value, 0)
        self.assertIn("process_cpu_seconds_total", by_name)
        dlq = otel(by_name, "rocketmq_send_to_dlq_messages_total", consumer_group="CG")
        self.assertEqual([(s.labels["topic"], s.labels["is_system"], s.value) for s in dlq], [("LagT", "false", 1.0)])
        # the resend into %RETRY%CG is a send Java leaves out of rocketmq_messages_in_total
        self.assertEqual({s.labels["topic"] for s in by_name["rocketmq_messages_in_total"]} & {"%RETRY%CG", "%DLQ%CG"}, set())
        self.assertGreater(otel(by_name, "rocketmq_storage_size_bytes", storage_type="local", storage_medium="disk")[0].value, 0)
        reserve = otel(by_name, "rocketmq_storage_message_reserve_time_milliseconds")[0].value
        self.assertTrue(0 <= reserve < 120_000, reserve)
        self.assertEqual(otel(by_name, "rocketmq_storage_dispatch_behind_bytes")[0].value, 0)

        # real consumes: the pull of two above, then one of queue 0's five messages
        response, records = pull(self.server.broker, "LagT", 0, 0, group="CG")
        self.assertEqual(len(records), 5)
        by_name = samples(self.base)
        read = dict(topic="LagT", consumer_group="CG", is_system="false")
        self.assertEqual([s.value for s in otel(by_name, "rocketmq_messages_out_total", **read)], [7.0])
        self.assertEqual([s.value for s in otel(by_name, "rocketmq_throughput_out_total", **read)],
                         [float(len(first_pull.body) + len(response.body))])


class ConsoleReadOnlyTest(_ServerTest):
    admin = False

    def test_admin_actions_refused_reads_served(self) -> None:
        self.assertFalse(get_json(self.base, "whoami")[1]["adminEnable"])
        for path, body in (("topic", {"topic": "RO"}), ("topic/delete", {"topic": "TBW102"}), ("send", {"topic": "TBW102", "body": "x"}),
                           ("group/reset", {"group": "G", "topic": "TBW102"}), ("dlq/resend", {"group": "G", "offsetMsgId": "00"})):
            status, answer = post_json(self.base, path, body)
            self.assertEqual(status, 403, path)
            self.assertIn("consoleAdminEnable", answer["error"])
        self.assertEqual(get_json(self.base, "topic", topic="RO")[0], 404)
        self.assertEqual(get_json(self.base, "topic", topic="TBW102")[0], 200)
        self.assertIn("rocketmq_broker_tps", samples(self.base))

    def test_console_off_unless_configured(self) -> None:
        self.assertEqual(ConsoleConfig.from_properties({}).port, -1)
        self.assertEqual(ConsoleConfig.from_properties({}).listen_address, "127.0.0.1")
        self.assertFalse(ConsoleConfig.from_properties({}).admin_enable)
        with self.assertRaises(ValueError):
            ConsoleConfig.from_properties({"consolePort": "80a"})


class MetricsKeysTest(unittest.TestCase):
    """Apache 5.x's metrics keys: metricsExporterType=PROM opens Apache's exporter port (here without
    a console) serving the same text; metricsLabel, metricsInDelta and the group switches shape it."""

    def setUp(self) -> None:
        from testkit.ports import free_port
        from testkit.standalone import Standalone

        self.prom_port = free_port()
        self.server = Standalone({"metricsExporterType": "PROM", "metricsPromExporterPort": str(self.prom_port),
                                  "metricsPromExporterHost": "127.0.0.1", "metricsLabel": "env:test,region:r1",
                                  "metricsInDelta": "true", "enableConnectionMetrics": "false"}).start()

    def tearDown(self) -> None:
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        self.assertTrue(clean, f"standalone did not shut down cleanly\n{log}")

    def test_prometheus_port_labels_and_switches(self) -> None:
        self.server.send_to_queue("TBW102", 0, "five!")
        base = f"http://127.0.0.1:{self.prom_port}"
        consumer = OnlineConsumer(self.server, "PG", "TBW102")
        try:
            by_name = samples(base)
        finally:
            consumer.close()
        self.assertEqual([s.value for s in by_name["rocketmq_group_count"] if s.labels["group"] == "PG"], [1.0])
        sent = [s for s in by_name["rocketmq_messages_in_total"] if s.labels["topic"] == "TBW102"]
        self.assertEqual([s.value for s in sent], [1.0])
        self.assertEqual({k: sent[0].labels[k] for k in ("env", "region", "aggregation", "node_type", "cluster", "node_id")},
                         {"env": "test", "region": "r1", "aggregation": "delta", "node_type": "broker",
                          "cluster": "DefaultCluster", "node_id": "broker-a"})
        self.assertNotIn("rocketmq_consumer_connections", by_name)  # enableConnectionMetrics=false
        self.assertIn("rocketmq_producer_tps", by_name)  # the same text as the console's /metrics
        status, _, raw = http(base, "GET", "")  # Apache's exporter answers on any path
        self.assertEqual(status, 200)
        self.assertIn(b"rocketmq_topic_number{", raw)
        self.assertEqual(http(base, "GET", "-/healthy")[::2], (200, b"Exporter is Healthy."))

    def test_message_types_as_java_labels_them(self) -> None:
        """A delayed send counts under the schedule topic and a half message under the half topic
        (Java's handlePutMessageResult reads the topic after the store redirected it)."""
        from rmqtx.remoting.headers import SendMessageRequestHeader, send_header_to_v2

        def send(properties: str, sys_flag: int = 0) -> RemotingCommand:
            header = SendMessageRequestHeader(
                producerGroup="P_types", topic="TBW102", defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=0,
                sysFlag=sys_flag, bornTimestamp=int(time.time() * 1000), flag=0, properties=properties, reconsumeTimes=0,
                unitMode=False, batch=False)
            fields, order = send_header_to_v2(header)
            request = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=b"typed", fast_keys=order)
            response = call(self.server.broker, request)
            self.assertEqual(response.code, ResponseCode.SUCCESS)
            return response

        def end(half: RemotingCommand, verdict: int) -> None:
            fields = {"producerGroup": "P_types", "tranStateTableOffset": half.ext_fields["queueOffset"],
                      "commitLogOffset": stored_offset(half), "commitOrRollback": verdict, "msgId": half.ext_fields["msgId"]}
            self.assertEqual(call(self.server.broker, RemotingCommand.request(RequestCode.END_TRANSACTION, fields)).code,
                             ResponseCode.SUCCESS)

        send("DELAY\x012\x02WAIT\x01true")
        send("__SHARDINGKEY\x01k1\x02WAIT\x01true")
        send("__SHARDINGKEY\x01k1\x02WAIT\x01true")
        halves = [send("TRAN_MSG\x01true\x02PGROUP\x01P_types\x02WAIT\x01true", sys_flag=0x4) for _ in range(3)]
        send("TIMER_DELAY_SEC\x01600\x02WAIT\x01true")
        end(halves[0], 8)  # commit
        end(halves[0], 8)  # a repeated verdict changes nothing, and counts nothing
        end(halves[1], 12)  # rollback
        base = f"http://127.0.0.1:{self.prom_port}"
        by_name = samples(base)
        counted = {(s.labels["topic"], s.labels["message_type"], s.labels["is_system"]): s.value
                   for s in by_name["rocketmq_messages_in_total"]}
        self.assertEqual(counted, {("SCHEDULE_TOPIC_XXXX", "delay", "true"): 1.0, ("rmq_sys_wheel_timer", "delay", "true"): 1.0,
                                   ("TBW102", "fifo", "true"): 2.0,  # TBW102 is in Java's system topic set
                                   ("RMQ_SYS_TRANS_HALF_TOPIC", "transaction", "true"): 3.0})
        self.assertEqual([(s.labels["topic"], s.value) for s in by_name["rocketmq_commit_messages_total"]], [("TBW102", 1.0)])
        self.assertEqual([(s.labels["topic"], s.value) for s in by_name["rocketmq_rollback_messages_total"]], [("TBW102", 1.0)])
        finish = {s.labels["le"]: s.value for s in by_name["rocketmq_finish_message_latency_milliseconds_bucket"]}
        self.assertEqual((finish["5.0"], finish["+Inf"]), (1.0, 1.0))  # committed within a second of its birth
        timing = wait_for(lambda: [(s.labels["topic"], s.labels["storage_type"], s.value)
                                   for s in samples(base).get("rocketmq_timing_messages", [])], 10, "the timer message in the wheel")
        self.assertEqual(timing, [("TBW102", "local", 1.0)])

    def test_refused_and_accepted_values(self) -> None:
        for props, words in (({"metricsExporterType": "OTLP_GRPC"}, "OTLP_GRPC exporter"),
                             ({"metricsExporterType": "3"}, "LOG exporter"),
                             ({"metricsExporterType": "prom"}, "none of DISABLE"),
                             ({"metricsOtelCardinalityLimit": "100"}, "series limit"),
                             ({"metricsLabel": "env"}, "not one key:value pair"),
                             ({"metricsExporterType": "PROM", "metricsPromExporterPort": "x"}, "not a number")):
            with self.assertRaises(ValueError) as raised:
                ConsoleConfig.from_properties(props)
            self.assertIn(words, str(raised.exception))
        metrics = ConsoleConfig.from_properties({"metricsExporterType": "2", "metricsLabel": "a:1,,b-c:2:,9x..y:3",
                                                 "enablePopMetrics": "false"}).metrics
        self.assertEqual((metrics.exporter, metrics.prom_port, metrics.labels), ("PROM", 5557, {"a": "1", "b_c": "2", "_x_y": "3"}))
        self.assertNotIn("enablePopMetrics", metrics.groups)
        self.assertEqual(ConsoleConfig.from_properties({}).metrics.exporter, "DISABLE")


class ConsoleAclTest(_ServerTest):
    acl = True

    def test_admin_actions_need_an_admin_account(self) -> None:
        from tests.security.acl_support import ADMIN, ADMIN_SK, USER, USER_SK

        self.assertTrue(get_json(self.base, "whoami")[1]["aclEnable"])
        status, headers, raw = http(self.base, "POST", "api/topic", body={"topic": "AclT"})
        self.assertEqual(status, 401)
        self.assertIn("Basic", headers["www-authenticate"])
        self.assertEqual(post_json(self.base, "topic", {"topic": "AclT"}, basic(USER, USER_SK))[0], 403)
        self.assertEqual(post_json(self.base, "topic", {"topic": "AclT"}, basic(ADMIN, "wrong-secret"))[0], 401)
        self.assertEqual(post_json(self.base, "topic", {"topic": "AclT"}, {"x-access-key": ADMIN, "x-secret-key": "nope"})[0], 401)
        self.assertEqual(get_json(self.base, "topic", topic="AclT")[0], 404)
        status, created = post_json(self.base, "topic", {"topic": "AclT", "readQueueNums": 2, "writeQueueNums": 2}, basic(ADMIN, ADMIN_SK))
        self.assertEqual((status, created["created"]), (200, True))
        status, deleted = post_json(self.base, "topic/delete", {"topic": "AclT"}, {"x-access-key": ADMIN, "x-secret-key": ADMIN_SK})
        self.assertEqual((status, deleted["deleted"]), (200, True))
        self.assertIn("console admin action topic/delete by RocketMQAdmin", wait_for(
            lambda: (lambda text: text if "topic/delete by" in text else "")(self.server.log()), 5, "the action in the log"))
        self.assertNotIn(ADMIN_SK, self.server.log())


if __name__ == "__main__":
    unittest.main()
