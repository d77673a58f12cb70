"""The 5.x POP keys of broker.conf, read from the properties as given (4.9.8 has none of them,
so they stay out of BrokerConfig and GET_BROKER_CONFIG's 4.9.8 key list)."""

from __future__ import annotations

import dataclasses
from typing import Any
from dataclasses import dataclass

from rmqtx.common.properties import parse_bool


@dataclass(frozen=True, slots=True)
class PopSettings:
    reviveQueueNum: int = 8
    reviveInterval: int = 1000
    popFromRetryProbability: int = 20
    enableRetryTopicV2: bool = False
    defaultMessageRequestMode: str = "PULL"
    defaultPopShareQueueNum: int = -1
    popPollingSize: int = 1024

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "PopSettings":
        """Each key when present and well formed, Java's default otherwise."""
        values: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            raw = props.get(f.name)
            if raw is None:
                continue
            kind: Any = type(f.default)  # each field's default tells how to parse it (bool, int or str)
            try:
                values[f.name] = parse_bool(raw) if kind is bool else kind(raw.strip())
            except ValueError:
                continue
        mode = str(values.get("defaultMessageRequestMode", "PULL")).upper()
        values["defaultMessageRequestMode"] = mode if mode in ("PULL", "POP") else "PULL"
        return cls(**values)  # type: ignore[arg-type]
