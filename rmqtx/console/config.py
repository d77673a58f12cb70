"""The console's broker.conf keys (rmqtx's own; Java has no console in the broker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from rmqtx.common.properties import bool_setting


@dataclass(frozen=True)
class ConsoleConfig:
    """broker.conf keys (rmqtx's own): consolePort (-1 off, 0 any free port), consoleListenAddress, consoleAdminEnable."""

    port: int = -1
    listen_address: str = "127.0.0.1"
    admin_enable: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "ConsoleConfig":
        text = props.get("consolePort", "").strip()
        try:
            port = int(text) if text else -1
        except ValueError:
            raise ValueError(f"broker.conf: consolePort={text!r} is not a number") from None
        return cls(port, props.get("consoleListenAddress", "").strip() or "127.0.0.1",
                   bool_setting(props, "consoleAdminEnable", False))
