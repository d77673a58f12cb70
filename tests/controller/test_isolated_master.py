"""An rmqtx master in controller mode cut off from its controller and its slaves (all three SIGSTOPped: nothing
answers, no connection closes, as in a partition) stops acking SYNC sends (``allAckInSyncStateSet=true``):
FLUSH_SLAVE_TIMEOUT, also after it has given up on its slaves (``haMaxTimeSlaveNotCatchup``), since the
controller, unreachable, never confirms a smaller sync-state set. When the partition heals, sends are
acked again.

No client reactor thread here (raw frames), but the group's processes are shared by nothing else: one test.
"""

from __future__ import annotations

import os
import signal
import time
import unittest

from rmqtx.remoting.codes import ResponseCode
from testkit.ha import Sender, wait_until

TOPIC = "IsolatedMasterTopic"


class IsolatedMaster(unittest.TestCase):
    def test_stops_acking_sync_sends(self) -> None:
        from testkit.controller import RmqtxControllerModeGroup

        group = RmqtxControllerModeGroup(controllers=1, broker_conf={"haMaxTimeSlaveNotCatchup": 1500,
                                                                     "checkSyncStateSetPeriod": 1000,
                                                                     "slaveTimeout": 1500})
        group.start()
        self.addCleanup(group.close)
        wait_until(lambda: len(group.sync_state_set()) == 3, 60, "all three in the sync-state set", step=0.3)
        _, master_addr, _ = group.wait_master(10)
        group.create_topic(TOPIC)
        sender = Sender(master_addr)
        self.addCleanup(sender.close)
        self.assertEqual(sender.send(TOPIC, b"before").code, ResponseCode.SUCCESS)

        others = [b for b in group.brokers if b.addr != master_addr] + list(group.controllers.nodes.values())
        pids = [p.proc.pid for p in others if p.proc is not None]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            resp = sender.send(TOPIC, b"cut-off-1")
            self.assertEqual(resp.code, ResponseCode.FLUSH_SLAVE_TIMEOUT, resp.remark)
            time.sleep(3)  # past haMaxTimeSlaveNotCatchup and a sync-state set check: the shrink is proposed, unanswered
            resp = sender.send(TOPIC, b"cut-off-2")
            self.assertEqual(resp.code, ResponseCode.FLUSH_SLAVE_TIMEOUT, resp.remark)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        wait_until(lambda: sender.send(TOPIC, b"healed").code == ResponseCode.SUCCESS, 30, "SYNC sends acked again",
                   step=0.5)
