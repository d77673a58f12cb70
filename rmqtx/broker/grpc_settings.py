"""The gRPC endpoint's broker.conf keys, parsed once when the broker's settings are read.

Kept apart from the endpoint itself so that reading the settings needs neither grpcio nor the
generated stubs: a bad value stops start-up even on a machine without the 'grpc' extra. Here beside
the broker's other settings, as rmqtx.grpc sits above the broker and nothing below the launcher imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from rmqtx.common import validation
from rmqtx.common.properties import bool_setting, int_setting

#: grpcListenAddress when unset: loopback only, as the endpoint is opt-in.
DEFAULT_LISTEN_ADDRESS = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ProxyLimits:
    """The proxy's limits, by Apache's proxy config names in broker.conf (its defaults otherwise)."""

    min_invisible_ms_for_recv: int = 10_000  # minInvisibleTimeMillsForRecv
    max_invisible_ms: int = 12 * 3600 * 1000  # maxInvisibleTimeMills (0 or less: no upper bound)
    max_user_property_size: int = validation.MAX_USER_PROPERTY_SIZE  # maxUserPropertySize
    user_property_max_num: int = validation.USER_PROPERTY_MAX_NUM  # userPropertyMaxNum
    #: enableTopicMessageTypeCheck: a send must match its topic's message.type (and the SDKs are told to check)
    topic_message_type_check: bool = True

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "ProxyLimits":
        """Raises ValueError for a value that is no number, or no boolean."""
        default = cls()
        numbers = {name: int_setting(props, key, getattr(default, name)) for key, name in PROXY_LIMIT_KEYS.items()}
        return cls(**numbers, topic_message_type_check=bool_setting(props, "enableTopicMessageTypeCheck", True))


#: broker.conf key -> ProxyLimits field, in the field order.
PROXY_LIMIT_KEYS = {"minInvisibleTimeMillsForRecv": "min_invisible_ms_for_recv", "maxInvisibleTimeMills": "max_invisible_ms",
                    "maxUserPropertySize": "max_user_property_size", "userPropertyMaxNum": "user_property_max_num"}


@dataclass(frozen=True, slots=True)
class GrpcSettings:
    """grpcPort (None: the endpoint is off), grpcListenAddress and the proxy limits."""

    port: int | None = None
    listen_address: str = DEFAULT_LISTEN_ADDRESS
    limits: ProxyLimits = field(default_factory=ProxyLimits)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "GrpcSettings":
        text = (props.get("grpcPort") or "").strip()
        if text and not text.isdigit():
            raise ValueError(f"grpcPort={text!r} is not a port number")
        address = (props.get("grpcListenAddress") or "").strip() or DEFAULT_LISTEN_ADDRESS
        return cls(int(text) if text else None, address, ProxyLimits.from_properties(props))


KEYS = frozenset({"grpcPort", "grpcListenAddress", "enableTopicMessageTypeCheck"}) | frozenset(PROXY_LIMIT_KEYS)
