"""The controller's state machine and settings, in process: Apache's checks, answers and epochs."""

from __future__ import annotations

import unittest

from rmqtx.common.fastjson import loads
from rmqtx.remoting import controller_headers as h
from rmqtx.controller.config import ControllerConfig
from rmqtx.controller.replicas import ReplicasInfo, elect, sync_state_set_body
from rmqtx.remoting.codes import ResponseCode

PEERS = "n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879"


class ReplicasTest(unittest.TestCase):
    def setUp(self) -> None:
        self.state = ReplicasInfo()
        self.live: set[int] = set()

    def alive(self, cluster: str, name: str, bid: int) -> bool:
        return bid in self.live

    def commit(self, result) -> None:
        for event in result.events:
            self.state.apply(event)

    def join(self, bid: int) -> None:
        """A broker's three steps: next id, apply it, register; then it beats."""
        nxt = self.state.next_broker_id(h.GetNextBrokerIdRequestHeader("c", "b"))
        self.assertEqual(nxt.header.nextBrokerId, bid)
        applied = self.state.apply_broker_id(h.ApplyBrokerIdRequestHeader("c", "b", bid, f"127.0.0.1:{bid};{bid}"))
        self.assertEqual(applied.code, ResponseCode.SUCCESS, applied.remark)
        self.commit(applied)
        self.live.add(bid)
        reg = self.state.register_broker(h.RegisterBrokerToControllerRequestHeader("c", "b", bid, f"127.0.0.1:{bid}"), self.alive)
        self.assertEqual(reg.code, ResponseCode.SUCCESS, reg.remark)
        self.commit(reg)

    def elect_req(self, bid: int = -1, designate: bool = False) -> h.ElectMasterRequestHeader:
        return h.ElectMasterRequestHeader("c", "b", bid, designate)

    def test_first_broker_elects_itself_then_sync_state_set_grows(self) -> None:
        self.join(1)
        first = self.state.elect_master(self.elect_req(1), self.alive, lambda *a: None)
        self.assertEqual((first.code, first.header.masterBrokerId, first.header.masterEpoch, first.header.syncStateSetEpoch),
                         (ResponseCode.SUCCESS, 1, 1, 1))
        body = loads(first.body)
        self.assertEqual(body["syncStateSet"], [1])
        self.assertEqual(body["brokerMemberGroup"], {"brokerAddrs": {1: "127.0.0.1:1"}, "brokerName": "b", "cluster": "c"})
        self.commit(first)
        self.join(2)
        again = self.state.elect_master(self.elect_req(2), self.alive, lambda *a: None)
        self.assertEqual((again.code, again.header.masterBrokerId), (ResponseCode.CONTROLLER_MASTER_STILL_EXIST, 1))
        self.assertEqual(again.events, [])
        stale = self.state.alter_sync_state_set(h.AlterSyncStateSetRequestHeader("b", 1, 1), [1, 2], 0, self.alive)
        self.assertEqual(stale.code, ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH)
        wrong = self.state.alter_sync_state_set(h.AlterSyncStateSetRequestHeader("b", 2, 1), [1, 2], 1, self.alive)
        self.assertEqual(wrong.code, ResponseCode.CONTROLLER_INVALID_MASTER)
        grow = self.state.alter_sync_state_set(h.AlterSyncStateSetRequestHeader("b", 1, 1), [1, 2], 1, self.alive)
        self.assertEqual((grow.code, grow.header.newSyncStateSetEpoch), (ResponseCode.SUCCESS, 2))
        self.assertEqual(grow.body, b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}')
        self.commit(grow)
        info = self.state.replica_info(h.GetReplicaInfoRequestHeader("b"))
        self.assertEqual((info.header.masterBrokerId, info.header.masterAddress, info.header.masterEpoch), (1, "127.0.0.1:1", 1))

    def test_master_gone_elects_from_sync_state_set_by_epoch_and_offset(self) -> None:
        for bid in (1, 2, 3):
            self.join(bid)
        self.commit(self.state.elect_master(self.elect_req(1), self.alive, lambda *a: None))
        self.commit(self.state.alter_sync_state_set(h.AlterSyncStateSetRequestHeader("b", 1, 1), [1, 2, 3], 1, self.alive))
        self.live.discard(1)
        self.assertEqual(self.state.sets_needing_election(self.alive), ["b"])
        offsets = {2: (1, 100, 5), 3: (1, 200, 9)}  # 3 has the longer log: it wins whatever its priority
        result = self.state.elect_master(self.elect_req(), self.alive, lambda c, n, b: offsets.get(b))
        self.assertEqual((result.code, result.header.masterBrokerId, result.header.masterEpoch), (ResponseCode.SUCCESS, 3, 2))
        self.commit(result)
        self.assertEqual(self.state.tables["b"]["sss"], [3])
        self.assertEqual(self.state.sets_needing_election(self.alive), [])

    def test_no_live_replica_in_sync_state_set(self) -> None:
        for bid in (1, 2):
            self.join(bid)
        self.commit(self.state.elect_master(self.elect_req(1), self.alive, lambda *a: None))
        self.live.clear()
        self.live.add(2)  # alive, but never in the sync-state set
        result = self.state.elect_master(self.elect_req(), self.alive, lambda *a: None)
        self.assertEqual(result.code, ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE)
        self.commit(result)
        self.assertIsNone(self.state.tables["b"]["master"])
        unclean = ReplicasInfo(self.state.tables, elect_unclean=True)
        self.assertEqual(unclean.elect_master(self.elect_req(), self.alive, lambda *a: None).header.masterBrokerId, 2)

    def test_broker_ids(self) -> None:
        bad = self.state.apply_broker_id(h.ApplyBrokerIdRequestHeader("c", "b", 2, "x;1"))
        self.assertEqual(bad.code, ResponseCode.CONTROLLER_BROKER_ID_INVALID)
        self.join(1)
        taken = self.state.apply_broker_id(h.ApplyBrokerIdRequestHeader("c", "b", 1, "other;2"))
        self.assertEqual((taken.code, taken.remark), (ResponseCode.CONTROLLER_BROKER_ID_INVALID, "Fail to apply brokerId: 1 in broker-set: b"))
        unknown = self.state.register_broker(h.RegisterBrokerToControllerRequestHeader("c", "b", 7, "a"), self.alive)
        self.assertEqual(unknown.code, ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)

    def test_designated_election_and_clean(self) -> None:
        for bid in (1, 2):
            self.join(bid)
        self.commit(self.state.elect_master(self.elect_req(1), self.alive, lambda *a: None))
        self.commit(self.state.alter_sync_state_set(h.AlterSyncStateSetRequestHeader("b", 1, 1), [1, 2], 1, self.alive))
        moved = self.state.elect_master(self.elect_req(2, designate=True), self.alive, lambda *a: None)
        self.assertEqual(moved.header.masterBrokerId, 2)
        self.commit(moved)
        refused = self.state.clean_broker_data(h.CleanControllerBrokerDataRequestHeader("c", "b"), self.alive)
        self.assertEqual(refused.code, ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA)
        self.live.discard(1)
        clean = self.state.clean_broker_data(h.CleanControllerBrokerDataRequestHeader("c", "b", "1"), self.alive)
        self.assertEqual(clean.code, ResponseCode.SUCCESS, clean.remark)
        self.commit(clean)
        self.assertEqual(list(self.state.tables["b"]["brokers"]), [2])

    def test_sync_state_data_body(self) -> None:
        self.join(1)
        self.commit(self.state.elect_master(self.elect_req(1), self.alive, lambda *a: None))
        body = self.state.sync_state_data(["b", "missing"], self.alive).body
        self.assertEqual(body, b'{"replicasInfoTable":{"b":{"inSyncReplicas":[{"alive":true,"brokerAddress":"127.0.0.1:1",'
                               b'"brokerId":1,"brokerName":"b"}],"masterAddress":"127.0.0.1:1","masterBrokerId":1,'
                               b'"masterEpoch":1,"notInSyncReplicas":[],"syncStateSetEpoch":1}}}')

    def test_elect_policy_prefers_old_master_and_designated(self) -> None:
        live = lambda c, n, b: b in (1, 2)  # noqa: E731
        self.assertEqual(elect("c", "b", [1, 2], None, 1, None, live, lambda *a: None), 1)
        self.assertEqual(elect("c", "b", [1, 2], None, 1, 2, live, lambda *a: None), 2)
        self.assertIsNone(elect("c", "b", [1, 2], None, 1, 3, live, lambda *a: None))
        self.assertEqual(sync_state_set_body([3, 1], 4), b'{"syncStateSet":[1,3],"syncStateSetEpoch":4}')


