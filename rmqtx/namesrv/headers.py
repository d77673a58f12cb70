"""NameServer request headers that rmqtx.remoting does not declare the way the NameServer reads them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rmqtx.remoting.header import CommandHeader


@dataclass(slots=True)
class RouteInfoRequestHeader(CommandHeader):
    """GET_ROUTEINFO_BY_TOPIC as Java 4.9.8 reads it: a missing topic is looked up as ``null``."""

    topic: Optional[str] = None
    acceptStandardJsonOnly: Optional[bool] = None
