"""A real NameServer + Broker per test and clients tuned for short test runs."""

from __future__ import annotations

import itertools
import time
from typing import Callable

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from rmqtx.client.config import ClientConfig
from tests.broker.inprocess import InProcessCluster

_names = itertools.count()


class ClusterTestCase(unittest.TestCase):
    """Starts an InProcessCluster (real TCP on loopback) before each test, stops it after."""

    timeout = 60
    broker_conf: dict[str, str] = {}

    def setUp(self) -> defer.Deferred | None:
        self.cluster = InProcessCluster(**self.broker_conf)
        self.cluster.start()
        self.addCleanup(lambda: defer.ensureDeferred(self.cluster.stop()))
        return None

    def config(self, name: str | None = None, **overrides: float) -> ClientConfig:
        """A client config with its own instance and fast background tasks."""
        settings = dict(poll_namesrv_interval=1.0, heartbeat_interval=2.0, persist_offset_interval=0.5, rebalance_interval=1.0)
        settings.update(overrides)
        return ClientConfig(
            self.cluster.namesrv_addr,
            instance_name=name or f"test-{next(_names)}",
            client_ip="127.0.0.1",
            **settings,  # type: ignore[arg-type]
        )


async def wait_until(predicate: Callable[[], bool], timeout: float = 15.0, step: float = 0.05) -> None:
    """Poll ``predicate`` in the reactor until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await task.deferLater(reactor, step, lambda: None)


def sleep(seconds: float) -> defer.Deferred:
    return task.deferLater(reactor, seconds, lambda: None)
