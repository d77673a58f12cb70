"""rmqtx brokers in controller mode under three rmqtx controllers, all real processes on loopback.

Three brokers take broker ids (Apache's ``brokerIdentity`` files), one is elected master, the sync-state
set grows to all three. SYNC sends from Apache's Java DefaultMQProducer (``allAckInSyncStateSet=true``); ``kill -9``
of the master: a new master comes from the sync-state set, the NameServer's route follows it, sends resume,
and every acked message is read back from it at the queue offset its ack named. Then a diverged log: with
the last slave stopped, the new master stores messages no one acked (WAIT=false) and is killed; the slave
is elected, and both dead brokers, restarted, rejoin as slaves, the second one truncating what the new
master never had: the three commit logs are then byte for byte the same. Last, an admin election (the
request of mqadmin's electMaster) moves the master away from a live broker, which rejoins as a slave.

The body runs in a child process: rmqtx's blocking client runs the global reactor on a thread of its own,
and trial runs the same reactor on its main thread for the tests after this one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import unittest
from pathlib import Path

from testkit.ha import Sender, wait_until

TOPIC = "RmqtxControllerFailover"
IN_CHILD = "RMQTX_CONTROLLER_BROKERS_CHILD"
#: 8 KB bodies: 2000 of them (16 MB) are more than a loopback connection's kernel buffers (tcp_rmem + tcp_wmem
#: maxima, about 10 MB by default) take while the receiving slave is stopped.
BULK_MESSAGES = 2000


def _max_offset(broker: object) -> int:
    return int(broker.runtime().get("commitLogMaxOffset", "-1"))  # type: ignore[attr-defined]


def in_child(case: unittest.TestCase) -> bool:
    """In the parent: run this very test in a child process, assert it passed, and say so (True)."""
    if os.environ.get(IN_CHILD) == "1":
        return False
    test_id = f"{type(case).__module__}.{type(case).__name__}.{case._testMethodName}"
    proc = subprocess.run([sys.executable, "-m", "unittest", "-v", test_id], cwd=Path(__file__).resolve().parents[2],
                          env={**os.environ, IN_CHILD: "1"}, capture_output=True, text=True, timeout=600)
    case.assertEqual(proc.returncode, 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-12000:]}")
    case.assertIn("OK", proc.stderr[-300:], proc.stderr[-3000:])
    return True


class Scenario(unittest.TestCase):
    """The scenario; subclasses say which controllers the group has."""

    apache_controller = False
    #: the failover's SYNC sends come from Apache's Java DefaultMQProducer (testkit/javaproducer.py)
    client = "java"

    def run_scenario(self) -> None:
        from testkit.controller import CLUSTER, RmqtxControllerModeGroup, failover_run

        group = RmqtxControllerModeGroup(controllers=3, apache_controller=self.apache_controller).start()
        self.addCleanup(group.close)
        try:
            self._body(group, CLUSTER, failover_run)
        except BaseException:
            print(group.logs(), file=sys.stderr)
            print(group.controllers.events()[-4000:], file=sys.stderr)
            raise

    def _body(self, group, cluster: str, failover_run) -> None:  # type: ignore[no-untyped-def]
        wait_until(lambda: len(group.sync_state_set()) == 3, 60, "all three brokers in the sync-state set", step=0.3)
        ids = set()
        for broker in group.brokers:
            text = (broker.store / "brokerIdentity").read_text()
            name_cluster, name, bid = text.split("#")
            self.assertEqual((name_cluster, name), (cluster, "broker-a"))
            ids.add(int(bid))
            self.assertFalse((broker.store / "brokerIdentity-temp").exists())
        self.assertEqual(ids, {1, 2, 3})
        first_id, first_addr, first_epoch = group.wait_master(10)
        self.assertEqual(group.namesrv_proc.broker_addrs()[0], first_addr)
        epochs = (group.broker_at(first_addr).store / "epochFileCheckpoint").read_text().split("\n")
        self.assertEqual(epochs[0], "1")  # one term so far, starting at offset 0
        self.assertEqual(epochs[2], f"{first_epoch}-0")

        # 0. consumer visibility: what the sync-state set does not have yet is not readable from the master
        group.create_topic(TOPIC)
        self._unconfirmed_not_readable(group, first_addr)

        # 1. kill -9 of the master under SYNC sends, a consumer pulling from the master all along
        figures = failover_run(group, TOPIC, before=150, after=100, resume_timeout=30, watch=True, client=self.client)
        self.assertEqual(figures["lost"], 0, figures)
        self.assertEqual(figures["changed"], 0, figures)
        self.assertGreater(figures["watched"], 0, figures)
        self.assertEqual(figures["served_twice"], [], figures)
        self.assertEqual(figures["read_dropped"], [], figures)
        self.assertLess(figures["resumed_s"], 10, figures)
        second_addr = str(figures["new_master_addr"])
        wait_until(lambda: group.namesrv_proc.broker_addrs().get(0) == second_addr, 15, "the route naming the new master")
        first, second = group.broker_at(first_addr), group.broker_at(second_addr)
        third = next(b for b in group.brokers if b not in (first, second))
        wait_until(lambda: sorted(group.sync_state_set()) == sorted({figures["new_master"], _broker_id(third)}), 30,
                   "the sync-state set without the dead master", step=0.3)

        # 2. a diverged log: the last slave is stopped (SIGSTOP) while the master stores more than loopback's
        #    socket buffers hold (so the tail cannot reach the slave), unacknowledged (WAIT=false); then it dies
        wait_until(lambda: _max_offset(third) == _max_offset(second), 15, "the last slave caught up")
        assert third.proc is not None
        os.kill(third.proc.pid, signal.SIGSTOP)
        try:
            sender = Sender(second_addr)
            filler = b"f" * 8000
            for i in range(BULK_MESSAGES):
                resp = sender.send(TOPIC, filler, 2, WAIT="false")
                self.assertEqual(resp.code, 0, resp.remark)
            unacked_at = []
            for i in range(5):
                resp = sender.send(TOPIC, f"unacked-{i}".encode(), 0, WAIT="false")
                self.assertEqual(resp.code, 0, resp.remark)
                unacked_at.append(int(resp.ext_fields["queueOffset"]))
            sender.close()
            from testkit.ha import pull

            answer, records = pull(second_addr, TOPIC, 0, unacked_at[0])  # the stopped slave never acked them
            self.assertEqual(records, [], f"an unconfirmed message was readable: {answer.ext_fields}")
            second_end = _max_offset(second)
            second.kill9()
        finally:
            os.kill(third.proc.pid, signal.SIGCONT)
        _, third_addr, third_epoch = group.wait_master(30, other_than=second_addr)
        self.assertEqual(third_addr, third.addr)
        wait_until(lambda: group.namesrv_proc.broker_addrs().get(0) == third.addr, 15, "the route naming the third master")

        # 3. both dead brokers come back as slaves; the second one cuts its log back to the third's
        sender = Sender(third.addr)
        resp = sender.send(TOPIC, b"after-second-failover", 1)
        self.assertEqual(resp.code, 0, resp.remark)
        resp = sender.send(TOPIC, b"at-a-reused-offset", 0)  # the offset the dead master gave "unacked-0"
        self.assertEqual(resp.code, 0, resp.remark)
        self.assertEqual(int(resp.ext_fields["queueOffset"]), unacked_at[0])
        sender.close()
        from testkit.ha import pull

        self.assertEqual([r.body for r in pull(third.addr, TOPIC, 0, unacked_at[0])[1]], [b"at-a-reused-offset"])
        second.start()
        first.start()
        wait_until(lambda: len(group.sync_state_set()) == 3, 60, "the rejoined brokers back in the sync-state set", step=0.3)
        self.assertGreaterEqual(second.log_count("truncating the commit log"), 1, second.log())
        top = _max_offset(third)
        self.assertLess(top - 100, second_end)  # the third master never had the old one's tail
        wait_until(lambda: _max_offset(first) == top and _max_offset(second) == top, 30, "both rejoined slaves caught up")
        reference = third.commit_log_bytes(top)
        self.assertEqual(len(reference), top)
        for broker in (first, second):
            self.assertEqual(broker.commit_log_bytes(top), reference, f"{broker.name}'s commit log differs")
        self.assertNotIn(b"unacked-", reference)
        self.assertGreater(third_epoch, first_epoch)

        # 4. an admin election (mqadmin electMaster's request) moves the master away from a live broker
        from rmqtx.remoting.codes import RequestCode

        target = _broker_id(first)
        resp = group.controllers.request(RequestCode.CONTROLLER_ELECT_MASTER, {
            "clusterName": cluster, "brokerName": "broker-a", "brokerId": target, "designateElect": "true",
            "invokeTime": int(time.time() * 1000)})
        self.assertEqual(resp.code, 0, resp.remark)
        wait_until(lambda: group.namesrv_proc.broker_addrs().get(0) == first.addr, 15, "the route naming the elected broker")
        sender = Sender(first.addr)
        self.assertEqual(sender.send(TOPIC, b"after-admin-election", 1).code, 0)
        sender.close()
        wait_until(lambda: len(group.sync_state_set()) == 3, 30, "the demoted master back in the sync-state set", step=0.3)


    def _unconfirmed_not_readable(self, group, master_addr: str) -> None:  # type: ignore[no-untyped-def]
        """Both slaves stopped (SIGSTOP): a message the master stored (WAIT=false) is not pullable, and a long
        poll for it is held; once they run again and ack, the held poll wakes with it."""
        import threading

        from testkit.ha import pull, pull_held

        slaves = [b for b in group.brokers if b.addr != master_addr]
        wait_until(lambda: all(_max_offset(b) == _max_offset(group.broker_at(master_addr)) for b in slaves), 15,
                   "the slaves caught up")
        for b in slaves:
            os.kill(b.proc.pid, signal.SIGSTOP)
        held: list = []
        try:
            sender = Sender(master_addr)
            resp = sender.send(TOPIC, b"wait-for-the-sync-state-set", 3, WAIT="false")
            sender.close()
            self.assertEqual(resp.code, 0, resp.remark)
            offset = int(resp.ext_fields["queueOffset"])
            time.sleep(0.5)  # several acks' worth of time: the gate must hold, not race
            answer, records = pull(master_addr, TOPIC, 3, offset)
            self.assertEqual(records, [], f"read before the sync-state set had it: {answer.code} {answer.ext_fields}")
            poll = threading.Thread(target=lambda: held.append(pull_held(master_addr, TOPIC, 3, offset, 20000)))
            poll.start()
            time.sleep(0.5)
            self.assertEqual(held, [], "the long poll answered before the slaves acked")
        finally:
            for b in slaves:
                os.kill(b.proc.pid, signal.SIGCONT)
        began = time.monotonic()
        poll.join(25)
        self.assertTrue(held and held[0][1], f"the held pull did not wake with the message: {held}")
        self.assertLess(time.monotonic() - began, 10)
        self.assertEqual(held[0][1][0].body, b"wait-for-the-sync-state-set")
        self.assertEqual([r.body for r in pull(master_addr, TOPIC, 3, offset)[1]], [b"wait-for-the-sync-state-set"])


def _broker_id(broker: object) -> int:
    return int((broker.store / "brokerIdentity").read_text().split("#")[2])  # type: ignore[attr-defined]


class RmqtxBrokersUnderRmqtxControllers(Scenario):
    def test_ids_failover_rejoin_and_truncation(self) -> None:
        if not in_child(self):
            self.run_scenario()
