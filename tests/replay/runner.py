"""Drive a broker with the captured exchanges over raw TCP, comparing each answer with Java's as it comes."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from twisted.internet import defer, endpoints, protocol, reactor, task

from rmqtx.remoting import RemotingCommand, encode_frame
from rmqtx.remoting.serializer import decode_frame
from tests.namesrv.helpers import RawClient
from tests.replay.capture import Exchange, broker_exchanges
from tests.replay.compare import compare
from tests.replay.normalize import JAVA_RACE_ANSWERS, JAVA_RACES, Translation, rewrite_request

#: A Java answer that came later than this was a held (long-polling) pull: it is awaited in capture order.
HELD_AFTER_S = 1.0
#: How long a broker-initiated request (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) may take.
PUSH_DEADLINE_S = 20.0


class ReplayConnection(RawClient):
    """A raw connection that also keeps the requests the broker sends on it."""

    def __init__(self) -> None:
        super().__init__()
        self.pushed: list[bytes] = []

    def dataReceived(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4:
            length = int.from_bytes(self.buffer[:4], "big", signed=True)
            if len(self.buffer) < 4 + length:
                return
            frame, self.buffer = self.buffer[: 4 + length], self.buffer[4 + length :]
            cmd = decode_frame(frame)
            if not cmd.is_response:
                self.pushed.append(frame)
                continue
            d = self.waiting.pop(cmd.opaque, None)
            if d is None:
                self.early[cmd.opaque] = frame
            else:
                d.callback(frame)

    async def next_pushed(self, code: int, deadline_s: float) -> bytes | None:
        """The first broker request with ``code`` not yet taken; None when none came in time."""
        end = time.monotonic() + deadline_s
        while True:
            for i, frame in enumerate(self.pushed):
                if decode_frame(frame).code == code:
                    return self.pushed.pop(i)
            if time.monotonic() > end:
                return None
            await task.deferLater(reactor, 0.02, lambda: None)


@dataclass
class Report:
    """What one replay compared, and every unexplained difference."""

    compared: Counter = field(default_factory=Counter)  # (request code, Java's answer code) -> count
    oneway: Counter = field(default_factory=Counter)  # request code -> count
    unanswered: Counter = field(default_factory=Counter)  # sent, Java never answered (in flight at shutdown)
    races: list[str] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)

    def codes(self) -> set[int]:
        return {c for c, _ in self.compared} | set(self.oneway) | set(self.unanswered)


_barrier = itertools.count(1_000_000)


class Replayer:
    """Replays capture files against one broker, carrying the offset/time translation across files."""

    def __init__(self, broker_port: int) -> None:
        self.port = broker_port
        self.tr = Translation(broker_port)
        self.report = Report()

    def _check(self, ex: Exchange, java: bytes, ours: bytes | None, error: str | None = None) -> None:
        answer = decode_frame(java)
        race = JAVA_RACE_ANSWERS.get((ex.file, ex.cmd.opaque))
        if race:
            self.report.races.append(f"{ex.where}: {race}")
            return
        if ours is None:
            self.report.diffs.append(f"{ex.where}: no answer from rmqtx ({error}); Java answered code {answer.code}")
            return
        self.report.compared[(ex.code, answer.code)] += 1
        for diff in compare(ex.code, java, ours, self.tr, pushed=ex.pushed):
            self.report.diffs.append(f"{ex.where}: {diff}")

    async def _settle(self, ex: Exchange, d: defer.Deferred) -> None:
        try:
            ours, error = await d, None
        except Exception as exc:  # noqa: BLE001 - reported as a difference
            ours, error = None, repr(exc)
        self._check(ex, ex.answer, ours, error)  # type: ignore[arg-type]

    async def replay(self, name: str, after_step: Callable[[str], Awaitable[None]] | None = None) -> None:
        """Every exchange of one capture, in capture order; each captured connection its own TCP connection.

        ``after_step`` runs once the exchanges of each client step (an mqadmin command line) are replayed.
        """
        conns: dict[int, ReplayConnection] = {}
        held: list[tuple[float, Exchange, defer.Deferred]] = []
        step = None
        try:
            for ex in broker_exchanges(name):
                if after_step is not None and step is not None and ex.step != step:
                    await after_step(step)
                step = ex.step
                # answers Java gave before this request was sent come first here too
                for item in [h for h in held if h[0] <= ex.ts]:
                    held.remove(item)
                    await self._settle(item[1], item[2])
                conn = conns.get(ex.conn)
                if conn is None:
                    conn = conns[ex.conn] = await _connect(self.port)
                if ex.pushed:
                    ours = await conn.next_pushed(ex.code, PUSH_DEADLINE_S)
                    self._check(ex, ex.frame, ours, "the broker never sent it")
                    continue
                frame = rewrite_request(ex, self.tr)
                if (ex.file, ex.code, (ex.cmd.ext_fields or {}).get("commitOrRollback")) in JAVA_RACES:
                    self.tr.shift_allowed = True
                if ex.cmd.is_oneway:
                    conn.send_raw(frame)
                    await _barrier_on(conn)
                    if conn.early.pop(ex.cmd.opaque, None) is not None:
                        self.report.diffs.append(f"{ex.where}: rmqtx answered a oneway request")
                    self.report.oneway[ex.code] += 1
                    continue
                if ex.answer is None:  # still in flight when the Java client shut down
                    conn.send_raw(frame)
                    self.report.unanswered[ex.code] += 1
                    continue
                d = defer.ensureDeferred(conn.call_raw(frame, timeout=30))
                if ex.answer_ts - ex.ts > HELD_AFTER_S:  # type: ignore[operator]
                    held.append((ex.answer_ts, ex, d))  # type: ignore[arg-type]
                else:
                    await self._settle(ex, d)
            for _, ex, d in held:
                await self._settle(ex, d)
            if after_step is not None and step is not None:
                await after_step(step)
        finally:
            for conn in conns.values():
                await conn.close()


async def _barrier_on(conn: ReplayConnection) -> None:
    """An answered request behind a oneway on the same connection: the oneway was handled."""
    await conn.call_raw(encode_frame(RemotingCommand.request(9999, {}, opaque=next(_barrier))), timeout=10)


async def _connect(port: int) -> ReplayConnection:
    endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    return await endpoint.connect(protocol.Factory.forProtocol(ReplayConnection))


__all__ = ["Replayer", "Report", "broker_exchanges"]
