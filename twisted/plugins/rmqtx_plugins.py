"""twistd plugins: ``rmqnamesrv``, ``rmqbroker``, ``rmqstandalone`` (both in one process) and ``rmqcontroller``."""

from __future__ import annotations

import os

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
        from rmqtx.startup import install_hook

        install_hook()  # a port in use or a missing file ends twistd with one line, not a traceback
        _no_default_pidfile(getattr(options, "parent", None))
        return self._build(options)


def _no_default_pidfile(twistd_options) -> None:
    """In the foreground (-n) write no twistd.pid into the working directory unless --pidfile names one.

    The store's lock already refuses a second broker on the same store; a daemon keeps twistd's
    default pid file, which it needs to be stopped.
    """
    if twistd_options is None or not twistd_options.get("nodaemon"):
        return
    if twistd_options.get("pidfile") in ("twistd.pid", os.path.abspath("twistd.pid")):  # twistd made it absolute
        twistd_options["pidfile"] = ""


def _namesrv(options):
    from rmqtx.launcher import make_namesrv

    return make_namesrv(options.properties())


def _broker(options):
    from rmqtx.launcher import make_broker

    return make_broker(options.properties())


def _controller(options):
    from rmqtx.launcher import make_controller

    return make_controller(options.properties())


def _standalone(options):
    from rmqtx.launcher import make_standalone

    return make_standalone(options)


rmqnamesrv = _Maker("rmqnamesrv", "rmqtx: an Apache RocketMQ compatible NameServer", "NamesrvOptions", _namesrv)
rmqbroker = _Maker("rmqbroker", "rmqtx: an Apache RocketMQ compatible Broker", "BrokerOptions", _broker)
rmqcontroller = _Maker("rmqcontroller", "rmqtx: an Apache RocketMQ 5.x compatible controller", "ControllerOptions", _controller)
rmqstandalone = _Maker("rmqstandalone", "rmqtx: NameServer and Broker in one process", "StandaloneOptions", _standalone)
