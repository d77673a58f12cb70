"""The console's HTTP side on twisted.web: static page, JSON API (GET reads, POST admin actions), /metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Awaitable, Callable

from twisted.internet import defer
from twisted.internet.error import CannotListenError
from twisted.logger import Logger
from twisted.web import http, pages, resource, server, static

from rmqtx.console.actions import ActionError, ConsoleActions
from rmqtx.console.auth import Refused, check_admin, credentials
from rmqtx.broker.console_settings import ConsoleConfig
from rmqtx.console.messages import SearchError, by_id, by_key, by_queue_offset
from rmqtx.console.metrics import CONTENT_TYPE, BrokerMetrics
from rmqtx.console.views import ConsoleViews
from rmqtx.startup import listen_failure

log = Logger(namespace="rmqtx.console")
STATIC = Path(__file__).resolve().parent / "static"
#: The largest POST body read (a test message body included).
MAX_POST_BYTES = 4 * 1024 * 1024



async def _awaited(work: Awaitable[Any]) -> Any:
    """Any awaitable as the coroutine ensureDeferred takes."""
    return await work

class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _arg(request: server.Request, name: str, default: str = "") -> str:
    args: dict[bytes, list[bytes]] = request.args or {}
    values = args.get(name.encode())
    return values[0].decode("utf-8", "replace") if values else default


def _int_arg(request: server.Request, name: str, default: int | None = None) -> int:
    text = _arg(request, name)
    if not text:
        if default is None:
            raise HttpError(400, f"{name} is required")
        return default
    try:
        return int(text)
    except ValueError:
        raise HttpError(400, f"{name} must be a number") from None


def _finish(request: server.Request, status: int, body: bytes, content_type: bytes) -> None:
    if request.finished or getattr(request, "_disconnected", False):
        return
    request.setResponseCode(status)
    request.setHeader(b"content-type", content_type)
    request.setHeader(b"cache-control", b"no-store")
    request.write(body)
    request.finish()


def _json(request: server.Request, status: int, data: Any) -> None:
    _finish(request, status, json.dumps(data, ensure_ascii=False, default=str).encode("utf-8"), b"application/json; charset=utf-8")


class ApiResource(resource.Resource):
    """``/api/<name>``: GET reads the broker's state, POST runs an admin action (JSON body)."""

    isLeaf = True

    def __init__(self, broker: Any, config: ConsoleConfig, views: ConsoleViews) -> None:
        super().__init__()
        self.broker = broker
        self.config = config
        self.views = views
        self.actions = ConsoleActions(broker)
        self.gets: dict[str, Callable[[server.Request], Awaitable[Any]]] = {
            "whoami": self._whoami, "cluster": self._cluster, "broker": self._broker, "topics": self._topics,
            "topic": self._topic, "groups": self._groups, "group": self._group, "messages": self._messages, "dlq": self._dlq,
        }
        self.posts: dict[str, Callable[[dict], Awaitable[Any]]] = {
            "topic": self.actions.update_topic, "topic/delete": self.actions.delete_topic,
            "group/reset": self.actions.reset_offset, "send": self.actions.send_test_message,
            "dlq/resend": self.actions.resend_dlq,
        }

    def _name(self, request: server.Request) -> str:
        return "/".join(p.decode("utf-8", "replace") for p in request.postpath or [] if p)

    def render_GET(self, request: server.Request) -> int:
        handler = self.gets.get(self._name(request))
        if handler is None:
            _json(request, 404, {"error": f"no such endpoint: GET /api/{self._name(request)}"})
            return server.NOT_DONE_YET
        self._run(request, lambda: handler(request))
        return server.NOT_DONE_YET

    def render_POST(self, request: server.Request) -> int:
        name = self._name(request)
        handler = self.posts.get(name)
        if handler is None:
            _json(request, 404, {"error": f"no such endpoint: POST /api/{name}"})
            return server.NOT_DONE_YET

        async def act() -> Any:
            content_type = (request.getHeader(b"content-type") or b"").split(b";")[0].strip().lower()
            if content_type != b"application/json":  # a cross-site form cannot send this without a preflight
                raise HttpError(415, "POST bodies are JSON (content-type: application/json)")
            creds = credentials(request.getHeader(b"authorization"), request.getHeader(b"x-access-key"),
                                request.getHeader(b"x-secret-key"))
            user = check_admin(self.broker, self.config.admin_enable, creds)
            raw = request.content.read(MAX_POST_BYTES + 1) if request.content is not None else b""
            if len(raw) > MAX_POST_BYTES:
                raise HttpError(413, "body too large")
            try:
                params = json.loads(raw or b"{}")
            except ValueError:
                raise HttpError(400, "the body is not JSON") from None
            if not isinstance(params, dict):
                raise HttpError(400, "the body is not a JSON object")
            result = await handler(params)
            log.info("console admin action {name} by {user}: {result}", name=name, user=user or "-", result=result)
            return result

        self._run(request, act)
        return server.NOT_DONE_YET

    def _run(self, request: server.Request, work: Callable[[], Awaitable[Any]]) -> None:
        def answered(data: Any) -> None:
            _json(request, 200, data)

        def failed(failure: Any) -> None:
            exc = failure.value
            if isinstance(exc, (HttpError, ActionError, Refused)):
                if isinstance(exc, Refused) and exc.status == 401:
                    request.setHeader(b"www-authenticate", b'Basic realm="rmqtx console admin"')
                _json(request, exc.status, {"error": str(exc)})
            elif isinstance(exc, SearchError):
                _json(request, 400, {"error": str(exc)})
            else:
                log.failure("console request {uri} failed", failure, uri=request.uri)
                _json(request, 500, {"error": f"{type(exc).__name__}: {exc}"})

        d = defer.ensureDeferred(_awaited(work()))
        d.addCallbacks(answered, failed)

    # -- reads --------------------------------------------------------------------------------
    async def _whoami(self, request: server.Request) -> dict:
        return {"adminEnable": self.config.admin_enable, "aclEnable": self.broker.acl is not None,
                "brokerName": self.broker.config.brokerName, "cluster": self.broker.config.brokerClusterName}

    async def _cluster(self, request: server.Request) -> dict:
        return await self.views.cluster_view()

    async def _broker(self, request: server.Request) -> dict:
        return await self.views.broker_view()

    async def _topics(self, request: server.Request) -> dict:
        return self.views.topics_view()

    async def _topic(self, request: server.Request) -> dict:
        view = self.views.topic_view(_arg(request, "topic"))
        if view is None:
            raise HttpError(404, f"no topic {_arg(request, 'topic')!r} on this broker")
        return view

    async def _groups(self, request: server.Request) -> dict:
        return self.views.groups_view()

    async def _group(self, request: server.Request) -> dict:
        group = _arg(request, "group")
        if group not in self.views.group_names():
            raise HttpError(404, f"no group {group!r} on this broker")
        return self.views.group_view(group)

    async def _messages(self, request: server.Request) -> dict:
        store, by = self.broker.ctx.store, _arg(request, "by")
        if by == "id":
            found = by_id(store, _arg(request, "id"), _arg(request, "topic"))
        elif by == "key":
            found = by_key(store, _arg(request, "topic"), _arg(request, "key"))
        elif by == "offset":
            found = by_queue_offset(store, _arg(request, "topic"), _int_arg(request, "queueId"), _int_arg(request, "offset"),
                                    _int_arg(request, "count", 1))
        else:
            raise HttpError(400, "by must be id, key or offset")
        return {"messages": found}

    async def _dlq(self, request: server.Request) -> dict:
        group = _arg(request, "group")
        if not group:
            return {"groups": self.views.dlq_groups()}
        start = _arg(request, "start")
        return self.views.dlq_view(group, int(start) if start.lstrip("-").isdigit() else None)


