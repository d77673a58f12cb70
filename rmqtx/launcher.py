"""``twistd`` entry points: options and service makers for rmqnamesrv, rmqbroker, rmqstandalone."""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from twisted.application import service
from twisted.python import usage

from rmqtx.common.properties import load_properties
from rmqtx.services import OrderedServices
from rmqtx.startup import StartupError, missing_extra, os_failure

if TYPE_CHECKING:
    from twisted.internet import defer

    from rmqtx.broker.service import BrokerService
    from rmqtx.groups import BrokerGroups
    from rmqtx.namesrv.service import NamesrvService


def _read(path: str, what: str) -> dict[str, str]:
    """A -c file's settings; a missing or unreadable file stops start-up with one line."""
    try:
        return load_properties(path)
    except OSError as e:
        raise os_failure(f"cannot read the {what} file", e) from None
    except UnicodeDecodeError as e:
        raise StartupError(f"cannot read the {what} file {path}: not UTF-8 text ({e.reason})") from None


class NamesrvOptions(usage.Options):
    synopsis = "[-c namesrv.conf] [-p PORT]"
    longdesc = "Run an Apache RocketMQ compatible NameServer."
    optParameters = [
        ["config", "c", None, "key=value file with RocketMQ's NameServer key names"],
        ["listen-port", "p", None, "port to listen on (listenPort)", int],
        ["listen-address", None, None, "address to bind (listenAddress)"],
        ["kv-config-path", None, None, "where kvConfig.json lives (kvConfigPath)"],
    ]

    def properties(self) -> dict[str, str]:
        props = _read(self["config"], "namesrv.conf") if self["config"] else {}
        for option, key in (("listen-port", "listenPort"), ("listen-address", "listenAddress"), ("kv-config-path", "kvConfigPath")):
            if self[option] is not None:
                props[key] = str(self[option])
        return props


class BrokerOptions(usage.Options):
    synopsis = "[-c broker.conf] [-n NAMESRV_ADDR]"
    longdesc = "Run an Apache RocketMQ compatible Broker."
    optParameters = [
        ["config", "c", None, "broker.conf: key=value with RocketMQ's Broker key names"],
        ["namesrv-addr", "n", None, "NameServer addresses, host:port;host:port (default $NAMESRV_ADDR)"],
        ["listen-port", "p", None, "port to listen on (listenPort)", int],
        ["store", None, None, "store root directory (storePathRootDir)"],
        ["console-port", None, None, "serve the web console and /metrics on this port (consolePort; 0: any free port)", int],
        ["grpc-port", None, None, "serve the RocketMQ 5.x gRPC protocol on this port (grpcPort; off by default)", int],
    ]

    def properties(self) -> dict[str, str]:
        props = _read(self["config"], "broker.conf") if self["config"] else {}
        if self["console-port"] is not None:
            props["consolePort"] = str(self["console-port"])
        if self["grpc-port"] is not None:
            props["grpcPort"] = str(self["grpc-port"])
        namesrv = self["namesrv-addr"] or props.get("namesrvAddr") or os.environ.get("NAMESRV_ADDR")
        if namesrv:
            props["namesrvAddr"] = namesrv
        if self["listen-port"] is not None:
            props["listenPort"] = str(self["listen-port"])
        if self["store"]:
            props["storePathRootDir"] = self["store"]
        return props


class StandaloneOptions(usage.Options):
    synopsis = "[-c broker.conf] [--namesrv-port 9876] [--port 10911] [--store ./store]"
    longdesc = "Run a NameServer and a Broker in one process (the embedded default)."
    optParameters = [
        ["config", "c", None, "broker.conf with RocketMQ's Broker key names"],
        ["namesrv-config", None, None, "namesrv.conf with RocketMQ's NameServer key names"],
        ["namesrv-port", None, 9876, "NameServer port", int],
        ["port", "p", None, "Broker port (listenPort, default 10911)", int],
        ["bind", None, "127.0.0.1", "address both servers bind and the broker advertises"],
        ["store", None, "./store", "store root directory (storePathRootDir)"],
        ["console-port", None, None, "serve the web console and /metrics on this port (consolePort; 0: any free port)", int],
        ["grpc-port", None, None, "serve the RocketMQ 5.x gRPC protocol on this port (grpcPort; off by default)", int],
        ["brokers", None, 1, "broker groups: 2..N run as child rmqbroker processes, one core each (docs/running.md)", int],
    ]

    def postOptions(self) -> None:
        if self["brokers"] < 1:
            raise usage.UsageError(f"--brokers must be 1 or more, not {self['brokers']}")


