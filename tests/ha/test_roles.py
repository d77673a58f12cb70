"""Broker roles: broker.conf keys and Java's defaults, a slave's copy of the master's tables, and the
broker id a pull answer suggests."""

from __future__ import annotations

import json
import unittest

from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.jsonfiles import loads_fastjson
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.store.config import StoreConfig
from testkit.standalone import call
from testkit.ha import Cluster, Sender, pull, wait_until


class RoleConfigTest(unittest.TestCase):
    def test_java_defaults(self) -> None:
        cfg = BrokerConfig.from_properties({"listenPort": "20911"})
        store = StoreConfig.from_properties(cfg.store_properties())
        self.assertEqual(cfg.brokerRole, "ASYNC_MASTER")
        self.assertFalse(cfg.slaveReadEnable)
        self.assertEqual(cfg.ha_server_addr, "127.0.0.1:20912")  # haListenPort = listenPort + 1
        self.assertEqual((store.broker_role, store.ha_send_heartbeat_interval, store.ha_housekeeping_interval,
                          store.ha_transfer_batch_size, store.ha_master_address, store.ha_slave_fallbehind_max,
                          store.sync_flush_timeout, store.slave_timeout, store.access_message_in_memory_max_ratio),
                         ("ASYNC_MASTER", 5000, 20000, 32768, None, 256 * 1024 * 1024, 5000, 3000, 40))

    def test_conf_keys(self) -> None:
        props = {"brokerRole": "SLAVE", "brokerId": "2", "haListenPort": "30000", "haMasterAddress": "10.0.0.1:10912",
                 "haSendHeartbeatInterval": "1000", "haHousekeepingInterval": "9000", "haTransferBatchSize": "4096",
                 "haSlaveFallbehindMax": "1024", "syncFlushTimeout": "700", "slaveReadEnable": "true",
                 "accessMessageInMemoryMaxRatio": "10"}
        cfg = BrokerConfig.from_properties(props)
        cfg.check_role()
        store = StoreConfig.from_properties(cfg.store_properties())
        self.assertTrue(cfg.is_slave and store.is_slave and cfg.slaveReadEnable)
        self.assertEqual((cfg.brokerId, cfg.ha_server_addr), (2, "127.0.0.1:30000"))
        self.assertEqual((store.ha_master_address, store.ha_send_heartbeat_interval, store.ha_housekeeping_interval,
                          store.ha_transfer_batch_size, store.ha_slave_fallbehind_max, store.sync_flush_timeout,
                          store.access_message_in_memory_max_ratio), ("10.0.0.1:10912", 1000, 9000, 4096, 1024, 700, 10))

    def test_role_rules_as_broker_startup(self) -> None:
        with self.assertRaisesRegex(ValueError, "Slave's brokerId must be > 0"):
            BrokerConfig.from_properties({"brokerRole": "SLAVE"}).check_role()
        master = BrokerConfig.from_properties({"brokerRole": "SYNC_MASTER", "brokerId": "3"})
        master.check_role()
        self.assertEqual(master.brokerId, 0)
        with self.assertRaises(ValueError):
            BrokerConfig.from_properties({"brokerRole": "LEADER"}).check_role()


def _all(addr: str, code: int) -> dict:
    resp = call(addr, RemotingCommand.request(code), 5)
    assert resp.code == ResponseCode.SUCCESS, (code, resp.code, resp.remark)
    return loads_fastjson(resp.body)


class SlaveTablesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = Cluster()

    def tearDown(self) -> None:
        self.assertEqual(self.cluster.close(), [])

    def test_slave_copies_topics_groups_offsets_and_delay_offsets(self) -> None:
        master = self.cluster.broker("master").start()
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1).start()
        fields = {"topic": "T_sync", "defaultTopic": "TBW102", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6,
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        self.assertEqual(call(master.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)).code, 0)
        group = {"groupName": "G_sync", "retryMaxTimes": 5, "consumeEnable": True, "consumeFromMinEnable": True,
                 "consumeBroadcastEnable": True, "retryQueueNums": 1, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                 "notifyConsumerIdsChangedEnable": True}
        resp = call(master.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                                                         json.dumps(group).encode()))
        self.assertEqual(resp.code, 0, resp.remark)
        commit = {"consumerGroup": "G_sync", "topic": "T_sync", "queueId": 2, "commitOffset": 17}
        self.assertEqual(call(master.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, commit)).code, 0)
        self.assertEqual(Sender(master.addr).send("T_sync", b"later", 0, DELAY="1").code, 0)
        wait_until(lambda: _all(master.addr, RequestCode.GET_ALL_DELAY_OFFSET).get("offsetTable"), 15, "a delivered delay level")

        def synced() -> bool:
            topics = _all(slave.addr, RequestCode.GET_ALL_TOPIC_CONFIG)
            groups = _all(slave.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            offsets = _all(slave.addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
            delay = _all(slave.addr, RequestCode.GET_ALL_DELAY_OFFSET)
            return (topics == _all(master.addr, RequestCode.GET_ALL_TOPIC_CONFIG)
                    and groups["subscriptionGroupTable"].get("G_sync", {}).get("retryMaxTimes") == 5
                    and offsets["offsetTable"].get("T_sync@G_sync") == {"2": 17}
                    and delay == _all(master.addr, RequestCode.GET_ALL_DELAY_OFFSET))
        wait_until(synced, 30, "the slave's copy of the master's tables", step=0.5)
        self.assertIn("T_sync", _all(slave.addr, RequestCode.GET_ALL_TOPIC_CONFIG)["topicConfigTable"])
        refused = call(slave.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {**fields, "topic": "T_no"}))
        self.assertEqual(refused.code, ResponseCode.SYSTEM_ERROR)


class SuggestBrokerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = Cluster()

    def tearDown(self) -> None:
        self.assertEqual(self.cluster.close(), [])

    def test_suggest_which_broker_id(self) -> None:
        # accessMessageInMemoryMaxRatio=0: whatever is read counts as no longer in memory
        lagging = self.cluster.broker("lagging", slaveReadEnable="true", accessMessageInMemoryMaxRatio=0).start()
        plain = self.cluster.broker("plain", brokerName="broker-b", accessMessageInMemoryMaxRatio=0).start()
        fresh = self.cluster.broker("fresh", brokerName="broker-c", slaveReadEnable="true").start()
        for broker, expected in ((lagging, "1"), (plain, "0"), (fresh, "0")):
            sender = Sender(broker.addr)
            for i in range(3):
                self.assertEqual(sender.send("T_suggest", b"m%d" % i, 0).code, 0)
            sender.close()
            resp, recs = pull(broker.addr, "T_suggest", 0, 0)
            self.assertEqual((resp.code, len(recs)), (ResponseCode.SUCCESS, 3))
            self.assertEqual(resp.ext_fields["suggestWhichBrokerId"], expected, broker.name)


class BusyHaPortTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = Cluster()

    def tearDown(self) -> None:
        self.assertEqual(self.cluster.close(), [])

    def test_master_serves_on_when_its_ha_port_is_taken(self) -> None:
        import socket

        with socket.create_server(("127.0.0.1", 0)) as busy:
            port = busy.getsockname()[1]
            master = self.cluster.broker("master", brokerRole="SYNC_MASTER", haListenPort=port).start()
            self.assertIn("HA: cannot listen on", master.log())
            resp = Sender(master.addr).send("T_busy", b"stored, but nobody copies it")
            self.assertEqual(resp.code, ResponseCode.SLAVE_NOT_AVAILABLE)


if __name__ == "__main__":
    unittest.main()
