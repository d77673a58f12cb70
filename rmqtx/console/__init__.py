"""The web console and Prometheus ``/metrics``, served by the broker process itself (off by default)."""

from __future__ import annotations

from typing import Any

from rmqtx.console.config import ConsoleConfig


def start_console(broker: Any, config: ConsoleConfig, reactor: Any) -> Any:
    """Listen when consolePort is set (the web parts load only then); the listening port, or None."""
    if config.port < 0:
        return None
    from rmqtx.console.web import listen

    return listen(broker, config, reactor)