class ControllerOptions(usage.Options):
    synopsis = "-c controller.conf"
    longdesc = "Run an Apache RocketMQ 5.x compatible controller node (controller mode; needs the 'controller' extra)."
    optParameters = [
        ["config", "c", None, "key=value file with Apache's ControllerConfig key names"],
    ]

    def properties(self) -> dict[str, str]:
        return _read(self["config"], "controller.conf") if self["config"] else {}


def make_controller(props: dict[str, str], file: str = "controller.conf") -> service.Service:
    """One controller node; a missing 'controller' extra (pysyncobj) stops start-up in one line."""
    try:
        importlib.import_module("pysyncobj")
    except ImportError as e:
        raise missing_extra("the controller", "controller", e) from None
    from rmqtx.controller.config import ControllerConfig
    from rmqtx.controller.service import ControllerService

    try:
        return ControllerService(ControllerConfig.from_properties(props, file))
    except ValueError as e:
        raise StartupError(str(e)) from None


def make_namesrv(props: dict[str, str]) -> "NamesrvService":
    """The NameServer; with ``enableControllerInNamesrv=true`` a controller node (the same file's
    ControllerConfig keys) runs as its child service, as Apache's NamesrvStartup embeds one."""
    from rmqtx.namesrv.config import NamesrvConfig
    from rmqtx.namesrv.service import NamesrvService

    props = dict(props)
    controller = None
    if props.get("enableControllerInNamesrv", "").strip().lower() == "true":
        from dataclasses import fields

        from rmqtx.controller.config import JAVA_ONLY, ControllerConfig

        controller_props = {}
        for key in {f.name for f in fields(ControllerConfig)} | JAVA_ONLY:
            if key in props and key != "listenPort":  # listenPort is the NameServer's
                controller_props[key] = props.pop(key)
        controller = make_controller(controller_props, "namesrv.conf")
    try:
        namesrv = NamesrvService(NamesrvConfig.from_properties(props))
    except ValueError as e:
        raise StartupError(str(e)) from None
    if controller is not None:
        controller.setServiceParent(namesrv)  # starts once the NameServer listens, stops with it
    return namesrv


def make_broker(props: dict[str, str]) -> OrderedServices:
    """The broker with the console and the gRPC endpoint its settings turn on (:func:`with_endpoints`)."""
    from rmqtx.broker.config import BrokerConfig
    from rmqtx.broker.service import BrokerService
    from rmqtx.common.logbridge import bridge

    bridge()  # the store logs through stdlib logging: recovery progress and warnings go to twistd's log

    try:
        broker = BrokerService(BrokerConfig.from_properties(props))
    except ValueError as e:
        raise StartupError(str(e)) from None
    return with_endpoints(broker)


def with_endpoints(broker: "BrokerService") -> OrderedServices:
    """``broker`` and, as siblings after it, the web console (consolePort; and Apache's exporter port with
    metricsExporterType=PROM) and the gRPC endpoint (grpcPort) when its broker.conf turns them on: they start once the broker's parts have (they read ``broker.ctx``)
    and stop before them. A missing 'grpc' extra or generated classes stop start-up here, in one line.

    Tests and tools that build a ``BrokerService`` themselves call this to get the console and gRPC too.
    """
    from rmqtx.console import ConsoleService, wanted

    node = OrderedServices()
    broker.setServiceParent(node)
    if wanted(broker.config.console):
        ConsoleService(broker, broker.config.console, broker.reactor).setServiceParent(node)
    endpoint = grpc_endpoint(broker)
    if endpoint is not None:
        endpoint.setServiceParent(node)
    return node


