"""Registration, routes, clusters, liveness and bad input over real TCP."""

from __future__ import annotations

import zlib

import orjson
from twisted.internet import task
from twisted.trial import unittest

from rmqtx.common import fastjson
from rmqtx.common.topic_config import TopicConfig
from rmqtx.namesrv.register_body import DataVersion, RegisterBrokerBody
from rmqtx.remoting import RemotingCommand, SerializeType, decode_frame
from rmqtx.remoting.codes import RequestCode as RC
from rmqtx.remoting.codes import ResponseCode
from tests.namesrv.helpers import connect, port_of, request, start_namesrv

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def register_cmd(
    cluster: str,
    name: str,
    addr: str,
    broker_id: int = 0,
    topics: dict[str, tuple[int, int, int, int]] | None = None,
    version: DataVersion = DataVersion(1000, 1),
    compress: bool = False,
    crc: bool = True,
    filters: list[str] | None = None,
) -> RemotingCommand:
    """REGISTER_BROKER as a Java broker sends it; topics map name -> (read, write, perm, sysFlag)."""
    configs = [TopicConfig(t, r, w, p, topicSysFlag=f) for t, (r, w, p, f) in (topics or {}).items()]
    body = RegisterBrokerBody(version, configs, filters or []).encode(compress)
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": cluster,
        "haServerAddr": addr.rsplit(":", 1)[0] + ":" + str(int(addr.rsplit(":", 1)[1]) + 1),
        "brokerId": broker_id,
        "compressed": compress,
        "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF if crc else 0,
    }
    return request(RC.REGISTER_BROKER, ext, body)


def route_req(topic: str, version: int = 409) -> RemotingCommand:
    return request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, version=version)


