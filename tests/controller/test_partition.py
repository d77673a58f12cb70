"""A real partition in controller mode: the master is cut off from the controller and from its slaves while
every process keeps running. Everything that reaches the master, and the master's own link to the controller,
goes through loopback relays (testkit.link.Link) that can be cut like a dead link: bytes vanish both ways, no
FIN, no RST. The master advertises 127.0.0.2 (brokerIP1/brokerIP2) where the relays listen, and binds
127.0.0.1 only, where this test reaches it directly, as a client on its side of the partition would.

The controller misses the master's heartbeats and elects a slave from the sync-state set; the isolated master
stops acking SYNC sends (``allAckInSyncStateSet=true``: its slaves are silent and the controller that would
confirm a smaller sync-state set is unreachable); sends to the new master are acked. When the links heal, the
old master learns the new epoch, rejoins as a slave and truncates what it stored alone: its commit log ends
byte for byte like the new master's.

No client reactor here (raw frames and threads), so it runs under pytest and trial alike.
"""

from __future__ import annotations

import unittest

from rmqtx.remoting.codes import RequestCode, ResponseCode
from testkit.ha import Sender, wait_until
from testkit.link import Link

TOPIC = "PartitionTopic"
ISOLATED = "127.0.0.2"  # what the master advertises; its relays listen there


def _max_offset(broker: object) -> int:
    return int(broker.runtime().get("commitLogMaxOffset", "-1"))  # type: ignore[attr-defined]


def _broker_id(broker: object) -> int:
    return int((broker.store / "brokerIdentity").read_text().split("#")[2])  # type: ignore[attr-defined]


class PartitionedMaster(unittest.TestCase):
    def test_partition_elects_a_slave_and_the_old_master_rejoins_truncated(self) -> None:
        from testkit.controller import CLUSTER, BROKER_NAME, RmqtxControllerModeGroup

        group = RmqtxControllerModeGroup(controllers=1, broker_conf={
            "controllerHeartBeatTimeoutMills": 4000, "haMaxTimeSlaveNotCatchup": 1500, "slaveTimeout": 1500,
            "checkSyncStateSetPeriod": 1000, "syncControllerMetadataPeriod": 1000})
        self.addCleanup(group.close)
        master = group.brokers[0]
        ctl_host, ctl_port = group.controllers.addrs["n0"].rsplit(":", 1)
        links = [
            Link(group.controllers.addrs["n0"], (ISOLATED, int(ctl_port)),
                 rewrite=(f"{ctl_host}:{ctl_port}".encode(), f"{ISOLATED}:{ctl_port}".encode())),
            Link(master.addr, (ISOLATED, master.port)),
            Link(master.ha_addr, (ISOLATED, master.ha_port)),
        ]
        for link in links:
            self.addCleanup(link.close)
        master.conf.update({"brokerIP1": ISOLATED, "brokerIP2": ISOLATED, "controllerAddr": links[0].addr})
        master_addr = f"{ISOLATED}:{master.port}"  # as the controller and the NameServer know it
        group.start()
        if group.wait_master(30)[1] != master_addr:  # the first to register is elected; if not, make it so
            wait_until(lambda: len(group.sync_state_set()) == 3, 60, "all three in the sync-state set", step=0.3)
            resp = group.controllers.request(RequestCode.CONTROLLER_ELECT_MASTER, {
                "clusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerId": _broker_id(master),
                "designateElect": "true", "invokeTime": 0})
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
            wait_until(lambda: group.wait_master(5)[1] == master_addr, 30, "the relayed broker elected")
        wait_until(lambda: len(group.sync_state_set()) == 3, 60, "all three in the sync-state set", step=0.3)
        _, _, first_epoch = group.wait_master(5)
        group.create_topic(TOPIC)
        old = Sender(master.addr)
        self.addCleanup(old.close)
        for i in range(20):
            resp = old.send(TOPIC, f"before-{i}".encode(), i % 4)
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        slaves = group.brokers[1:]
        top = _max_offset(master)
        wait_until(lambda: all(_max_offset(s) == top for s in slaves), 20, "the slaves caught up")

        # the partition: the master's links to the controller and from its slaves go dead
        for link in links:
            link.cut()
        try:
            new_id, new_addr, new_epoch = group.wait_master(30, other_than=master_addr)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{group.controllers.events()}\n{group.logs()}") from None
        self.assertGreater(new_epoch, first_epoch)
        new = next(b for b in slaves if b.addr == new_addr)
        self.assertEqual(new_id, _broker_id(new))

        # the isolated master stores but does not ack: nothing confirms a sync-state set it could meet
        codes = set()
        for i in range(3):
            resp = old.send(TOPIC, f"isolated-{i}".encode(), 0)
            codes.add(resp.code)
        self.assertLessEqual(codes, {ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE}, codes)
        isolated_end = _max_offset(master)
        self.assertGreater(isolated_end, top)  # stored locally: a diverged tail

        # the new master acks (once its sync-state set is what its slave can meet)
        fresh = Sender(new.addr)
        self.addCleanup(fresh.close)
        wait_until(lambda: fresh.send(TOPIC, b"after-election", 1).code == ResponseCode.SUCCESS, 30,
                   "SYNC sends acked by the new master", step=0.3)
        for i in range(20):
            resp = fresh.send(TOPIC, f"new-{i}".encode(), i % 4)
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)

        # the partition heals: the old master becomes a slave and cuts its tail back to the new master's log
        for link in links:
            link.heal()
        wait_until(lambda: len(group.sync_state_set()) == 3, 60, "the old master back in the sync-state set", step=0.3)
        self.assertEqual(group.wait_master(5)[1], new_addr)
        self.assertGreaterEqual(master.log_count("truncating the commit log"), 1, master.log()[-3000:])
        end = _max_offset(new)
        wait_until(lambda: _max_offset(master) == end, 30, "the old master caught up")
        self.assertEqual(master.commit_log_bytes(), new.commit_log_bytes())
        self.assertNotIn(b"isolated-", master.commit_log_bytes())