def grpc_endpoint(broker: "BrokerService") -> service.Service | None:
    """The gRPC endpoint for the 5.x SDKs when ``grpcPort`` is set (off by default); its port is bound at start."""
    settings = broker.config.grpc  # grpcPort that is no port number was refused with the broker's settings
    if settings.port is None:
        return None
    try:
        importlib.import_module("grpc")  # the 'grpc' extra: grpcio and protobuf

        from rmqtx.grpc.server import GrpcEndpoint
        from rmqtx.grpc.stubs import StubsMissing, find_stubs_dir
    except ImportError as e:
        raise missing_extra("grpcPort", "grpc", e) from None
    try:
        find_stubs_dir()
    except StubsMissing as e:
        raise StartupError(str(e)) from None
    return GrpcEndpoint(broker, settings.port, settings.listen_address, broker.reactor)


def make_standalone(options: StandaloneOptions) -> service.MultiService:
    """NameServer first, then the broker pointed at it (with its console and gRPC endpoint); one MultiService."""
    top = StandaloneService()
    bind = options["bind"]
    namesrv_props = _read(options["namesrv-config"], "namesrv.conf") if options["namesrv-config"] else {}
    namesrv_props.setdefault("listenAddress", bind)
    namesrv_props["listenPort"] = str(options["namesrv-port"])
    namesrv_props.setdefault("kvConfigPath", os.path.join(options["store"], "namesrv", "kvConfig.json"))
    broker_props = _read(options["config"], "broker.conf") if options["config"] else {}
    for key, value in broker_props.items():  # Java's TLS settings are JVM-wide: one process, one set
        if key.startswith("tls."):
            namesrv_props.setdefault(key, value)
    namesrv = make_namesrv(namesrv_props)
    namesrv.announce = False  # "boot success" only once the broker has started too
    namesrv.setServiceParent(top)
    broker_props.setdefault("listenAddress", bind)
    broker_props.setdefault("brokerIP1", bind if bind != "0.0.0.0" else "127.0.0.1")
    broker_props.setdefault("storePathRootDir", options["store"])
    if options["grpc-port"] is not None:
        broker_props["grpcPort"] = str(options["grpc-port"])
    if options["port"] is not None:
        broker_props["listenPort"] = str(options["port"])
    if options["console-port"] is not None:
        broker_props["consolePort"] = str(options["console-port"])
    broker_props["namesrvAddr"] = f"{'127.0.0.1' if bind == '0.0.0.0' else bind}:{options['namesrv-port']}"
    groups = broker_groups(broker_props, options["store"], options["brokers"])  # settings refused before any start
    make_broker(broker_props).setServiceParent(top)
    if groups is not None:
        groups.setServiceParent(top)
        top.groups = groups
    return top


def broker_groups(broker_props: dict[str, str], store: str, count: int) -> "BrokerGroups | None":
    """Groups 2..``count`` (rmqtx.groups): their broker.conf files written now, their processes spawned at start."""
    if count <= 1:
        return None
    from rmqtx.groups import BrokerGroups, group_props, write_conf

    children = []
    for k in range(2, count + 1):
        props = group_props(broker_props, k, store)
        conf = os.path.join(props["storePathRootDir"], "broker.conf")
        try:
            write_conf(conf, props)
        except OSError as e:
            raise os_failure(f"--brokers: cannot write {props['brokerName']}'s broker.conf", e) from None
        children.append((props["brokerName"], conf))
    return BrokerGroups(children, broker_props["namesrvAddr"])


class StandaloneService(service.MultiService):
    """NameServer and broker; if the broker cannot start, the NameServer stops and start-up fails.

    With ``--brokers N`` the child groups stop first, while the NameServer still takes their unregistering.
    """

    groups: "BrokerGroups | None" = None

    def stopService(self) -> "defer.Deferred[None]":
        if self.groups is None:
            return super().stopService()
        first = self.groups.stopService()
        return first.addBoth(lambda _: super(StandaloneService, self).stopService())

    def startService(self) -> None:
        try:
            super().startService()
        except BaseException:
            for child in self:
                if child.running:
                    child.stopService()
            self.running = 0
            raise
        for child in self:
            announce = getattr(child, "announce_boot", None)
            if announce is not None:
                announce()
