"""The web console and Prometheus ``/metrics``, served by the broker process itself (off by default)."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer

from rmqtx.console.config import ConsoleConfig


class Listening:
    """The console's port and Apache 5.x's Prometheus exporter port, either absent; stopped together."""

    def __init__(self, console: Any, prometheus: Any) -> None:
        self.console = console
        self.prometheus = prometheus

    def ports(self) -> list[Any]:
        return [p for p in (self.console, self.prometheus) if p is not None]

    def getHost(self) -> Any:
        return self.ports()[0].getHost()

    def stopListening(self) -> "defer.Deferred[Any]":
        return defer.gatherResults([defer.maybeDeferred(p.stopListening) for p in self.ports()])


def start_console(broker: Any, config: ConsoleConfig, reactor: Any) -> Any:
    """Listen when consolePort is set, and on metricsPromExporterPort when metricsExporterType=PROM
    (the web parts load only then): a Listening, or None when neither is asked for."""
    if config.port < 0 and config.metrics.exporter != "PROM":
        return None
    from rmqtx.console.views import ConsoleViews
    from rmqtx.console.web import listen, listen_prometheus

    views = ConsoleViews(broker)  # one walker of the store's files for both ports
    console = listen(broker, config, reactor, views) if config.port >= 0 else None
    try:
        prometheus = listen_prometheus(broker, config, reactor, views) if config.metrics.exporter == "PROM" else None
    except Exception:
        if console is not None:
            console.stopListening()
        raise
    return Listening(console, prometheus)
