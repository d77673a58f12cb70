"""The web console and Prometheus ``/metrics``, served by the broker process itself (off by default)."""

from __future__ import annotations

from typing import Any

from twisted.application import service
from twisted.internet import defer

from rmqtx.broker.console_settings import ConsoleConfig


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


def wanted(config: ConsoleConfig) -> bool:
    """consolePort is set, or metricsExporterType=PROM asks for Apache's exporter port."""
    return config.port >= 0 or config.metrics.exporter == "PROM"


def start_console(broker: Any, config: ConsoleConfig, reactor: Any) -> Any:
    """Listen when consolePort is set, and on metricsPromExporterPort when metricsExporterType=PROM
    (the web parts load only then): a Listening, or None when neither is asked for."""
    if not wanted(config):
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


class ConsoleService(service.Service):
    """The console (and the exporter port) as a sibling after the broker (``rmqtx.launcher``): it starts
    once the broker has (it reads ``broker.ctx``) and stops before it."""

    name = "console"

    def __init__(self, broker: Any, config: ConsoleConfig, reactor: Any) -> None:
        self.broker = broker  # rmqtx.broker.service.BrokerService
        self.config = config
        self.reactor = reactor
        self.port: Any = None  # a Listening once started

    def startService(self) -> None:
        self.port = start_console(self.broker, self.config, self.reactor)
        super().startService()

    def stopService(self) -> "defer.Deferred[Any] | None":
        super().stopService()
        port, self.port = self.port, None
        return defer.maybeDeferred(port.stopListening) if port is not None else None
