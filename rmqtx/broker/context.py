"""What every broker processor needs to reach: the core parts (:mod:`rmqtx.broker.core`), HA and POP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqtx.broker.core import BrokerCore

if TYPE_CHECKING:
    from rmqtx.broker.ha.role import HARole
    from rmqtx.broker.pop.service import PopService

FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


@dataclass
class BrokerContext(BrokerCore):
    """Built whole by ``rmqtx.broker.service.build_context``: HA and POP are made over the core first."""

    #: the role's HA parts (master or slave)
    ha: "HARole"
    #: 5.x POP consumption
    pop: "PopService"

    @classmethod
    def over(cls, core: BrokerCore, ha: "HARole", pop: "PopService") -> "BrokerContext":
        """The core's parts (the same objects) with HA and POP."""
        return cls(**vars(core), ha=ha, pop=pop)