class MetricsResource(resource.Resource):
    isLeaf = True

    def __init__(self, metrics: BrokerMetrics) -> None:
        super().__init__()
        self.metrics = metrics

    def render_GET(self, request: server.Request) -> int:
        def failed(failure: Any) -> None:
            log.failure("/metrics failed", failure)
            _finish(request, 500, b"metrics failed\n", b"text/plain")

        d = defer.ensureDeferred(self.metrics.render())
        d.addCallbacks(lambda body: _finish(request, 200, body, CONTENT_TYPE.encode()), failed)
        return server.NOT_DONE_YET


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class ConsoleSite(server.Site):
    """No access log lines in the broker's log; on a loopback address only loopback Host names are
    answered, so a web page cannot reach the console through a rebound DNS name."""

    def __init__(self, root: resource.Resource, loopback_only: bool) -> None:
        super().__init__(root)
        self.loopback_only = loopback_only

    def log(self, request: http.Request) -> None:
        return None

    def getResourceFor(self, request: server.Request) -> resource.Resource:
        if self.loopback_only:
            host = (request.getHeader(b"host") or b"").decode("latin-1").strip().lower()
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in LOOPBACK_NAMES:
                return pages.errorPage(421, "Misdirected Request", "The console answers loopback host names only.")
        return super().getResourceFor(request)


