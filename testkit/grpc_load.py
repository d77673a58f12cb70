"""A raw grpc.aio client (the SDK's generated classes) that puts the gRPC endpoint under load: many
long-polling ReceiveMessage calls and open Telemetry streams held while QueryRoute, Heartbeat and
SendMessage keep going; it samples the broker's threads and memory from /proc. Used by
``tests/grpc/test_load.py`` (asserts) and ``benchmarks/grpc_load.py`` (prints)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

#: Long polling each receive asks for; the call's deadline leaves the endpoint its 1 s margin and more.
POLL_S = 20
#: Channels the calls are spread over (separate connections, as separate clients would be).
CHANNELS = 10


@dataclass
class Figures:
    """What one run saw."""

    sent: set[str] = field(default_factory=set)
    received: set[str] = field(default_factory=set)
    latencies: dict[str, list[float]] = field(default_factory=dict)  # QueryRoute/Heartbeat/SendMessage, seconds
    failures: list[str] = field(default_factory=list)  # control calls that failed or were not OK
    receive_errors: list[str] = field(default_factory=list)  # receives that ended other than OK/MESSAGE_NOT_FOUND
    receives_done: int = 0
    telemetry_settings: int = 0  # streams whose settings were answered
    threads_max: int = 0
    threads_idle: int = 0
    rss_kb_max: int = 0
    rss_anon_kb_max: int = 0


def proc_status(pid: int) -> dict[str, int]:
    """Threads, VmRSS and RssAnon (kB) of a process."""
    out = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("Threads", "VmRSS", "RssAnon"):
                out[key] = int(value.split()[0])
    return out


class Load:
    """One run against ``target`` (host:port) for ``topic``, the broker being process ``pid``."""

    def __init__(self, target: str, topic: str, pid: int, *, receivers: int, streams: int, messages: int,
                 group: str = "GID_grpc_load", deadline_s: float = 5.0) -> None:
        import grpc

        from rmqtx.grpc import stubs

        self.grpc = grpc
        self.d, self.s, service_grpc = stubs.load()
        self.target, self.topic, self.pid, self.group = target, topic, pid, group
        self.receivers, self.streams, self.messages, self.deadline_s = receivers, streams, messages, deadline_s
        self.figures = Figures()
        self.channels = [grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
                         for _ in range(CHANNELS)]
        self.stubs = [service_grpc.MessagingServiceStub(channel) for channel in self.channels]
        self.stopping = asyncio.Event()

    def _meta(self, i: int) -> tuple[tuple[str, str], ...]:
        """A 5.x SDK's headers (Apache's proxy refuses a client that names no language)."""
        return (("x-mq-client-id", f"load-{os.getpid()}-{i}"), ("x-mq-language", "PYTHON"),
                ("x-mq-client-version", "5.0.6"), ("x-mq-protocol", "v2"))

    def _consumer(self, i: int) -> int:
        """The client a receive belongs to: one SimpleConsumer per connection, each with many receives in
        flight, as an SDK client has (its Telemetry settings come first, as the SDK sends them)."""
        return 3000 + i % CHANNELS

    # -- the parked calls -------------------------------------------------------------------------
    async def _receiver(self, i: int) -> None:
        d, s = self.d, self.s
        stub = self.stubs[i % CHANNELS]
        request = s.ReceiveMessageRequest(
            group=d.Resource(name=self.group), message_queue=d.MessageQueue(topic=d.Resource(name=self.topic), id=-1),
            filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"), batch_size=32,
            auto_renew=False)
        request.invisible_duration.FromSeconds(60)
        request.long_polling_timeout.FromSeconds(POLL_S)
        while not self.stopping.is_set():
            got = []
            try:
                async for response in stub.ReceiveMessage(request, metadata=self._meta(self._consumer(i)),
                                                          timeout=POLL_S + 5):
                    which = response.WhichOneof("content")
                    if which == "status" and response.status.code not in (d.Code.OK, d.Code.MESSAGE_NOT_FOUND):
                        self.figures.receive_errors.append(d.Code.Name(response.status.code))
                    elif which == "message":
                        got.append(response.message)
            except self.grpc.aio.AioRpcError as exc:
                if not self.stopping.is_set():
                    self.figures.receive_errors.append(exc.code().name)
                    await asyncio.sleep(0.5)
                continue
            self.figures.receives_done += 1
            if got:
                self.figures.received.update(m.body.decode() for m in got)
                entries = [s.AckMessageEntry(message_id=m.system_properties.message_id,
                                             receipt_handle=m.system_properties.receipt_handle) for m in got]
                await self._control("AckMessage", stub.AckMessage(
                    s.AckMessageRequest(group=d.Resource(name=self.group), topic=d.Resource(name=self.topic),
                                        entries=entries), metadata=self._meta(self._consumer(i)),
                    timeout=self.deadline_s))

    async def _stream(self, i: int, opened: asyncio.Queue, consumer: int | None = None) -> None:
        """A Telemetry stream: settings sent, the answer read, then held open until the run stops; a
        producer's, or with ``consumer`` that SimpleConsumer's (its receives then follow)."""
        d, s = self.d, self.s
        ua = d.UA(language=d.Language.PYTHON, version="5.0.6")
        if consumer is None:
            call = self.stubs[i % CHANNELS].Telemetry(metadata=self._meta(1000 + i))
            settings = d.Settings(client_type=d.ClientType.PRODUCER, user_agent=ua,
                                  publishing=d.Publishing(topics=[d.Resource(name=self.topic)]))
        else:
            call = self.stubs[consumer % CHANNELS].Telemetry(metadata=self._meta(consumer))
            expression = d.FilterExpression(type=d.FilterType.TAG, expression="*")
            settings = d.Settings(client_type=d.ClientType.SIMPLE_CONSUMER, user_agent=ua, subscription=d.Subscription(
                group=d.Resource(name=self.group),
                subscriptions=[d.SubscriptionEntry(topic=d.Resource(name=self.topic), expression=expression)]))
            settings.subscription.long_polling_timeout.FromSeconds(POLL_S)
        settings.request_timeout.FromSeconds(3)
        try:
            await call.write(s.TelemetryCommand(settings=settings))
            reply = await asyncio.wait_for(call.read(), 30)
            if reply is not self.grpc.aio.EOF and reply.HasField("settings") and reply.status.code == d.Code.OK:
                self.figures.telemetry_settings += consumer is None
        except (self.grpc.aio.AioRpcError, asyncio.TimeoutError) as exc:
            self.figures.failures.append(f"Telemetry: {exc!r}"[:200])
        finally:
            opened.put_nowait(i)
        await self.stopping.wait()
        call.cancel()

    # -- the calls that must keep being answered --------------------------------------------------
    async def _control(self, name: str, awaitable: Any) -> Any:
        started = time.perf_counter()
        try:
            response = await awaitable
        except self.grpc.aio.AioRpcError as exc:
            self.figures.failures.append(f"{name}: {exc.code().name}")
            return None
        self.figures.latencies.setdefault(name, []).append(time.perf_counter() - started)
        if response.status.code != self.d.Code.OK:
            self.figures.failures.append(f"{name}: {self.d.Code.Name(response.status.code)} {response.status.message}")
        return response

    async def _producer(self, worker: int, count: int) -> None:
        d, s = self.d, self.s
        # a producer is the client of one of the Telemetry streams (its settings sent), as an SDK producer is
        stub, meta, timeout = self.stubs[worker % CHANNELS], self._meta(1000 + worker % max(1, self.streams)), self.deadline_s
        for n in range(count):
            if self.figures.failures:  # starved already: say so now rather than after count deadlines
                return
            await self._control("QueryRoute", stub.QueryRoute(
                s.QueryRouteRequest(topic=d.Resource(name=self.topic)), metadata=meta, timeout=timeout))
            await self._control("Heartbeat", stub.Heartbeat(
                s.HeartbeatRequest(client_type=d.ClientType.PRODUCER), metadata=meta, timeout=timeout))
            body = f"load-{worker}-{n}"
            sysp = d.SystemProperties(message_id="01" + uuid.uuid4().hex.upper(), message_type=d.MessageType.NORMAL,
                                      body_encoding=d.Encoding.IDENTITY, born_host="127.0.0.1")
            sysp.born_timestamp.GetCurrentTime()
            message = d.Message(topic=d.Resource(name=self.topic), body=body.encode(), system_properties=sysp)
            sent = await self._control("SendMessage", stub.SendMessage(
                s.SendMessageRequest(messages=[message]), metadata=meta, timeout=timeout))
            if sent is not None and sent.status.code == d.Code.OK:
                self.figures.sent.add(body)
            await asyncio.sleep(0.02)

    async def _sample(self) -> None:
        while not self.stopping.is_set():
            now = proc_status(self.pid)
            f = self.figures
            f.threads_max = max(f.threads_max, now["Threads"])
            f.rss_kb_max = max(f.rss_kb_max, now["VmRSS"])
            f.rss_anon_kb_max = max(f.rss_anon_kb_max, now.get("RssAnon", 0))
            await asyncio.sleep(0.2)

    # -- the run ------------------------------------------------------------------------------------
    async def run(self, settle_s: float = 3.0, drain_s: float = 20.0, producers: int = 4) -> Figures:
        """Park the receives and streams, let them settle, send while they are held, wait until every
        sent message was received (at most ``drain_s``), then end everything."""
        self.figures.threads_idle = proc_status(self.pid)["Threads"]
        sampler = asyncio.ensure_future(self._sample())
        opened: asyncio.Queue = asyncio.Queue()
        consumers = sorted({self._consumer(i) for i in range(self.receivers)})
        parked = [asyncio.ensure_future(self._stream(i, opened)) for i in range(self.streams)]
        parked += [asyncio.ensure_future(self._stream(c, opened, consumer=c)) for c in consumers]
        for _ in range(self.streams + len(consumers)):
            await opened.get()
        parked += [asyncio.ensure_future(self._receiver(i)) for i in range(self.receivers)]
        await asyncio.sleep(settle_s)
        per_worker = -(-self.messages // producers)
        await asyncio.gather(*(self._producer(w, min(per_worker, self.messages - w * per_worker))
                               for w in range(producers)))
        deadline = time.monotonic() + drain_s
        while not self.figures.sent <= self.figures.received and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        self.stopping.set()
        for channel in self.channels:
            await channel.close(grace=None)  # cancels the parked receives
        await asyncio.gather(*parked, sampler, return_exceptions=True)
        return self.figures


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")