class ConfigTest(unittest.TestCase):
    def test_peers_and_defaults(self) -> None:
        config = ControllerConfig.from_properties({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n1",
                                                   "controllerDLegerGroup": "g"})
        self.assertEqual(config.peers()["n2"], ("127.0.0.1", 9879))
        self.assertEqual(config.raft_address("n1"), "127.0.0.1:9879")
        self.assertEqual((config.scanNotActiveBrokerInterval, config.electMasterMaxRetryCount, config.notifyBrokerRoleChanged,
                          config.enableElectUncleanMaster), (5000, 3, True, False))
        self.assertIn("controllerDLegerSelfId=n1\n", config.format_properties())

    def test_refusals(self) -> None:
        for props, words in (({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n9"}, "not one of"),
                             ({"controllerDLegerPeers": "n0:127.0.0.1", "controllerDLegerSelfId": "n0"}, "not id-host:port"),
                             ({"controllerDLegerPeers": "", "controllerDLegerSelfId": "n0"}, "is empty"),
                             ({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n0", "controllerType": "jRaft"}, "JRaft"),
                             ({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n0", "isProcessReadEvent": "true"}, "reads"),
                             ({"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n0", "electMasterMaxRetryCount": "x"}, "integer")):
            with self.assertRaises(ValueError) as caught:
                ControllerConfig.from_properties(props)
            self.assertIn(words, str(caught.exception))
