"""NameServer + Broker services in the test's own reactor, on loopback port 0, store in a temp dir.

The broker goes through ``rmqtx.launcher.with_endpoints``, as ``twistd rmqbroker`` does: a ``consolePort``
or ``grpcPort`` in the broker's settings starts the console or the gRPC endpoint beside it."""

from __future__ import annotations

import tempfile

from twisted.application.service import MultiService
from twisted.internet import defer

from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.service import BrokerService
from rmqtx.launcher import with_endpoints
from rmqtx.namesrv.config import NamesrvConfig
from rmqtx.namesrv.service import NamesrvService


class InProcessCluster:
    def __init__(self, **broker_conf: str) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-broker-")
        self.namesrv = NamesrvService(
            NamesrvConfig.from_properties({"listenAddress": "127.0.0.1", "listenPort": "0", "kvConfigPath": f"{self.tmp.name}/kv.json"})
        )
        self.broker_conf = {
            "listenAddress": "127.0.0.1",
            "brokerIP1": "127.0.0.1",
            "listenPort": "0",
            "storePathRootDir": f"{self.tmp.name}/store",
            "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
            "mappedFileSizeConsumeQueue": "60000",
            "maxIndexNum": "4000",
            "maxHashSlotNum": "1000",
            **broker_conf,
        }
        self.broker: BrokerService | None = None
        self.node: MultiService | None = None  # the broker with its console and gRPC endpoint, when on

    def start(self) -> None:
        self.namesrv.startService()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv.port.getHost().port}"
        self.start_broker()

    def start_broker(self) -> None:
        """A new broker on the cluster's store and settings (``listenPort`` 0: a new port)."""
        self.broker = BrokerService(BrokerConfig.from_properties({**self.broker_conf, "namesrvAddr": self.namesrv_addr}))
        self.node = with_endpoints(self.broker)
        self.node.startService()
        self.broker_addr = self.broker.config.broker_addr

    async def stop_broker(self) -> None:
        node, self.node = self.node, None
        if node is not None:
            await node.stopService()

    async def restart_broker(self) -> None:
        """Stop the broker (cleanly) and start a new one on the same store."""
        await self.stop_broker()
        self.start_broker()

    async def stop(self) -> None:
        await self.stop_broker()
        await defer.maybeDeferred(self.namesrv.stopService)
        self.tmp.cleanup()
