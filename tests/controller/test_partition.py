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

The same again under ``flushDiskType=SYNC_FLUSH`` (PartitionedSyncFlushMaster): the old master's process, and
so its group commit thread, lives through the demotion and the truncation; made master again, it acks
SYNC_FLUSH sends and serves every message acked in either term.

No client reactor here (raw frames and threads), so it runs under pytest and trial alike.
"""

from __future__ import annotations

import unittest
from typing import TYPE_CHECKING, cast

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.ha import Sender, pull, wait_until
from testkit.link import Link

if TYPE_CHECKING:
    from testkit.controller import RmqtxControllerModeGroup
    from testkit.ha import Broker

TOPIC = "PartitionTopic"
ISOLATED = "127.0.0.2"  # what the master advertises; its relays listen there


def _max_offset(broker: Broker) -> int:
    return int(broker.runtime().get("commitLogMaxOffset", "-1"))


def _broker_id(broker: Broker) -> int:
    return int((broker.store / "brokerIdentity").read_text().split("#")[2])


class PartitionedMaster(unittest.TestCase):
    #: every broker's flushDiskType
    flush = "ASYNC_FLUSH"
    #: bytes added to each message the isolated master stores alone (its diverged tail)
    isolated_padding = 0

    def setUp(self) -> None:
        #: (queue id, queue offset, body) of every send answered SUCCESS
        self.acked: list[tuple[int, int, bytes]] = []

    def send(self, sender: Sender, body: bytes, queue_id: int) -> RemotingCommand:
        """One SYNC send; a SUCCESS is noted in ``acked``."""
        resp = sender.send(TOPIC, body, queue_id)
        if resp.code == ResponseCode.SUCCESS:
            fields = resp.ext_fields or {}
            self.acked.append((int(fields["queueId"]), int(fields["queueOffset"]), body))
        return resp

    def test_partition_elects_a_slave_and_the_old_master_rejoins_truncated(self) -> None:
        from testkit.controller import RmqtxControllerModeGroup

        group = RmqtxControllerModeGroup(controllers=1, broker_conf={
            "controllerHeartBeatTimeoutMills": 4000, "haMaxTimeSlaveNotCatchup": 1500, "slaveTimeout": 1500,
            "checkSyncStateSetPeriod": 1000, "syncControllerMetadataPeriod": 1000, "flushDiskType": self.flush})
        self.addCleanup(group.close)
        brokers = cast("list[Broker]", group.brokers)  # rmqtx brokers (the base class has Apache's)
        master = brokers[0]
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
            self.elect(group, master, master_addr)
        wait_until(lambda: len(group.sync_state_set()) == 3, 60, "all three in the sync-state set", step=0.3)
        _, _, first_epoch = group.wait_master(5)
        group.create_topic(TOPIC)
        old = Sender(master.addr)
        self.addCleanup(old.close)
        for i in range(20):
            resp = self.send(old, f"before-{i}".encode(), i % 4)
            self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        slaves = brokers[1:]
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
            resp = self.send(old, f"isolated-{i}".encode() + bytes(self.isolated_padding), 0)
            codes.add(resp.code)
        self.assertLessEqual(codes, {ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE}, codes)
        isolated_end = _max_offset(master)
        self.assertGreater(isolated_end, top)  # stored locally: a diverged tail

        # the new master acks (once its sync-state set is what its slave can meet)
        fresh = Sender(new.addr)
        self.addCleanup(fresh.close)
        wait_until(lambda: self.send(fresh, b"after-election", 1).code == ResponseCode.SUCCESS, 30,
                   "SYNC sends acked by the new master", step=0.3)
        for i in range(20):
            resp = self.send(fresh, f"new-{i}".encode(), i % 4)
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
        self.assert_served(new.addr)
        self.rejoined(group, master, master_addr, isolated_end)

    def assert_served(self, addr: str) -> None:
        """Every send answered SUCCESS is read back from ``addr`` at the queue offset its answer named."""
        for queue_id, offset, body in self.acked:
            resp, records = pull(addr, TOPIC, queue_id, offset, max_nums=1)
            self.assertEqual(resp.code, ResponseCode.SUCCESS, f"queue {queue_id} offset {offset}: {resp.remark}")
            self.assertEqual((records[0].queue_offset, records[0].body), (offset, body))

    def elect(self, group: RmqtxControllerModeGroup, broker: Broker, addr: str) -> None:
        """Have the controller elect ``broker`` (in the sync-state set) master, known as ``addr``."""
        from testkit.controller import CLUSTER, BROKER_NAME

        wait_until(lambda: len(group.sync_state_set()) == 3, 60, "all three in the sync-state set", step=0.3)
        resp = group.controllers.request(RequestCode.CONTROLLER_ELECT_MASTER, {
            "clusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerId": _broker_id(broker),
            "designateElect": "true", "invokeTime": 0})
        self.assertEqual(resp.code, ResponseCode.SUCCESS, resp.remark)
        wait_until(lambda: group.wait_master(5)[1] == addr, 30, f"{addr} elected")

    def rejoined(self, group: RmqtxControllerModeGroup, old: Broker, old_addr: str, isolated_end: int) -> None:
        """What the old master, a slave again with its tail cut, is checked for further."""


class PartitionedSyncFlushMaster(PartitionedMaster):
    """The same partition under SYNC_FLUSH: the old master's process, and its group commit thread
    (rmqtx.store.committer), live through the demotion. That thread had synced the isolated tail; the
    truncation must make it forget that (FlushService.truncated). The isolated tail is longer than what the new
    master writes meanwhile, so the rejoined log ends before where the thread had synced to: a thread that still
    counted those bytes as synced would never sync the ones written there again, and the old master, made master
    again, would answer its SYNC_FLUSH sends FLUSH_DISK_TIMEOUT (until its log passed the old end)."""

    flush = "SYNC_FLUSH"
    isolated_padding = 64 * 1024

    def rejoined(self, group: RmqtxControllerModeGroup, old: Broker, old_addr: str, isolated_end: int) -> None:
        self.assertLess(_max_offset(old), isolated_end)  # the cut went back past what had been synced
        self.elect(group, old, old_addr)
        again = Sender(old.addr)
        self.addCleanup(again.close)

        def acked() -> bool:
            resp = self.send(again, b"master-again", 2)
            if resp.code == ResponseCode.FLUSH_DISK_TIMEOUT:  # other codes while it takes the role; never this one
                raise AssertionError(f"FLUSH_DISK_TIMEOUT from the old master, master again: {resp.remark}")
            return resp.code == ResponseCode.SUCCESS
        wait_until(acked, 30, "SYNC_FLUSH sends acked by the old master, master again", step=0.3)
        for i in range(20):
            resp = self.send(again, f"again-{i}".encode(), i % 4)
            self.assertEqual(resp.code, ResponseCode.SUCCESS, f"{resp.code} {resp.remark}")
        top = _max_offset(old)
        self.assertLess(top, isolated_end)  # every one of them written below where the thread had synced to
        others = [b for b in cast("list[Broker]", group.brokers) if b is not old]
        wait_until(lambda: all(_max_offset(b) == top for b in others), 20, "the slaves caught up")
        for b in others:
            self.assertEqual(b.commit_log_bytes(), old.commit_log_bytes(), b.name)
        self.assert_served(old.addr)
