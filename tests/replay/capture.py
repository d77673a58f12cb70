"""The broker side of the 4.9.8 captures as a list of exchanges, in capture order."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqtx.remoting import RemotingCommand, encode_frame
from rmqtx.remoting.serializer import decode_frame
from tests.fixtures import records

#: Session 1 captures in the order they ran against one Java broker (its store carried over).
SESSION_1 = [
    "scenario-producer-send.jsonl",
    "scenario-push-consumer.jsonl",
    "scenario-orderly-consumer.jsonl",
    "scenario-retry.jsonl",
    "scenario-transaction.jsonl",
    "scenario-query.jsonl",
    "scenario-admin.jsonl",
]
#: Session 2: the broker restarted on session 1's store, both JVMs speaking ROCKETMQ binary.
SESSION_2 = ["scenario-binary-serialization.jsonl"]


@dataclass
class Exchange:
    """A client->broker request and Java's answer, or a broker->client request (``pushed``)."""

    file: str
    conn: int
    ts: float
    frame: bytes
    cmd: RemotingCommand
    step: str = ""
    pushed: bool = False
    answer: bytes | None = None
    answer_ts: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def code(self) -> int:
        return self.cmd.code

    @property
    def answer_cmd(self) -> RemotingCommand | None:
        return None if self.answer is None else decode_frame(self.answer)

    @property
    def where(self) -> str:
        return f"{self.file} conn {self.conn} t={self.ts:.3f} code {self.code} opaque {self.cmd.opaque} ({self.step})"


def broker_exchanges(name: str) -> list[Exchange]:
    """Every broker frame of one capture: requests with their answers, and the broker's own requests."""
    out: list[Exchange] = []
    pending: dict[tuple[int, int], Exchange] = {}
    for rec in records(name):
        if rec.get("peer") != "broker" or "hex" not in rec:
            continue
        frame = bytes.fromhex(rec["hex"])
        cmd = decode_frame(frame)
        if not cmd.is_response:
            ex = Exchange(name, rec["conn"], rec["ts"], frame, cmd, rec.get("step", ""), pushed=rec["dir"] == "s2c")
            out.append(ex)
            if not cmd.is_oneway:
                pending[(rec["conn"], cmd.opaque)] = ex
        else:
            ex = pending.pop((rec["conn"], cmd.opaque), None)
            if ex is not None:
                ex.answer, ex.answer_ts = frame, rec["ts"]
    return out


def between_sessions() -> list[bytes]:
    """Requests for the sends Java's broker took between the two capture sessions, which no capture holds.

    Session 2's first pulls return four messages born at t=567 (one sync send, one batch of three, the
    producer scenario run once more outside any capture window). They are rebuilt from the producer
    capture's requests with the born time, queue and UNIQ_KEYs of the records Java returned, so the
    replayed store holds what Java's did when session 2 began.
    """
    from rmqtx.store.record import encode_batch_body, iter_batch_body

    start = min(rec["ts"] for rec in records(SESSION_2[0]) if "ts" in rec) * 1000
    end = max(ex.ts for name in SESSION_1 for ex in broker_exchanges(name)) * 1000
    found = {}
    for ex in broker_exchanges(SESSION_2[0]):
        answer = ex.answer_cmd
        if ex.code == 11 and answer is not None and answer.code == 0:
            for rec in _records(answer.body):
                if end < rec.born_timestamp < start:
                    found[rec.physical_offset] = rec
    groups: dict[int, list] = {}
    for rec in sorted(found.values(), key=lambda r: r.physical_offset):
        groups.setdefault(rec.born_timestamp, []).append(rec)
    templates = [ex for ex in broker_exchanges(SESSION_1[0]) if ex.code in (310, 320) and not ex.cmd.is_oneway]
    frames = []
    for born, recs in groups.items():
        for ex in templates:
            cmd = decode_frame(ex.frame)
            if ex.code == 310 and len(recs) == 1 and cmd.body == recs[0].body:
                cmd.ext_fields["i"] = _with_uniq_key(cmd.ext_fields["i"], recs[0])
                break
            if ex.code == 320 and [item for _, item, _ in iter_batch_body(cmd.body)] == [r.body for r in recs]:
                cmd.body = encode_batch_body([(flag, item, _with_uniq_key(props.decode(), rec))
                                              for (flag, item, props), rec in zip(iter_batch_body(cmd.body), recs)])
                break
        else:
            raise AssertionError(f"no template request for the messages born at {born}")
        cmd.ext_fields["g"] = str(born)
        cmd.ext_fields["e"] = str(recs[0].queue_id)
        cmd.opaque = 700_000 + len(frames)
        frames.append(encode_frame(cmd))
    return frames


def _records(body: bytes) -> list:
    from rmqtx.store.record import decode_record

    out, pos = [], 0
    while pos < len(body):
        rec = decode_record(body, pos)
        out.append(rec)
        pos += rec.total_size
    return out


def _with_uniq_key(props: str, rec) -> str:
    stored = dict(item.split("\x01", 1) for item in rec.properties.split("\x02") if "\x01" in item)
    items = [item.split("\x01", 1) for item in props.split("\x02")]
    return "\x02".join(f"{k}\x01{stored['UNIQ_KEY'] if k == 'UNIQ_KEY' else v}" for k, v in items)
