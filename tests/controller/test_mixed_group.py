"""One controller-mode group of an Apache 5.4.0 broker and two rmqtx brokers under an rmqtx controller: the
5.x HA protocol between the two implementations, both ways.

The Apache broker starts first and is elected; the rmqtx brokers join as its slaves (Apache's handshake,
transfer frames and sync-state set expansion against rmqtx's client). ``kill -9`` of the Apache master under
SYNC sends: an rmqtx broker takes over, no acked message lost. The Apache broker, started again, rejoins as
the rmqtx master's slave (rmqtx's handshake and frames against Apache's AutoSwitchHAClient, its truncation
check included) and is back in the sync-state set; then the rmqtx master is killed in turn. At the end the
three commit logs hold the same bytes.

Trial-only in CI (a JVM, about 40 s): the pytest env ignores this file. The body runs in a child process
(rmqtx's blocking client runs the global reactor on a thread).
"""

from __future__ import annotations

import os
import sys
import unittest
from pathlib import Path

from testkit.ha import wait_until
from tests.controller.test_rmqtx_brokers import in_child

TOPIC = "MixedGroupFailover"
#: Apache's default commit log file size; a group's replicas must agree on it (frames never cross a file).
FILE_SIZE = 16 * 1024 * 1024


def _commit_log(store: Path, upto: int) -> bytes:
    d = store / "commitlog"
    return b"".join((d / n).read_bytes() for n in sorted(os.listdir(d)) if n.isdigit())[:upto]


class MixedApacheAndRmqtxGroup(unittest.TestCase):
    def test_both_directions_and_failovers(self) -> None:
        from testkit.apache5 import ApacheUnavailable, classpath
        from tests.admin.mqadmin_java import unavailable

        try:
            classpath()
        except ApacheUnavailable as e:
            raise unavailable(str(e)) from None
        if in_child(self):
            return
        from testkit.controller import ApacheBroker, RmqtxControllerModeGroup

        group = RmqtxControllerModeGroup(controllers=1, brokers=2, broker_conf={"mappedFileSizeCommitLog": FILE_SIZE})
        apache = ApacheBroker(group.root, 9, group.namesrv, group.controllers.addr_list, syncBrokerMetadataPeriod=2000)
        self.addCleanup(group.close)
        self.addCleanup(apache.stop)
        try:
            self._body(group, apache)
        except BaseException:
            print(group.logs(), file=sys.stderr)
            print(apache.log(), file=sys.stderr)
            raise

    def _body(self, group, apache) -> None:  # type: ignore[no-untyped-def]
        from rmqtx.remoting.codes import RequestCode, ResponseCode
        from rmqtx.remoting.command import RemotingCommand
        from testkit.controller import failover_run
        from testkit.standalone import call

        group.controllers.start()
        group.namesrv_proc.start()
        apache.serve()
        wait_until(lambda: apache.answering() and (group.master() or (0, "", 0))[1] == apache.addr, 120,
                   "the Apache broker elected", step=0.5)
        for broker in group.brokers:
            broker.start()
        rmqtx_brokers = list(group.brokers)
        group.brokers.append(apache)  # failover_run finds the master by address; the group's close skips it
        wait_until(lambda: len(group.sync_state_set()) == 3, 90, "both rmqtx slaves in the Apache master's set", step=0.5)
        fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        self.assertEqual(call(apache.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10).code,
                         ResponseCode.SUCCESS)

        first = failover_run(group, TOPIC, before=150, after=100, resume_timeout=30)
        self.assertEqual((first["lost"], first["changed"]), (0, 0), first)
        new_master = next(b for b in rmqtx_brokers if b.addr == first["new_master_addr"])

        apache.serve()  # same store: it rejoins as the rmqtx master's slave
        wait_until(lambda: len(group.sync_state_set()) == 3, 90, "the Apache broker back in the sync-state set", step=0.5)
        second = failover_run(group, TOPIC, before=100, after=100, resume_timeout=30)
        self.assertEqual((second["lost"], second["changed"]), (0, 0), second)
        self.assertNotEqual(second["new_master_addr"], new_master.addr)

        live = [b for b in rmqtx_brokers if b.alive()]
        def top(addr: str) -> int:
            resp = call(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 2)
            from rmqtx.broker.jsonfiles import loads_fastjson
            return int((loads_fastjson(resp.body) or {}).get("table", {}).get("commitLogMaxOffset", "-1"))
        end = top(str(second["new_master_addr"]))
        wait_until(lambda: all(top(b.addr) == end for b in [*live, apache]), 30, "every live replica caught up")
        reference = _commit_log(apache.home / "store", end)
        self.assertEqual(len(reference), end)
        for broker in live:
            self.assertEqual(_commit_log(broker.store, end), reference, f"{broker.name}'s commit log differs from Apache's")
