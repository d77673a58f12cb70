"""KV config over TCP, its file, restarts, several NameServers, and the config commands."""

from __future__ import annotations

import os
import tempfile

import orjson
from twisted.trial import unittest

from rmqtx.common.properties import parse_properties
from rmqtx.namesrv.config import NamesrvConfig
from rmqtx.remoting.codes import RequestCode as RC
from rmqtx.remoting.codes import ResponseCode
from tests.namesrv.helpers import connect, port_of, request, start_namesrv
from tests.namesrv.test_routes import register_cmd, route_req


class KVConfigTest(unittest.TestCase):
    timeout = 10

    async def test_put_get_delete_list_and_restart(self) -> None:
        kv_dir = tempfile.mkdtemp(prefix="rmqtx-kv-")
        svc = start_namesrv(self, kv_dir=kv_dir)
        conn = await connect(port_of(svc))
        self.addCleanup(conn.close)
        for key, value in [("a", "1"), ("b", "2")]:
            resp = await conn.call(request(RC.PUT_KV_CONFIG, {"namespace": "NS", "key": key, "value": value}))
            self.assertEqual((resp.code, resp.ext_fields), (0, None))
        resp = await conn.call(request(RC.GET_KV_CONFIG, {"namespace": "NS", "key": "a"}))
        self.assertEqual((resp.code, resp.ext_fields), (0, {"value": "1"}))
        resp = await conn.call(request(RC.GET_KV_CONFIG, {"namespace": "NS", "key": "zz"}))
        self.assertEqual((resp.code, resp.remark, resp.ext_fields), (22, "No config item, Namespace: NS Key: zz", {}))
        resp = await conn.call(request(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"}))
        self.assertEqual(resp.body, b'{"table":{"a":"1","b":"2"}}')
        resp = await conn.call(request(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "none"}))
        self.assertEqual((resp.code, resp.remark), (22, "No config item, Namespace: none"))
        await conn.call(request(RC.DELETE_KV_CONFIG, {"namespace": "NS", "key": "b"}))
        path = os.path.join(kv_dir, "kvConfig.json")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b'{"configTable":{"NS":{"a":"1"}}}')
        self.assertEqual([n for n in os.listdir(kv_dir) if n != "kvConfig.json"], [])  # no temp files left

        await conn.close()
        await svc.stopService()
        again = start_namesrv(self, kv_dir=kv_dir)
        conn2 = await connect(port_of(again))
        self.addCleanup(conn2.close)
        resp = await conn2.call(request(RC.GET_KV_CONFIG, {"namespace": "NS", "key": "a"}))
        self.assertEqual(resp.ext_fields, {"value": "1"})

    async def test_order_topic_config(self) -> None:
        svc = start_namesrv(self, orderMessageEnable=True)
        conn = await connect(port_of(svc))
        self.addCleanup(conn.close)
        await conn.call(request(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "b:4"}))
        resp = await conn.call(register_cmd("C", "b", "127.0.0.1:1", topics={"T": (4, 4, 6, 0)}))
        self.assertEqual(resp.body, b'{"table":{"T":"b:4"}}')
        body = (await conn.call(route_req("T"))).body
        self.assertIn(b'"filterServerTable":{},"orderTopicConf":"b:4","queueDatas"', body)

    async def test_two_nameservers_side_by_side(self) -> None:
        one, two = start_namesrv(self), start_namesrv(self)
        self.assertNotEqual(port_of(one), port_of(two))
        conns = [await connect(port_of(one)), await connect(port_of(two))]
        for conn in conns:
            self.addCleanup(conn.close)
            self.assertEqual((await conn.call(register_cmd("C", "b", "127.0.0.1:1", topics={"T": (2, 2, 6, 0)}))).code, 0)
        await conns[0].call(request(RC.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"}))
        for conn in conns:
            self.assertEqual((await conn.call(route_req("T"))).code, 0)
        resp = await conns[1].call(request(RC.GET_KV_CONFIG, {"namespace": "NS", "key": "k"}))
        self.assertEqual(resp.code, 22)
        self.assertNotEqual(one.config.kvConfigPath, two.config.kvConfigPath)


class NamesrvConfigTest(unittest.TestCase):
    timeout = 10

    async def test_update_refused_by_default(self) -> None:
        svc = start_namesrv(self)
        conn = await connect(port_of(svc))
        self.addCleanup(conn.close)
        resp = await conn.call(request(RC.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true\n"))
        self.assertEqual(resp.code, ResponseCode.NO_PERMISSION)
        self.assertFalse(svc.config.orderMessageEnable)

    async def test_update_allowlist_when_enabled(self) -> None:
        svc = start_namesrv(self, enableUpdateNamesrvConfig=True)
        conn = await connect(port_of(svc))
        self.addCleanup(conn.close)
        original = svc.config.kvConfigPath
        for body in [b"kvConfigPath=/tmp/evil\n", b"rocketmqHome=/tmp\n", b"configStorePath=/etc/x\n",
                     b"orderMessageEnable=true\nkvConfigPath=/tmp/x\n", b"listenPort=1\n", b"configBlackList=\n"]:
            resp = await conn.call(request(RC.UPDATE_NAMESRV_CONFIG, {}, body))
            self.assertEqual(resp.code, ResponseCode.NO_PERMISSION, body)
        self.assertEqual(svc.config.kvConfigPath, original)
        self.assertFalse(svc.config.orderMessageEnable)
        resp = await conn.call(request(RC.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true\n"))
        self.assertEqual(resp.code, 0)
        self.assertTrue(svc.config.orderMessageEnable)
        resp = await conn.call(request(RC.GET_NAMESRV_CONFIG))
        props = parse_properties(resp.body.decode())
        self.assertEqual(props["orderMessageEnable"], "true")
        self.assertEqual(props["kvConfigPath"], original)

    def test_from_properties(self) -> None:
        config = NamesrvConfig.from_properties(
            {"listenPort": "19876", "orderMessageEnable": "true", "kvConfigPath": "/x/kv.json", "noSuchKey": "1"}
        )
        self.assertEqual((config.listenPort, config.orderMessageEnable, config.kvConfigPath), (19876, True, "/x/kv.json"))
        self.assertFalse(config.enableUpdateNamesrvConfig)
        self.assertEqual(config.scanNotActiveBrokerInterval, 10_000)
        self.assertEqual(config.brokerChannelExpiredTime, 120_000)
        self.assertTrue(NamesrvConfig().kvConfigPath.endswith(os.path.join("namesrv", "kvConfig.json")))

    def test_parse_properties(self) -> None:
        text = "# comment\n! also\na=1\nb : 2\nc 3\nd=x\\\n  y\n"
        self.assertEqual(parse_properties(text), {"a": "1", "b": "2", "c": "3", "d": "xy"})
        self.assertEqual(orjson.loads(b"{}"), {})