def build_site(broker: Any, config: ConsoleConfig, views: ConsoleViews | None = None) -> server.Site:
    views = views or ConsoleViews(broker)
    views.store_size()  # the first walk of the store's files starts now
    root = static.File(str(STATIC))
    root.indexNames = ["index.html"]
    root.putChild(b"api", ApiResource(broker, config, views))
    root.putChild(b"metrics", MetricsResource(BrokerMetrics(broker, views, config.metrics)))
    return ConsoleSite(root, config.listen_address in ("127.0.0.1", "::1", "localhost"))


class ExporterResource(MetricsResource):
    """Apache's exporter port: ``/-/healthy`` answers a probe, every other path the metrics text."""

    def render_GET(self, request: server.Request) -> int:
        if request.path == b"/-/healthy":
            _finish(request, 200, b"Exporter is Healthy.", b"text/plain")
            return server.NOT_DONE_YET
        return super().render_GET(request)


def build_prometheus_site(broker: Any, config: ConsoleConfig, views: ConsoleViews | None = None) -> server.Site:
    """What Apache's Prometheus exporter port serves: the metrics text and a health probe, nothing else."""
    views = views or ConsoleViews(broker)
    views.store_size()
    return ConsoleSite(ExporterResource(BrokerMetrics(broker, views, config.metrics)), loopback_only=False)


def listen(broker: Any, config: ConsoleConfig, reactor: Any, views: ConsoleViews | None = None) -> Any:
    """Serve the console for ``broker``; returns the listening port."""
    port = reactor.listenTCP(config.port, build_site(broker, config, views), interface=config.listen_address)
    host = port.getHost()
    log.info("console and /metrics on http://{host}:{port}/ (admin actions {admin})", host=host.host, port=host.port,
             admin="enabled" if config.admin_enable else "disabled")
    return port


def listen_prometheus(broker: Any, config: ConsoleConfig, reactor: Any, views: ConsoleViews | None = None) -> Any:
    """metricsExporterType=PROM: /metrics on metricsPromExporterHost (brokerIP1 when blank) and
    metricsPromExporterPort, as Apache 5.x serves its exporter; returns the listening port."""
    host = config.metrics.prom_host or broker.config.brokerIP1
    try:
        port = reactor.listenTCP(config.metrics.prom_port, build_prometheus_site(broker, config, views), interface=host)
    except CannotListenError as exc:
        raise listen_failure("metricsPromExporterPort (metricsExporterType=PROM)", exc) from None
    bound = port.getHost()
    log.info("Prometheus /metrics (metricsExporterType=PROM) on http://{host}:{port}/metrics", host=bound.host,
             port=bound.port)
    return port
