"""The 5.x POP keys of broker.conf, a settings section of their own (4.9.8 has none of them, so they
stay out of BrokerConfig's fields and GET_BROKER_CONFIG's 4.9.8 key list)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from rmqtx.common.properties import bool_setting, int_setting


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
    def from_properties(cls, props: Mapping[str, str]) -> "PopSettings":
        """Each key when present, Java's default otherwise; a value of the wrong kind raises ValueError."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in props:
                continue
            if isinstance(f.default, bool):  # each field's default tells how to parse it (bool, int or str)
                values[f.name] = bool_setting(props, f.name, f.default)
            elif isinstance(f.default, int):
                values[f.name] = int_setting(props, f.name, f.default)
            else:
                values[f.name] = props[f.name].strip()
        mode = str(values.get("defaultMessageRequestMode", "PULL")).upper()
        values["defaultMessageRequestMode"] = mode if mode in ("PULL", "POP") else "PULL"
        return cls(**values)
