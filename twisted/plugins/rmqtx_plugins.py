"""twistd plugins: ``rmqnamesrv``, ``rmqbroker`` and ``rmqstandalone`` (both in one process)."""

from __future__ import annotations

from twisted.application.service import IServiceMaker
from twisted.plugin import IPlugin
from zope.interface import implementer


@implementer(IServiceMaker, IPlugin)
class _Maker:
    def __init__(self, tapname: str, description: str, options_name: str, build) -> None:
        self.tapname = tapname
        self.description = description
        self._options_name = options_name
        self._build = build

    @property
    def options(self):
        from rmqtx import launcher

        return getattr(launcher, self._options_name)

    def makeService(self, options):
        return self._build(options)


def _namesrv(options):
    from rmqtx.launcher import make_namesrv

    return make_namesrv(options.properties())


def _broker(options):
    from rmqtx.launcher import make_broker

    return make_broker(options.properties())


def _standalone(options):
    from rmqtx.launcher import make_standalone

    return make_standalone(options)


rmqnamesrv = _Maker("rmqnamesrv", "rmqtx: an Apache RocketMQ compatible NameServer", "NamesrvOptions", _namesrv)
rmqbroker = _Maker("rmqbroker", "rmqtx: an Apache RocketMQ compatible Broker", "BrokerOptions", _broker)
rmqstandalone = _Maker("rmqstandalone", "rmqtx: NameServer and Broker in one process", "StandaloneOptions", _standalone)
