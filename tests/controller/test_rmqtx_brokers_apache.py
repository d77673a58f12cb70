"""rmqtx brokers in controller mode under Apache 5.4.0's controller (``ControllerStartup``, one DLedger node,
from Maven Central): the scenario of test_rmqtx_brokers (broker ids, kill -9 failover without acked loss, a
diverged log truncated on rejoin), each request and NOTIFY_BROKER_ROLE_CHANGED from Apache's own code.

Trial-only in CI (a JVM): the pytest env ignores this file. The body runs in a child process, as there.
"""

from __future__ import annotations

from tests.controller.test_rmqtx_brokers import Scenario, in_child


class RmqtxBrokersUnderApacheController(Scenario):
    apache_controller = True

    def test_ids_failover_rejoin_and_truncation(self) -> None:
        from testkit.apache5 import ApacheUnavailable, classpath
        from tests.admin.mqadmin_java import unavailable

        try:
            classpath()
        except ApacheUnavailable as e:
            raise unavailable(str(e)) from None
        if not in_child(self):
            self.run_scenario()
