"""A network partition between master and slave: the HA link runs through a loopback relay that can be
cut like a dead link (bytes vanish both ways, no FIN, no RST). The SYNC_MASTER answers FLUSH_SLAVE_TIMEOUT,
then SLAVE_NOT_AVAILABLE once housekeeping drops the silent slave; the slave keeps its store and serves
reads; when the link is back the slave reconnects and catches up byte for byte, and sends are acked again.

A relay rather than ``ip netns``: network namespaces need root and CAP_NET_ADMIN, which CI may not have."""

from __future__ import annotations

import unittest

from rmqtx.remoting.codes import ResponseCode
from testkit.ha import Cluster, Sender, pull, wait_until
from testkit.link import Link
from tests.ha.test_replication import commit_log_end, send_many

TOPIC = "T_ha"  # send_many's topic


class PartitionTest(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = Cluster()
        self.link: Link | None = None

    def tearDown(self) -> None:
        if self.link is not None:
            self.link.close()
        self.assertEqual(self.cluster.close(), [])

    def test_partition_is_survived_and_the_slave_catches_up(self) -> None:
        fast = {"haHousekeepingInterval": 3000, "haSendHeartbeatInterval": 1000}
        master = self.cluster.broker("master", brokerRole="SYNC_MASTER", slaveTimeout=1000, **fast).start()
        self.link = link = Link(master.ha_addr)
        slave = self.cluster.broker("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=link.addr, **fast).start()
        wait_until(lambda: "requests offset" in master.log(), 20, "the slave's first report")
        before = send_many(master.addr, 200)
        end = commit_log_end(before, master)
        wait_until(lambda: slave.commit_log_bytes(end) == master.commit_log_bytes(end), 20, "the first copy")

        link.cut()
        sender = Sender(master.addr)
        codes = []
        wait_until(lambda: codes.append(sender.send(TOPIC, b"cut off", 1).code) or codes[-1] == ResponseCode.SLAVE_NOT_AVAILABLE,
                   30, "the master to drop the silent slave")
        self.assertEqual(codes[0], ResponseCode.FLUSH_SLAVE_TIMEOUT)  # connected, but no ack comes
        during = [sender.send(TOPIC, b"during-%d" % i + b"d" * 700, i % 4) for i in range(1500)]
        self.assertEqual({r.code for r in during}, {ResponseCode.SLAVE_NOT_AVAILABLE})  # stored, answered at once
        wait_until(lambda: "HA: closing connection to master" in slave.log(), 20, "the slave to give up on the master")
        self.assertEqual(slave.commit_log_bytes(end), master.commit_log_bytes(end))  # what it had stays intact
        resp, recs = pull(slave.addr, TOPIC, 0, 0)
        self.assertEqual(resp.code, ResponseCode.SUCCESS)
        self.assertEqual(recs[0].body, before[0][1])  # and it serves reads

        link.heal()
        wait_until(lambda: sender.send(TOPIC, b"healed", 2).code == ResponseCode.SUCCESS, 30, "sends acked again")
        end = len(master.commit_log_bytes().rstrip(b"\0"))
        wait_until(lambda: slave.commit_log_bytes(end) == master.commit_log_bytes(end), 30, "the catch-up")
        self.assertGreater(end, 1024 * 1024)  # the commit log's second file came across too
        sender.close()


if __name__ == "__main__":
    unittest.main()