class RegistrationTest(unittest.TestCase):
    timeout = 10

    async def test_two_clusters_master_slave_routes(self) -> None:
        svc = start_namesrv(self)
        broker = await connect(port_of(svc))
        self.addCleanup(broker.close)
        resp = await broker.call(register_cmd("C1", "b-a", "10.0.0.1:10911", topics={"T": (4, 4, 6, 0), "U": (2, 2, 6, 1)}))
        self.assertEqual((resp.code, resp.ext_fields, resp.body), (0, {}, b""))
        resp = await broker.call(register_cmd("C1", "b-a", "10.0.0.2:10911", broker_id=1, topics={"T": (4, 4, 6, 0)}))
        self.assertEqual(resp.ext_fields, {"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911"})
        await broker.call(register_cmd("C2", "b-b", "10.0.1.1:10911", topics={"T": (8, 8, 6, 0), "V": (1, 1, 6, 2)}))

        client = await connect(port_of(svc))
        self.addCleanup(client.close)
        new = (await client.call(route_req("T"))).body
        self.assertEqual(
            new,
            b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.1.1:10911"},"brokerName":"b-b","cluster":"C2"},'
            b'{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"b-a","cluster":"C1"}],'
            b'"filterServerTable":{},"queueDatas":[{"brokerName":"b-b","perm":6,"readQueueNums":8,"topicSysFlag":0,'
            b'"writeQueueNums":8},{"brokerName":"b-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}',
        )
        old = (await client.call(route_req("T", version=400))).body
        self.assertIn(b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}', old)
        self.assertEqual(old.replace(b'{0:', b'{"0":').replace(b',1:', b',"1":'), new)

        info = fastjson.loads((await client.call(request(RC.GET_BROKER_CLUSTER_INFO))).body)
        self.assertEqual(info["clusterAddrTable"], {"C1": ["b-a"], "C2": ["b-b"]})
        self.assertEqual(info["brokerAddrTable"]["b-a"]["brokerAddrs"], {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})

        by_cluster = orjson.loads((await client.call(request(RC.GET_TOPICS_BY_CLUSTER, {"cluster": "C2"}))).body)
        self.assertEqual(sorted(by_cluster["topicList"]), ["T", "V"])
        unknown = orjson.loads((await client.call(request(RC.GET_TOPICS_BY_CLUSTER, {"cluster": "nope"}))).body)
        self.assertEqual(unknown, {"topicList": []})
        system = orjson.loads((await client.call(request(RC.GET_SYSTEM_TOPIC_LIST_FROM_NS))).body)
        self.assertEqual(sorted(system["topicList"]), ["C1", "C2", "b-a", "b-b"])
        self.assertIn(system["brokerAddr"], ("10.0.0.1:10911", "10.0.1.1:10911"))
        unit = orjson.loads((await client.call(request(RC.GET_UNIT_TOPIC_LIST))).body)
        self.assertEqual(unit["topicList"], ["U"])
        sub = orjson.loads((await client.call(request(RC.GET_HAS_UNIT_SUB_TOPIC_LIST))).body)
        self.assertEqual(sub["topicList"], ["V"])
        sub_ununit = orjson.loads((await client.call(request(RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST))).body)
        self.assertEqual(sub_ununit["topicList"], ["V"])

        # write permission: wipe then add back
        wipe = await client.call(request(RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b-a"}))
        self.assertEqual(wipe.ext_fields, {"wipeTopicCount": "2"})
        self.assertIn(b'{"brokerName":"b-a","perm":4,', (await client.call(route_req("T"))).body)
        add = await client.call(request(RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "b-a"}))
        self.assertEqual(add.ext_fields, {"addTopicCount": "2"})
        self.assertIn(b'{"brokerName":"b-a","perm":6,', (await client.call(route_req("T"))).body)

        # delete T in C2 only, then everywhere
        await client.call(request(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "T", "clusterName": "C2"}))
        body = (await client.call(route_req("T"))).body
        self.assertNotIn(b"b-b", body)
        await client.call(request(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"}))
        self.assertEqual((await client.call(route_req("T"))).code, ResponseCode.TOPIC_NOT_EXIST)

    async def test_compressed_body_and_unchanged_version(self) -> None:
        svc = start_namesrv(self)
        broker = await connect(port_of(svc))
        self.addCleanup(broker.close)
        resp = await broker.call(register_cmd("C", "b", "127.0.0.1:1", topics={"Z": (3, 3, 6, 0)}, compress=True))
        self.assertEqual(resp.code, 0)
        self.assertIn("Z", svc.route_info.topic_queue_table)
        # same data version: topics are not re-read (Java skips the rework)
        resp = await broker.call(register_cmd("C", "b", "127.0.0.1:1", topics={"Y": (3, 3, 6, 0)}, compress=True))
        self.assertNotIn("Y", svc.route_info.topic_queue_table)
        resp = await broker.call(
            register_cmd("C", "b", "127.0.0.1:1", topics={"Y": (3, 3, 6, 0)}, compress=True, version=DataVersion(1000, 2))
        )
        self.assertIn("Y", svc.route_info.topic_queue_table)
        query = request(RC.QUERY_DATA_VERSION, {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C",
                                                "brokerId": "0"}, DataVersion(1000, 2).encode())
        resp = await broker.call(query)
        self.assertEqual((resp.ext_fields, resp.body), ({"changed": "false"}, b'{"counter":2,"timestamp":1000}'))

    async def test_connection_close_drops_broker(self) -> None:
        svc = start_namesrv(self)
        broker = await connect(port_of(svc))
        await broker.call(register_cmd("C", "b", "127.0.0.1:1", topics={"T": (1, 1, 6, 0)}))
        client = await connect(port_of(svc))
        self.addCleanup(client.close)
        self.assertEqual((await client.call(route_req("T"))).code, 0)
        await broker.close()
        resp = await client.call(route_req("T"))
        self.assertEqual((resp.code, resp.remark), (17, "No topic route info in name server for the topic: T" + FAQ))
        self.assertEqual(svc.route_info.cluster_addr_table, {})
        self.assertEqual(svc.route_info.broker_live_table, {})

    async def test_expiry_with_clock(self) -> None:
        clock = task.Clock()
        svc = start_namesrv(self, clock=clock.seconds)
        broker = await connect(port_of(svc))
        self.addCleanup(broker.close)
        await broker.call(register_cmd("C", "b1", "127.0.0.1:1", topics={"T": (1, 1, 6, 0), "Only1": (1, 1, 6, 0)}))
        other = await connect(port_of(svc))
        self.addCleanup(other.close)
        await other.call(register_cmd("C", "b2", "127.0.0.1:2", topics={"T": (1, 1, 6, 0)}))
        clock.advance(60)
        # b2 keeps itself alive with QUERY_DATA_VERSION (unchanged version refreshes its timestamp)
        await other.call(request(RC.QUERY_DATA_VERSION, {"brokerName": "b2", "brokerAddr": "127.0.0.1:2",
                                                         "clusterName": "C", "brokerId": "0"}, DataVersion(1000, 1).encode()))
        clock.advance(61)  # b1 silent for 121 s; the 10 s scan has run
        self.assertEqual(list(svc.route_info.broker_live_table), ["127.0.0.1:2"])
        self.assertNotIn("Only1", svc.route_info.topic_queue_table)
        self.assertEqual(list(svc.route_info.topic_queue_table["T"]), ["b2"])
        await broker.lost  # the NameServer closed the expired broker's connection
        clock.advance(130)
        self.assertEqual(svc.route_info.topic_queue_table, {})


class BadInputTest(unittest.TestCase):
    timeout = 10

    async def _conn(self):
        svc = start_namesrv(self)
        conn = await connect(port_of(svc))
        self.addCleanup(conn.close)
        return svc, conn

    async def test_bad_crc_and_bad_body(self) -> None:
        svc, conn = await self._conn()
        cmd = register_cmd("C", "b", "127.0.0.1:1", topics={"T": (1, 1, 6, 0)})
        cmd.ext_fields["bodyCrc32"] = "12345"
        resp = await conn.call(cmd)
        self.assertEqual((resp.code, resp.remark), (1, "crc32 not match"))
        bad = request(RC.REGISTER_BROKER, {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C",
                                           "haServerAddr": "x", "brokerId": "0", "bodyCrc32": "0"}, b"{not json")
        resp = await conn.call(bad)
        self.assertEqual(resp.code, 1)
        self.assertIn("Failed to decode RegisterBrokerBody", resp.remark)
        bad.ext_fields["compressed"] = "true"
        bad.body = zlib.compress(b"\x00\x00\x00\x05short")
        self.assertEqual((await conn.call(bad)).code, 1)
        self.assertEqual(svc.route_info.broker_addr_table, {})
        self.assertEqual(svc.route_info.broker_live_table, {})
        # the connection is still usable
        self.assertEqual((await conn.call(route_req("T"))).code, 17)

    async def test_missing_fields_and_unknown_code(self) -> None:
        svc, conn = await self._conn()
        resp = await conn.call(request(RC.REGISTER_BROKER, {"brokerName": "b"}))
        self.assertEqual(resp.code, ResponseCode.SYSTEM_ERROR)
        self.assertIn("is null", resp.remark)
        resp = await conn.call(request(RC.GET_ROUTEINFO_BY_TOPIC))
        self.assertEqual((resp.code, resp.remark), (17, "No topic route info in name server for the topic: null" + FAQ))
        resp = await conn.call(request(9999))
        self.assertEqual((resp.code, resp.remark, resp.ext_fields), (3, " request type 9999 not supported", None))
        resp = await conn.call(request(RC.QUERY_DATA_VERSION, {"brokerName": "b", "brokerAddr": "a", "clusterName": "C",
                                                               "brokerId": "0"}, b"[1,"))
        self.assertEqual(resp.code, 1)

    async def test_unregister_unknown_broker(self) -> None:
        svc, conn = await self._conn()
        await conn.call(register_cmd("C", "b", "127.0.0.1:1", topics={"T": (1, 1, 6, 0)}))
        resp = await conn.call(request(RC.UNREGISTER_BROKER, {"brokerName": "zz", "brokerAddr": "127.0.0.9:1",
                                                               "clusterName": "C", "brokerId": "0"}))
        self.assertEqual((resp.code, resp.ext_fields), (0, None))  # Java answers SUCCESS, nothing changes
        self.assertEqual(list(svc.route_info.topic_queue_table), ["T"])
        resp = await conn.call(request(RC.UNREGISTER_BROKER, {"brokerName": "b", "brokerAddr": "127.0.0.1:1",
                                                               "clusterName": "C", "brokerId": "0"}))
        self.assertEqual(svc.route_info.topic_queue_table, {})

    async def test_binary_request_gets_binary_answer(self) -> None:
        svc, conn = await self._conn()
        await conn.call(register_cmd("C", "b", "127.0.0.1:1", topics={"T": (1, 1, 6, 0)}))
        cmd = route_req("T")
        cmd.serialize_type = SerializeType.ROCKETMQ
        from rmqtx.remoting import encode_frame

        raw = await conn.call_raw(encode_frame(cmd))
        self.assertEqual(raw[4], 1)  # serialize type byte: ROCKETMQ
        self.assertEqual(decode_frame(raw).code, 0)


class MalformedFrameTest(unittest.TestCase):
    """Frames that do not decode close the connection (as both Java servers do); others go on."""

    timeout = 10

    async def test_captured_malformed_frames_close(self) -> None:
        from tests.namesrv.helpers import namesrv_frames

        svc = start_namesrv(self)
        cases = {"b-header-not-json", "e-negative-length", "f-zero-length", "g-headerlen-exceeds-frame",
                 "h-unknown-serialize-type", "c-length-over-16MiB"}
        sent = 0
        for rec in namesrv_frames("scenario-bad-input.jsonl"):
            if rec.get("case") in cases and rec["dir"] == "c2s":
                conn = await connect(port_of(svc))
                conn.send_raw(bytes.fromhex(rec["hex"]))
                await conn.lost
                sent += 1
        self.assertEqual(sent, len(cases))
        conn = await connect(port_of(svc))
        self.addCleanup(conn.close)
        self.assertEqual((await conn.call(route_req("T"))).code, 17)
