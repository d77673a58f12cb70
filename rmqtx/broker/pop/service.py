"""The POP parts a broker holds: settings, checkpoints and revive, orderly locks, long polls, modes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqtx.broker.pop.order import OrderInfoManager
from rmqtx.broker.pop.polling import PopHoldService
from rmqtx.broker.pop.request_mode import MessageRequestModeManager
from rmqtx.broker.pop.revive import ReviveService
from rmqtx.broker.pop.settings import PopSettings

if TYPE_CHECKING:
    from rmqtx.broker.core import BrokerCore


class PopService:
    def __init__(self, ctx: "BrokerCore", reactor: Any) -> None:
        self.settings: PopSettings = ctx.config.pop
        self.revive = ReviveService(ctx, self.settings, reactor)
        self.order = OrderInfoManager()
        self.holds = PopHoldService(reactor)
        self.modes = MessageRequestModeManager(ctx.config.storePathRootDir)
        self._ctx = ctx

    def load(self) -> None:
        self.modes.load()
        self.revive.load()

    def start(self) -> None:
        """Revive runs on a master only (a slave's revive topic is the master's copy)."""
        if not self._ctx.config.is_slave:
            self.revive.start()

    def stop(self) -> None:
        self.revive.stop()
        self.holds.stop()
