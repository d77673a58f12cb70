"""The periodic registration follows registerNameServerPeriod within Java's 10-60 s bounds: a restarted,
empty NameServer of a cluster learns every broker again within the period (tests/cluster shows it)."""

from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from tests.broker.inprocess import InProcessCluster


class RegistrationPeriodTest(unittest.TestCase):
    timeout = 30

    @defer.inlineCallbacks
    def period_of(self, configured: str | None):
        conf = {} if configured is None else {"registerNameServerPeriod": configured}
        cluster = InProcessCluster(**conf)
        cluster.start()
        try:
            loop = cluster.broker.ctx.registrar._loop
            return loop.interval if loop is not None and loop.running else None
        finally:
            yield defer.ensureDeferred(cluster.stop())

    @defer.inlineCallbacks
    def test_default_and_bounds(self) -> None:
        self.assertEqual((yield self.period_of(None)), 30.0)
        self.assertEqual((yield self.period_of("15000")), 15.0)
        self.assertEqual((yield self.period_of("1000")), 10.0)  # Java: never below 10 s
        self.assertEqual((yield self.period_of("600000")), 60.0)  # nor above 60 s
