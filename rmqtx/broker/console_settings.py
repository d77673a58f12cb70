"""The console's broker.conf keys (rmqtx's own; Java has no console in the broker) and Apache 5.x's
metrics keys, which decide where the same ``/metrics`` is also served and the labels it carries.

Parsed with the broker's other settings, so they live here: rmqtx.console sits above the broker and
nothing below the launcher imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from rmqtx.common.properties import bool_setting, parse_bool

#: Apache 5.x's MetricsExporterType: names and ordinals (BrokerConfig takes either).
EXPORTER_TYPES = {"DISABLE": "DISABLE", "OTLP_GRPC": "OTLP_GRPC", "PROM": "PROM", "LOG": "LOG",
                  "0": "DISABLE", "1": "OTLP_GRPC", "2": "PROM", "3": "LOG"}
#: Apache 5.3.4+'s switches of the metric groups, all on by default.
GROUP_SWITCHES = ("enableStatsMetrics", "enableRequestMetrics", "enableConnectionMetrics", "enableLagAndDlqMetrics",
                  "enableTransactionMetrics", "enableRemotingMetrics", "enableMessageStoreMetrics", "enablePopMetrics")
#: Keys of the OTLP and LOG exporters: accepted while metricsExporterType asks for neither (then unused, as in Java).
EXPORTER_COMPANIONS = ("metricsGrpcExporterTarget", "metricsGrpcExporterHeader", "metricGrpcExporterTimeOutInMills",
                       "metricGrpcExporterIntervalInMills", "metricLoggingExporterIntervalInMills")
DEFAULT_CARDINALITY_LIMIT = 50000
#: Every metrics key of Apache 5.x's BrokerConfig (rmqtx.broker.config counts them as known).
METRICS_KEYS = frozenset({"metricsExporterType", "metricsPromExporterPort", "metricsPromExporterHost", "metricsLabel",
                          "metricsInDelta", "metricsOtelCardinalityLimit"} | set(GROUP_SWITCHES) | set(EXPORTER_COMPANIONS))
_FIRST, _BODY, _RUNS = re.compile(r"^[^a-zA-Z_:]"), re.compile(r"[^a-zA-Z0-9_:]"), re.compile(r"_{2,}")


def label_name(key: str) -> str:
    """OTel's NameSanitizer: a bad first character, then any bad one, becomes ``_``; runs of ``_`` shrink to one."""
    return _RUNS.sub("_", _BODY.sub("_", _FIRST.sub("_", key)))


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    text = props.get(key, "").strip()
    try:
        return int(text) if text else default
    except ValueError:
        raise ValueError(f"broker.conf: {key}={text!r} is not a number") from None


def _labels(text: str) -> dict[str, str]:
    """``metricsLabel``: ``key:value`` pairs split by commas (Java skips empty items and warns on the
    others that are not one pair; rmqtx refuses those). Names are made Prometheus-safe as OTel's exporter does."""
    labels: dict[str, str] = {}
    for item in (part for part in text.split(",") if part):
        pair = item.split(":")
        while len(pair) > 2 and pair[-1] == "":  # Java's split drops trailing empty strings
            pair.pop()
        if len(pair) != 2 or not pair[0]:
            raise ValueError(f"broker.conf: metricsLabel item {item!r} is not one key:value pair")
        labels[label_name(pair[0])] = pair[1]
    return labels


@dataclass(frozen=True)
class MetricsConfig:
    """Apache 5.x's metrics keys as rmqtx honours them.

    ``exporter``: DISABLE (Apache's default) or PROM, which also serves ``/metrics`` on
    ``prom_host:prom_port`` as Apache's Prometheus exporter does (the console's own ``/metrics``
    serves the same text whenever consolePort is set). OTLP_GRPC and LOG are refused.
    """

    exporter: str = "DISABLE"
    prom_port: int = 5557
    prom_host: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    in_delta: bool = False
    groups: frozenset[str] = frozenset(GROUP_SWITCHES)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "MetricsConfig":
        text = props.get("metricsExporterType", "").strip() or "DISABLE"
        exporter = EXPORTER_TYPES.get(text)
        if exporter is None:
            raise ValueError(f"broker.conf: metricsExporterType={text} is none of DISABLE, OTLP_GRPC, PROM, LOG")
        if exporter in ("OTLP_GRPC", "LOG"):
            raise ValueError(f"broker.conf: metricsExporterType={text} asks for the OpenTelemetry {exporter} exporter, which"
                             f" rmqtx does not implement; use PROM (Prometheus scrapes /metrics) or remove the key to start")
        limit = _int(props, "metricsOtelCardinalityLimit", DEFAULT_CARDINALITY_LIMIT)
        if limit != DEFAULT_CARDINALITY_LIMIT:
            raise ValueError(f"broker.conf: metricsOtelCardinalityLimit={limit} asks for OpenTelemetry's series limit, which"
                             f" rmqtx does not implement (it serves every series); remove the key to start")
        port = _int(props, "metricsPromExporterPort", 5557)
        if exporter == "PROM" and not 0 <= port <= 65535:
            raise ValueError(f"broker.conf: metricsPromExporterPort={port} is not a port")
        groups = frozenset(key for key in GROUP_SWITCHES if parse_bool(props.get(key, "true")))
        return cls(exporter, port, props.get("metricsPromExporterHost", "").strip(), _labels(props.get("metricsLabel", "")),
                   parse_bool(props.get("metricsInDelta", "false")), groups)


@dataclass(frozen=True)
class ConsoleConfig:
    """broker.conf keys (rmqtx's own): consolePort (-1 off, 0 any free port), consoleListenAddress,
    consoleAdminEnable; ``metrics``: Apache 5.x's metrics keys."""

    port: int = -1
    listen_address: str = "127.0.0.1"
    admin_enable: bool = False
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "ConsoleConfig":
        text = props.get("consolePort", "").strip()
        try:
            port = int(text) if text else -1
        except ValueError:
            raise ValueError(f"broker.conf: consolePort={text!r} is not a number") from None
        return cls(port, props.get("consoleListenAddress", "").strip() or "127.0.0.1",
                   bool_setting(props, "consoleAdminEnable", False), MetricsConfig.from_properties(props))
