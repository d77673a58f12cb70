"""NameServer + Broker services in the test's own reactor, on loopback port 0, store in a temp dir."""

from __future__ import annotations

import tempfile

from twisted.internet import defer

from rmqtx.broker.config import BrokerConfig
from rmqtx.broker.service import BrokerService
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

    def start(self) -> None:
        self.namesrv.startService()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv.port.getHost().port}"
        self.broker = BrokerService(BrokerConfig.from_properties({**self.broker_conf, "namesrvAddr": self.namesrv_addr}))
        self.broker.startService()
        self.broker_addr = self.broker.config.broker_addr

    async def stop(self) -> None:
        if self.broker is not None:
            await self.broker.stopService()
        await defer.maybeDeferred(self.namesrv.stopService)
        self.tmp.cleanup()
