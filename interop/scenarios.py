"""The scenario list: what each driver is asked to do (params) and what must have happened (checks).

Drivers only act and report events (one JSON object per line); every expectation lives here so
the columns are judged by the same rules.

What every driver does, whatever the op (the op-specific parts are in each builder's docstring):

* params always carry ``namesrv``, ``cluster``, ``topic``, ``group``, ``producer_group``, ``wait``,
  ``settle``, ``linger`` (seconds) and the scenario's own keys; ``messages`` is a list of specs.
* A message spec has ``body`` (text), ``tags``, ``keys`` (list) and optionally ``props`` (user
  properties), ``delay`` (level), ``shard`` (queue index: send with a selector picking
  ``queues[shard % len(queues)]``) and ``size``/``fill``: then the body is ``body_bytes(spec)``
  below (label, ``#``, generated filler up to ``size`` bytes), which drivers must build identically.
* ``sent`` events: ``body``, ``at`` (epoch seconds), ``status`` (SendStatus name), ``msg_id``,
  ``offset_msg_id``; ``queue_id``/``queue_offset`` when the client reports them.
* ``recv`` events: ``body`` = the body as UTF-8 up to its first ``#`` (the whole body when it has
  none), ``tags``, ``keys`` (list), ``topic``, ``queue_id``, ``reconsume`` (reconsumeTimes),
  ``member`` (which consumer of the cell), ``at``; plus ``queue_offset`` when known; ``size`` and
  ``sha256`` (hex of all body bytes) when the body is longer than 1024 bytes; ``props`` (name ->
  value or null, for every property name any spec in ``messages`` carries) when some spec has props;
  ``stored_at`` (the message's store timestamp, epoch seconds of the broker's clock) when the client has it.
* ``error`` events: ``error`` (text) for anything that went wrong; any error fails the cell.
* ``note`` events: ``note`` (text), what a driver saw of its own clients when deliveries did not come in
  time (the Java driver: each member's queues and last pull); the runner adds them to a FAIL's text.
* ``acl`` (``access_key``, ``secret_key``; null or absent: no credentials) and ``tls`` (bool): every
  client of the cell signs its requests with these keys as Java's ``AclClientRPCHook`` does, and
  connects with TLS (interop/modes.py sets them per mode; some scenarios set their own).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from interop.modes import READER, USER, WRONG_SECRET, keys
from interop.probe import Probe

#: What ``mqadmin clusterList`` reads from GET_BROKER_RUNTIME_INFO (it fails without them).
RUNTIME_KEYS = ("brokerVersionDesc", "msgPutTotalTodayNow", "msgGetTotalTodayNow", "putTps", "getTransferedTps")
SETTLE = 3.0  # seconds for consumers of a group to rebalance before messages are sent
#: How long a group of several push consumers started together may wait for its deliveries. The Java
#: clients (4.9.8 and 5.3 alike) have a start-up race: the heartbeat they schedule 1 s after start can be
#: built just before the first rebalance gives the subscription a new subVersion, and it holds the lock
#: the rebalance's own heartbeat then fails to take; that member's pulls carry a subVersion the broker
#: has not seen and get SUBSCRIPTION_NOT_LATEST (Apache's brokers answer the same) until the next
#: heartbeat, heartbeatBrokerInterval (30 s) later. Seen in rmqtx's request log; nothing is lost. The
#: 5.x client also skips its start-up rebalance when that heartbeat holds the lock as the consumer starts;
#: its first rebalance then comes with the rebalance timer, 20 s later. Either can hit a lone consumer
#: too: the Java driver raises shorter waits (interop/drivers/java.py, START_RACE_S).
GROUP_WAIT = 30.0 + 15.0


@dataclass(frozen=True)
class Context:
    """One matrix run: the per-run suffix and what the broker was found to be configured with."""

    run: str
    namesrv: str
    levels: list[float]  # delay level n waits levels[n - 1] seconds
    tx_check_seconds: float = 66.0  # transactionCheckInterval + transactionTimeOut
    cluster: str = "DefaultCluster"
    mode: str = "plain"  # interop/modes.py
    broker: str = ""


Events = list[dict]
Check = Callable[[Events, dict, Probe], "str | None"]


@dataclass(frozen=True)
class Scenario:
    """``op`` is what the driver runs; ``build`` the extra params; ``check`` a failure reason or None."""

    key: str
    title: str
    op: str
    build: Callable[[Context], dict]
    check: Check
    wait: float = 20.0  # how long the driver waits for deliveries
    create_topic: bool = True  # the runner creates the topic first, as mqadmin would
    #: the topic's 5.x ``message.type`` (``mqadmin updateTopic -a +message.type=FIFO``): Apache's proxy and the 5.x
    #: SDKs take only messages of the topic's type (a 4.x broker ignores the attribute, and no broker checks it)
    message_type: str = ""
    modes: tuple[str, ...] = ()  # the modes it makes sense in (empty: every mode)
    pop_mode: bool = False  # the runner then sets the group to POP, as ``mqadmin setConsumeMode -m POP`` would
    orderly_group: bool = False  # the runner makes the group orderly first, as 5.x ``mqadmin updateSubGroup -o true``
    clients: tuple[str, ...] = ()  # the only columns it makes sense for (empty: every column) ...
    clients_reason: str = ""  # ... and why the others SKIP it

    def params(self, ctx: Context, client: str) -> dict:
        """What the driver gets: names unique to this run and client, default waits, the scenario's own."""
        name = f"{self.key}_{client}_{ctx.run}"
        return {"scenario": self.key, "namesrv": ctx.namesrv, "cluster": ctx.cluster, "topic": f"IT_{name}",
                "group": f"GID_{name}", "producer_group": f"PID_{name}", "wait": self.wait, "settle": 0.0,
                "linger": 0.0, **self.build(ctx)}


def cell_timeout(params: dict) -> float:
    """The whole cell: the driver's own waits plus start-up and shutdown."""
    return params["wait"] + params["settle"] + params["linger"] + 30


def messages(prefix: str, n: int, tags: str | tuple[str, ...] = "TagA", **extra: object) -> list[dict]:
    """Message specs: unique bodies and keys, tags cycling through ``tags``."""
    cycle = (tags,) if isinstance(tags, str) else tags
    return [{"body": f"{prefix}-{i}", "tags": cycle[i % len(cycle)], "keys": [f"{prefix}-key-{i}"], **extra} for i in range(n)]


BIG_BODY = 4 * 1024 * 1024 - 1024  # 4 MiB less what the broker's maxMessageSize counts beyond the body
ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def body_bytes(spec: dict) -> bytes:
    """The body drivers send. With ``size``: UTF-8 label, ``#``, then filler up to ``size`` bytes.

    ``fill`` "random": filler byte i is ALPHABET[x_i % 64] where x is xorshift32 (x ^= x << 13;
    x ^= x >> 17; x ^= x << 5, on unsigned 32-bit ints) seeded with 2463534242 and stepped once
    before each byte (compresses to about 3/4). ``fill`` "repeat": filler byte i is ALPHABET[i % 64]
    (compresses to almost nothing).
    """
    return _body_bytes(spec["body"], spec.get("size"), spec.get("fill"))


@lru_cache(maxsize=16)
def _body_bytes(label_text: str, size: int | None, fill: str | None) -> bytes:
    label = label_text.encode("utf-8")
    if size is None:
        return label
    n = size - len(label) - 1
    if fill == "repeat":
        filler = (ALPHABET * (n // 64 + 1))[:n]
    else:
        out, x = bytearray(n), 2463534242
        for i in range(n):
            x ^= (x << 13) & 0xFFFFFFFF
            x ^= x >> 17
            x ^= (x << 5) & 0xFFFFFFFF
            out[i] = ALPHABET[x % 64]
        filler = bytes(out)
    return label + b"#" + filler


# -- shared judgements -------------------------------------------------------------------------
def errors(events: Events) -> str | None:
    found = [e.get("error", "?") for e in events if e["kind"] == "error"]
    return "; ".join(found) if found else None


def received(events: Events, member: int | None = None) -> list[dict]:
    return [e for e in events if e["kind"] == "recv" and (member is None or e.get("member") == member)]


def sends_ok(events: Events, params: dict, status: bool = True) -> str | None:
    sent = [e for e in events if e["kind"] == "sent"]
    if len(sent) < len(params["messages"]):
        return f"{len(sent)} of {len(params['messages'])} sends reported"
    bad = [e for e in sent if status and e.get("status") != "SEND_OK"]
    return f"send status {bad[0].get('status')}" if bad else None


def delivered_exactly(events: Events, specs: list[dict], member: int | None = None) -> str | None:
    """Every spec arrived with its tags and keys; nothing else arrived."""
    got: dict[str, dict] = {}
    for e in received(events, member):
        got.setdefault(e["body"], e)
    want = {m["body"]: m for m in specs}
    who = "" if member is None else f"member {member}: "
    missing = sorted(set(want) - set(got))
    if missing:
        return f"{who}{len(missing)} of {len(want)} not received ({missing[0]}...)"
    extra = sorted(set(got) - set(want))
    if extra:
        return f"{who}unexpected {extra[0]} ({len(extra)} extra)"
    for body, spec in want.items():
        e = got[body]
        if e.get("tags") != spec["tags"] or sorted(e.get("keys") or []) != sorted(spec["keys"]):
            return f"{who}{body} came with tags {e.get('tags')!r} keys {e.get('keys')!r}"
    return None


def first(*reasons: "str | None") -> str | None:
    return next((r for r in reasons if r), None)


# -- builders and checks -----------------------------------------------------------------------
def send_scenario(mode: str) -> Scenario:
    def build(ctx: Context) -> dict:
        return {"mode": mode, "messages": messages(mode, 4, ("TagA", "TagB"))}

    def check(events: Events, params: dict, probe: Probe) -> str | None:
        return first(errors(events), sends_ok(events, params, status=mode != "oneway"), delivered_exactly(events, params["messages"]))

    return Scenario(f"{mode}_send", f"{mode} send", "send", build, check)


def cluster_build(ctx: Context) -> dict:
    return {"model": "CLUSTERING", "members": 2, "expression": "*", "messages": messages("cluster", 12), "settle": SETTLE, "linger": 1.0,
            "wait": GROUP_WAIT}


def cluster_check(events: Events, params: dict, probe: Probe) -> str | None:
    bodies = [e["body"] for e in received(events)]
    queues = [{e["queue_id"] for e in received(events, m)} for m in range(params["members"])]
    if not all(queues):
        return f"a member got nothing (queues per member {queues})"
    shared = sorted(q for q in queues[0] & queues[1] if not _handed_over(events, q))
    if shared:
        return f"both members consumed queue(s) {shared}"
    dup = sorted({b for b in bodies if bodies.count(b) > 1})
    return first(errors(events), delivered_exactly(events, params["messages"]), f"delivered twice: {dup[0]}" if dup else None)


def _handed_over(events: Events, queue_id: int) -> bool:
    """Whether a queue both members consumed changed hands once: every offset one member read comes
    before every offset the other read. A rebalance under load may move a queue after the first
    messages arrived (the queue is never owned by two at once); interleaved offsets would mean it was."""
    offsets = [sorted(e.get("queue_offset") if e.get("queue_offset") is not None else -1
                      for e in received(events, m) if e["queue_id"] == queue_id) for m in (0, 1)]
    if any(-1 in o for o in offsets):
        return False  # a client that does not report offsets: the strict check
    a, b = offsets
    return a[-1] < b[0] or b[-1] < a[0]


def broadcast_build(ctx: Context) -> dict:
    return {"model": "BROADCASTING", "members": 2, "expression": "*", "messages": messages("bc", 6), "settle": SETTLE, "linger": 1.0,
            "wait": GROUP_WAIT}


def broadcast_check(events: Events, params: dict, probe: Probe) -> str | None:
    return first(errors(events), *(delivered_exactly(events, params["messages"], m) for m in range(params["members"])))


def tag_build(ctx: Context) -> dict:
    msgs = messages("tag", 9, ("TagA", "TagB", "TagC"))
    return {"model": "CLUSTERING", "members": 1, "expression": "TagA || TagB", "messages": msgs,
            "expect": [m for m in msgs if m["tags"] != "TagC"], "settle": SETTLE, "linger": 2.0}


def sql_build(ctx: Context) -> dict:
    msgs = [dict(m, props={"a": str(i)}) for i, m in enumerate(messages("sql", 8, ("TagA", "TagB")))]
    return {"model": "CLUSTERING", "members": 1, "expression": "a BETWEEN 3 AND 6 AND TAGS = 'TagA'", "expression_type": "SQL92",
            "messages": msgs, "expect": [m for m in msgs if 3 <= int(m["props"]["a"]) <= 6 and m["tags"] == "TagA"],
            "settle": SETTLE, "linger": 2.0}


def filter_check(events: Events, params: dict, probe: Probe) -> str | None:
    return first(errors(events), delivered_exactly(events, params["expect"]))


def orderly_build(ctx: Context) -> dict:
    msgs = [{"body": f"k{k}-{s}", "tags": "TagO", "keys": [f"order-k{k}-{s}"], "shard": k} for s in range(6) for k in range(3)]
    return {"messages": msgs, "settle": SETTLE}


def orderly_check(events: Events, params: dict, probe: Probe) -> str | None:
    per_key: dict[str, list[int]] = defaultdict(list)
    queues: dict[str, set[int]] = defaultdict(set)
    for e in received(events):
        key, seq = e["body"].split("-")
        if int(seq) not in per_key[key]:
            per_key[key].append(int(seq))
        queues[key].add(e["queue_id"])
    for key, seqs in sorted(per_key.items()):
        if seqs != sorted(seqs):
            return f"{key} consumed out of order: {seqs}"
        if len(queues[key]) != 1:
            return f"{key} spread over queues {sorted(queues[key])}"
    return first(errors(events), delivered_exactly(events, params["messages"]))


def delay_build(ctx: Context) -> dict:
    msgs = [dict(m, delay=level) for level, m in zip((1, 2), messages("delay", 2))]
    return {"messages": msgs, "levels": ctx.levels, "settle": SETTLE}


def delay_check(events: Events, params: dict, probe: Probe) -> str | None:
    sent = {e["body"]: e["at"] for e in events if e["kind"] == "sent"}
    for m in params["messages"]:
        got = [e["at"] for e in received(events) if e["body"] == m["body"]]
        if not got or m["body"] not in sent:
            continue
        waited, level = got[0] - sent[m["body"]], params["levels"][m["delay"] - 1]
        if waited < level:
            return f"level {m['delay']} ({level:g} s) delivered after {waited:.2f} s"
    return first(errors(events), delivered_exactly(events, params["messages"]))


#: Timer messages: how late the broker may store a delivery on its real topic beyond its due time (its
#: timerPrecisionMs, 1 s by default, plus a busy reactor), judged by the delivered copy's store timestamp
#: where the client reports one (``stored_at``), else by the receipt.
TIMER_LATE_S = 6.0
#: ... and how late the client may hand it to the listener: the broker's part is bounded above; this bounds
#: the hand-over, which includes the Java clients' start-up heartbeat race (see GROUP_WAIT), 30 s at worst.
TIMER_RECEIVE_LATE_S = 40.0


def timer_due_s(spec: dict) -> float:
    """Seconds after the ``sent`` event's ``at`` that a timer spec is due."""
    timer = spec["timer"]
    if "delay_sec" in timer:
        return float(timer["delay_sec"])
    return (timer.get("delay_ms") or timer.get("deliver_in_ms")) / 1000


def timer_build(ctx: Context) -> dict:
    """Specs carry ``timer``: one of ``delay_ms`` (setDelayTimeMs), ``delay_sec`` (setDelayTimeSec) or
    ``deliver_in_ms`` (setDeliverTimeMs with the sender's clock plus this, read after ``at``)."""
    kinds = ({"delay_ms": 1500}, {"delay_sec": 2}, {"deliver_in_ms": 2500}, {"delay_ms": 5000})
    msgs = [dict(m, timer=t) for t, m in zip(kinds, messages("timer", len(kinds) + 1))]
    # a driver that can (the 5.3 remoting client) also sends this one and recalls it (RECALL_MESSAGE): 4 s leaves
    # a loaded machine time for the send and the recall, and it is still due before the last of ``messages``,
    # so once they are all in its slot has been read
    recall = dict(messages("timer", len(kinds) + 1)[-1], timer={"delay_ms": 4000})
    return {"messages": msgs, "recall": [recall], "settle": SETTLE, "wait": GROUP_WAIT}


def timer_waits(events: Events) -> str:
    """Every timer message's seconds from send to store (when known) and to receipt, for a failure's text."""
    sent = {e["body"]: e["at"] for e in events if e["kind"] == "sent"}
    parts = []
    for e in received(events):
        if e["body"] in sent:
            stored = f"stored {e['stored_at'] - sent[e['body']]:.2f} " if "stored_at" in e else ""
            parts.append(f"{e['body']} {stored}received {e['at'] - sent[e['body']]:.2f}")
    return ", ".join(parts)


def timer_check(events: Events, params: dict, probe: Probe) -> str | None:
    sent = {e["body"]: e["at"] for e in events if e["kind"] == "sent"}
    for m in params["messages"]:
        got = next((e for e in received(events) if e["body"] == m["body"]), None)
        if got is None or m["body"] not in sent:
            continue
        waited, due = got["at"] - sent[m["body"]], timer_due_s(m)
        stored = got["stored_at"] - sent[m["body"]] if "stored_at" in got else waited
        if min(waited, stored) < due - 0.002:  # the events' times are float seconds
            return f"{m['timer']} delivered after {min(waited, stored):.3f} s, before it was due; {timer_waits(events)}"
        if stored > due + TIMER_LATE_S or waited > due + TIMER_RECEIVE_LATE_S:
            return (f"{m['timer']} stored on its topic {stored:.3f} s and received {waited:.3f} s after its send, more than "
                    f"{TIMER_LATE_S:g} s (stored) or {TIMER_RECEIVE_LATE_S:g} s (received) late; {timer_waits(events)}")
    recalled = {e["body"]: e for e in events if e["kind"] == "recalled"}
    for m in params.get("recall", ()):
        if m["body"] in sent and m["body"] not in recalled:
            return f"{m['body']} sent to be recalled but not recalled"
        if m["body"] in recalled and recalled[m["body"]].get("msg_id") != next(
                e.get("msg_id") for e in events if e["kind"] == "sent" and e["body"] == m["body"]):
            return f"recalling {m['body']} answered {recalled[m['body']].get('msg_id')}, not its message id"
    # a recalled message arriving shows as unexpected here
    return first(errors(events), delivered_exactly(events, params["messages"]))


def reconsumes(events: Events) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for e in received(events):
        out[e["body"]].append(e)
    return out


def retry_build(ctx: Context) -> dict:
    return {"messages": messages("retry", 3), "levels": ctx.levels, "wait": 20 + ctx.levels[2] * 2}


def retry_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Each message comes back with reconsumeTimes 1, under its own topic, no sooner than level 3."""
    for body, seen in sorted(reconsumes(events).items()):
        times = [e["reconsume"] for e in seen]
        if times != sorted(times) or max(times) < 1:
            return f"{body}: reconsumeTimes {times}"
        if any(e["topic"] != params["topic"] for e in seen):
            return f"{body}: redelivered under topic {seen[-1]['topic']}"
        zero, one = [e for e in seen if e["reconsume"] == 0], [e for e in seen if e["reconsume"] == 1]
        if zero and one and one[0]["at"] - zero[0]["at"] < params["levels"][2]:
            return f"{body}: retried after {one[0]['at'] - zero[0]['at']:.2f} s, level 3 is {params['levels'][2]:g} s"
    return first(errors(events), delivered_exactly(events, params["messages"]))


def dlq_build(ctx: Context) -> dict:
    return {"messages": messages("dlq", 2), "max_reconsume": 1, "linger": 2.0, "wait": 25 + ctx.levels[2] * 2}


def dlq_check(events: Events, params: dict, probe: Probe) -> str | None:
    """The client stops after maxReconsumeTimes retries and the broker holds the message in %DLQ%group."""
    limit = next((e["max_reconsume"] for e in events if e["kind"] == "config"), params["max_reconsume"])
    for body, seen in sorted(reconsumes(events).items()):
        times = [e["reconsume"] for e in seen]
        if max(times) != limit:
            return f"{body}: reconsumeTimes {times}, wanted up to {limit}"
    reason = first(errors(events), delivered_exactly(events, params["messages"]))
    if reason:
        return reason
    dlq = "%DLQ%" + params["group"]
    for m in params["messages"]:
        if m["body"] not in probe.query_keys(dlq, m["keys"][0]):
            return f"{m['body']} not found in {dlq}"
    return None


def tx_build(states: list[tuple[str, str | None]], check_back: bool = False) -> Callable[[Context], dict]:
    """Half messages whose local transaction answers ``local`` (after ``hold`` s), and check-backs ``check``."""

    def build(ctx: Context) -> dict:
        msgs = [dict(m, local=local, check=check) for m, (local, check) in zip(messages(f"tx{len(states)}", len(states)), states)]
        return {"messages": msgs, "hold": 2.0, "wait": ctx.tx_check_seconds + 15 if check_back else 20.0, "linger": 3.0}

    return build


def tx_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Committed messages arrive only after the commit (local or check-back); rolled back ones never."""
    done = {e["body"]: e["at"] for e in events if e["kind"] in ("local", "checked") and e.get("state") == "COMMIT_MESSAGE"}
    checked = {e["body"] for e in events if e["kind"] == "checked"}
    want = [m for m in params["messages"] if "COMMIT_MESSAGE" in (m["local"], m["check"])]
    for m in params["messages"]:
        if m["local"] == "UNKNOW" and m["body"] not in checked:
            return f"{m['body']}: the broker never asked the producer (CHECK_TRANSACTION_STATE)"
        got = [e["at"] for e in received(events) if e["body"] == m["body"]]
        # a consumer's receive time may be in whole milliseconds (Java's currentTimeMillis), the
        # producer's decision in microseconds: a delivery in the decision's millisecond is after it
        if got and m["body"] in done and got[0] + 0.001 < done[m["body"]]:
            return f"{m['body']} delivered {done[m['body']] - got[0]:.2f} s before it was committed"
        if got and m["body"] not in done:
            return f"{m['body']} delivered though never committed"
    return first(errors(events), sends_ok(events, params), delivered_exactly(events, want))


def query_id_build(ctx: Context) -> dict:
    return {"messages": messages("byid", 1)}


def query_id_check(events: Events, params: dict, probe: Probe) -> str | None:
    body = params["messages"][0]["body"]
    found = {e["how"] for e in events if e["kind"] == "found" and e["body"] == body}
    missing = sorted({"offset_id", "uniq_id"} - found)
    return first(errors(events), sends_ok(events, params), f"not found by {', '.join(missing)}" if missing else None)


def query_key_build(ctx: Context) -> dict:
    msgs = messages("bykey", 3)
    key = f"shared-{ctx.run}"
    for m in msgs[:2]:
        m["keys"] = [key, *m["keys"]]
    return {"messages": msgs, "key": key}


def query_key_check(events: Events, params: dict, probe: Probe) -> str | None:
    found = sorted({e["body"] for e in events if e["kind"] == "found"})
    want = sorted(m["body"] for m in params["messages"] if params["key"] in m["keys"])
    return first(errors(events), sends_ok(events, params), None if found == want else f"found {found}, wanted {want}")


def topic_check(events: Events, params: dict, probe: Probe) -> str | None:
    topic = next((e for e in events if e["kind"] == "topic"), None)
    reason = errors(events)
    if reason or topic is None:
        return reason or "no topic list reported"
    if not topic["listed"]:
        return f"{params['topic']} missing from the topic list of {topic['count']}"
    return None if topic["queues"] == 4 else f"route shows {topic['queues']} queues, created 4"


def cluster_info_check(events: Events, params: dict, probe: Probe) -> str | None:
    reason = errors(events)
    brokers = next((e["brokers"] for e in events if e["kind"] == "cluster"), None)
    if reason or brokers is None:
        return reason or "no cluster info reported"
    if probe.broker not in brokers.values():
        return f"{probe.broker} not among the masters {brokers}"
    runtime = next((e for e in events if e["kind"] == "runtime" and e["addr"] == probe.broker), None)
    if runtime is None:
        return "no broker runtime info (GET_BROKER_RUNTIME_INFO)"
    missing = [k for k in RUNTIME_KEYS if k not in runtime["keys"]]
    return f"runtime info lacks {', '.join(missing)}" if missing else None


def progress_build(ctx: Context) -> dict:
    return {"messages": messages("progress", 5)}


def progress_check(events: Events, params: dict, probe: Probe) -> str | None:
    reason = first(errors(events), sends_ok(events, params), delivered_exactly(events, params["messages"]))
    stats = next((e for e in events if e["kind"] == "progress"), None)
    if reason or stats is None:
        return reason or "no consume stats reported"
    n = len(params["messages"])
    if (stats["broker_offset"], stats["consumer_offset"]) != (n, n):
        return f"broker offset {stats['broker_offset']}, consumer offset {stats['consumer_offset']}, wanted {n}/{n}"
    return None


# -- request-reply, lite pull, DLQ consumption, rebalance, restart, bodies ----------------------
def request_reply_build(ctx: Context) -> dict:
    """op ``request_reply``: a responder push consumer (member 0) of ``group`` on ``topic`` starts, then
    after ``settle`` a producer ``request``s each spec with ``request_timeout`` seconds. For every request
    the responder receives (``recv``) it builds the reply with the client's reply-message helper (Java
    ``MessageUtil.createReplyMessage``), body ``reply_prefix`` + request body, sends it with a producer
    of ``producer_group`` + "_reply" and emits ``replied`` (``body`` = request body, ``status``). The
    requester emits ``reply`` (``body`` = request body, ``reply`` = reply body text, ``topic``, ``at``)
    per answer, or an ``error`` on timeout.
    """
    return {"messages": messages("req", 3), "reply_prefix": "reply-to-", "request_timeout": 5.0, "settle": SETTLE}


def request_reply_check(events: Events, params: dict, probe: Probe) -> str | None:
    if errors(events):
        return errors(events)
    replies = {e["body"]: e for e in events if e["kind"] == "reply"}
    for m in params["messages"]:
        got = replies.get(m["body"])
        if got is None:
            return f"no reply to {m['body']}"
        if got["reply"] != params["reply_prefix"] + m["body"]:
            return f"reply to {m['body']} was {got['reply']!r}"
    return first(errors(events), delivered_exactly(events, params["messages"]))


def lite_pull_build(ctx: Context) -> dict:
    """op ``lite_pull``: send the specs (each to queue ``shard``, emitting ``sent`` with ``queue_id``).
    A lite pull consumer of ``group`` (auto commit off, CONSUME_FROM_FIRST_OFFSET; the group has no
    offsets yet, so it starts at 0: a seek right after assign races the first pulls in the 5.x client)
    assigns all queues of ``topic`` and polls until every spec arrived (``recv`` with ``phase`` "poll" and ``queue_offset``),
    then commits synchronously and emits ``committed`` (``queue_id``, ``offset``: the committed offset
    the client reports) for every queue. Then it seeks queue ``seek.queue_id`` to ``seek.offset`` and
    polls until ``after_seek`` arrived again (``recv`` with ``phase`` "seek"; a seek that brought
    nothing in 10 s is made again, since the 5.x client can lose one to its own interrupt), lingering
    ``linger`` for strays, and shuts down without committing again. The broker must then hold the first commit.
    """
    msgs = [dict(m, shard=i % 4) for i, m in enumerate(messages("lite", 8))]
    seek = {"queue_id": 1, "offset": 1}
    again = [m for m in msgs if m["shard"] == seek["queue_id"]][seek["offset"]:]
    return {"messages": msgs, "seek": seek, "after_seek": again, "linger": 1.0}


def lite_pull_check(events: Events, params: dict, probe: Probe) -> str | None:
    polled = [e for e in received(events) if e.get("phase") == "poll"]
    reason = first(errors(events), delivered_exactly(polled, params["messages"]))
    if reason:
        return reason
    for e in polled:
        shard = next(m["shard"] for m in params["messages"] if m["body"] == e["body"])
        if e["queue_id"] != shard:
            return f"{e['body']} sent to queue {shard}, pulled from queue {e['queue_id']}"
    per_queue = {q: sum(m["shard"] == q for m in params["messages"]) for q in range(4)}
    committed = {e["queue_id"]: e["offset"] for e in events if e["kind"] == "committed"}
    if committed != per_queue:
        return f"committed offsets {committed}, wanted {per_queue}"
    stored = {q: probe.consumer_offset(params["group"], params["topic"], q) for q in per_queue}
    if stored != per_queue:
        return f"the broker holds offsets {stored} for the group, committed {per_queue}"
    again = [e for e in received(events) if e.get("phase") == "seek"]
    seek = params["seek"]
    stray = [e["body"] for e in again if e["queue_id"] != seek["queue_id"] or e.get("queue_offset", seek["offset"]) < seek["offset"]]
    if stray:
        return f"after seek to queue {seek['queue_id']} offset {seek['offset']}: got {stray}"
    return delivered_exactly(again, params["after_seek"])


def pop_build(ctx: Context) -> dict:
    """op ``pop``: send the specs; one push consumer of ``group`` with client rebalance off (the broker
    assigns the queues, in POP mode: the runner set it) refuses the first delivery of each
    ``fail_once`` spec (RECONSUME_LATER: the 5.x client changes its invisible time to 10 s) and acks
    the rest, until every spec arrived and every ``fail_once`` one came back with reconsumeTimes 1."""
    msgs = messages("pop", 6)
    return {"messages": msgs, "fail_once": msgs[:1], "wait": 45, "linger": 1.0}


def pop_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Each spec once, the refused one twice (reconsumeTimes 0 then 1), all under the topic itself."""
    refused = {m["body"] for m in params["fail_once"]}
    for body, seen in sorted(reconsumes(events).items()):
        times = [e["reconsume"] for e in seen]
        wanted = [0, 1] if body in refused else [0]
        if times != wanted:
            return f"{body}: reconsumeTimes {times}, wanted {wanted}"
        if any(e["topic"] != params["topic"] for e in seen):
            return f"{body}: delivered under topic {seen[-1]['topic']}"
    return first(errors(events), delivered_exactly(events, params["messages"]))


def fifo_consume_build(ctx: Context) -> dict:
    """op ``fifo_consume`` (the 5.x gRPC SDKs): the runner made ``group`` orderly (consumeMessageOrderly); a
    producer sends the specs as FIFO messages, message group ``shard-<shard>``; one SimpleConsumer of the group
    receives one message at a time with a 2 s invisible duration, leaves the first delivery of each ``fail_once``
    spec un-acked (and, as an orderly consumer, anything after it of its message group in the same batch) and
    acks the rest, until every spec is acked. ``recv`` events carry ``message_group``; an ``acked`` event
    (``body``, ``at``) follows each ack."""
    msgs = [{"body": f"k{k}-{s}", "tags": "TagF", "keys": [f"fifo-k{k}-{s}"], "shard": k} for s in range(4) for k in range(3)]
    return {"messages": msgs, "fail_once": ["k1-1"], "wait": 40}


def fifo_consume_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Each message group acked once each, in send order; the refused message came back (reconsumeTimes 0
    then 1) and nothing after it in its group was acked before it came back."""
    reason = first(errors(events), delivered_exactly(events, params["messages"]))
    if reason:
        return reason
    acked: dict[str, list[int]] = defaultdict(list)
    back_at: dict[str, int] = {}  # refused body -> index of its second delivery
    refused = set(params["fail_once"])
    for i, e in enumerate(events):
        if e["kind"] == "recv":
            key = e["body"].split("-")[0]
            if e.get("message_group") != f"shard-{key[1:]}":
                return f"{e['body']} came with message group {e.get('message_group')!r}"
            if e["body"] in refused and e.get("reconsume") == 1:
                back_at.setdefault(e["body"], i)
        elif e["kind"] == "acked":
            key, seq = e["body"].split("-")
            acked[key].append(int(seq))
            before = f"{key}-{int(seq) - 1}"
            if before in refused and before not in back_at:
                return f"{e['body']} acked before {before} came back"
    for key in sorted({m["body"].split("-")[0] for m in params["messages"]}):
        want = sorted(int(m["body"].split("-")[1]) for m in params["messages"] if m["body"].startswith(key + "-"))
        if acked[key] != want:
            return f"message group of {key} acked in the order {acked[key]}, wanted {want}"
    for body in sorted(refused):
        times = [e["reconsume"] for e in reconsumes(events)[body]]
        if times != [0, 1]:
            return f"{body}: reconsumeTimes {times}, wanted [0, 1]"
    return None


CROWD_PRODUCERS, CROWD_CONSUMERS, CROWD_EACH = 4, 4, 25


def crowd_build(ctx: Context) -> dict:
    """op ``crowd`` (the 5.x gRPC SDKs): ``members`` SimpleConsumers of ``group`` (each its own client
    instance) start and keep receiving (long polling, ``invisible`` seconds, acking whatever they receive)
    while ``producers`` producers (each its own client instance, started together once the consumers are
    receiving) send their specs at the same time, each its own in order (a spec's ``producer`` names its
    sender); the consumers stop once every spec was acked (then ``linger``) or after ``wait`` seconds.
    ``sent`` events carry ``producer``; ``recv`` and ``acked`` events ``member``."""
    msgs = [dict(m, producer=p) for p in range(CROWD_PRODUCERS)
            for m in messages(f"crowd-p{p}", CROWD_EACH, ("TagA", "TagB"))]
    return {"messages": msgs, "producers": CROWD_PRODUCERS, "members": CROWD_CONSUMERS, "invisible": 20,
            "linger": 2.0, "wait": 60.0}


def crowd_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Every spec sent OK by its own producer and delivered at least once, nothing delivered that no producer
    sent, every delivered message acked, and the deliveries spread over more than one member."""
    reason = first(errors(events), sends_ok(events, params))
    if reason:
        return reason
    sent = [e for e in events if e["kind"] == "sent"]
    by_producer = {m["body"]: m["producer"] for m in params["messages"]}
    astray = [e["body"] for e in sent if by_producer.get(e["body"], -1) != e.get("producer")]
    if astray:
        return f"{astray[0]} reported sent by producer {next(e.get('producer') for e in sent if e['body'] == astray[0])}"
    sent_bodies = {e["body"] for e in sent}
    got = received(events)
    unsent = sorted({e["body"] for e in got} - sent_bodies)
    if unsent:
        return f"received {unsent[0]}, which no producer sent ({len(unsent)} such)"
    counts = [len(received(events, m)) for m in range(params["members"])]
    reason = delivered_exactly(events, params["messages"])
    if reason:
        return f"{reason} (deliveries per member {counts})"
    acked = {e["body"] for e in events if e["kind"] == "acked"}
    unacked = sorted({e["body"] for e in got} - acked)
    if unacked:
        return f"{unacked[0]} delivered but never acked ({len(unacked)} such; deliveries per member {counts})"
    if sum(1 for n in counts if n) < 2:
        return f"only one member received anything (deliveries per member {counts})"
    return None


def dlq_consume_build(ctx: Context) -> dict:
    """op ``dlq_consume``: as op ``dlq`` (member 0 fails every delivery, ``max_reconsume`` retries,
    ``config`` event), then ``linger`` seconds after the last retry a push consumer of ``dlq_group``
    (member 1, CONSUME_FROM_FIRST_OFFSET) subscribes to ``%DLQ%`` + ``group`` and consumes until it has
    every spec; its ``recv`` events carry the topic as the client shows it.
    """
    return {"messages": messages("dlqc", 2), "max_reconsume": 1, "linger": 2.0, "wait": 40 + ctx.levels[2] * 2}


def dlq_consume_check(events: Events, params: dict, probe: Probe) -> str | None:
    dlq = "%DLQ%" + params["group"]
    read = [e for e in received(events, 1)]
    wrong = [e["topic"] for e in read if e["topic"] != dlq]
    return first(errors(events), delivered_exactly(received(events, 0), params["messages"]),
                 delivered_exactly(read, params["messages"], 1), f"DLQ message came under topic {wrong[0]}" if wrong else None)


def three_build(ctx: Context) -> dict:
    """op ``consume`` with three CLUSTERING members started together and 100 sync sends a second later."""
    return {"model": "CLUSTERING", "members": 3, "expression": "*", "messages": messages("three", 100), "settle": 1.0,
            "linger": 3.0, "wait": GROUP_WAIT}


def three_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Nothing lost; a message seen twice must have moved between members (a queue handed over)."""
    seen: dict[str, list[int]] = defaultdict(list)
    for e in received(events):
        seen[e["body"]].append(e["member"])
    twice = sorted(b for b, members in seen.items() if len(members) != len(set(members)))
    return first(errors(events), delivered_exactly(events, params["messages"]),
                 f"{twice[0]} delivered twice to one member ({len(twice)} such)" if twice else None)


def restart_build(ctx: Context) -> dict:
    """op ``restart``: a push consumer (member 0, CONSUME_FROM_FIRST_OFFSET) starts, after ``settle``
    ``messages`` are sent; once it has them all it waits ``linger`` and shuts down (committing offsets).
    Then ``later`` is sent, a new consumer of the same group (member 1, a fresh client instance and a
    fresh local offset store) starts, consumes until it has ``later`` and waits ``linger`` for strays.
    """
    return {"messages": messages("before", 5), "later": messages("after", 5), "settle": SETTLE, "linger": 2.0}


def restart_check(events: Events, params: dict, probe: Probe) -> str | None:
    return first(errors(events), delivered_exactly(events, params["messages"], 0), delivered_exactly(events, params["later"], 1))


def body_scenario_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Sync sends of generated bodies: every one arrives whole (size and SHA-256)."""
    reason = first(errors(events), sends_ok(events, params), delivered_exactly(events, params["messages"]))
    if reason:
        return reason
    for m in params["messages"]:
        want = body_bytes(m)
        for e in received(events):
            if e["body"] == m["body"] and (e.get("size"), e.get("sha256")) != (len(want), hashlib.sha256(want).hexdigest()):
                return f"{m['body']}: {e.get('size')} bytes arrived, sent {len(want)} (or the digest differs)"
    return None


def big_build(ctx: Context) -> dict:
    """op ``send`` (mode sync): one body of BIG_BODY bytes of "random" fill."""
    return {"mode": "sync", "messages": [dict(m, size=BIG_BODY, fill="random") for m in messages("big", 1)], "wait": 30.0}


def compressed_build(ctx: Context) -> dict:
    """op ``send`` (mode sync): bodies of 16 KiB and 256 KiB "repeat" fill, over every client's compress threshold."""
    return {"mode": "sync", "messages": [dict(m, size=size, fill="repeat") for m, size in zip(messages("zip", 2), (16384, 262144))]}


def compressed_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Whole on arrival, and stored with the COMPRESSED flag (the client did compress them)."""
    reason = body_scenario_check(events, params, probe)
    if reason:
        return reason
    for m in params["messages"]:
        flags = probe.stored_sys_flags(params["topic"], m["keys"][0])
        if not flags:
            return f"{m['body']} not found by key {m['keys'][0]}"
        if not flags[0] & 1:
            return f"{m['body']} stored uncompressed (sysFlag {flags[0]:#x})"
    return None


NON_ASCII_PROPS = {"città": "東京", "ключ": "значение 🚀", "emoji🙂": "ü ß é"}


def non_ascii_build(ctx: Context) -> dict:
    """op ``send`` (mode sync): non-ASCII bodies, tags, keys, property names and values (some outside the BMP)."""
    msgs = [{"body": f"消息-{i}-Grüße-🚀", "tags": "标签🙂", "keys": [f"键-{i}-ключ-🔑"], "props": dict(NON_ASCII_PROPS, n=str(i))}
            for i in range(3)]
    return {"mode": "sync", "messages": msgs, "expression": "标签🙂"}


def non_ascii_check(events: Events, params: dict, probe: Probe) -> str | None:
    """Delivered through a non-ASCII tag subscription, properties intact, found by a non-ASCII key."""
    reason = first(errors(events), sends_ok(events, params), delivered_exactly(events, params["messages"]))
    if reason:
        return reason
    for m in params["messages"]:
        for e in received(events):
            if e["body"] == m["body"] and e.get("props") != m["props"]:
                return f"{m['body']} came with properties {e.get('props')!r}"
    key = params["messages"][0]["keys"][0]
    found = probe.query_keys(params["topic"], key)
    return None if params["messages"][0]["body"] in found else f"not found by key {key} (QUERY_MESSAGE)"


# -- security modes: refusals ---------------------------------------------------------------------
def refused_build(prefix: str, acl: dict | None, refusal: str | dict[str, str] | None) -> Callable[[Context], dict]:
    """op ``refused_send``: a producer with the given ``acl`` keys (null: none) sends each spec once,
    synchronously and without retries, and starts no consumer; each send gives a ``sent`` event or a
    ``refused`` event (``body``, ``error``: the exception's text, with the broker's remark when the client
    passes it on). The broker must refuse every send with ``refusal`` in that text (``{topic}`` stands
    for the cell's topic; a dict names it per mode), and store nothing.
    """

    def build(ctx: Context) -> dict:
        text = refusal.get(ctx.mode) if isinstance(refusal, dict) else refusal
        return {"messages": messages(prefix, 2), "acl": acl, "outcome": "refused", "refusal": text, "wait": 10.0}

    return build


def refused_check(events: Events, params: dict, probe: Probe) -> str | None:
    """``outcome`` "refused": every send refused (with Java's remark when one is expected), nothing
    stored; "stored": every send accepted and stored."""
    reason = errors(events)
    if reason:
        return reason
    accepted = [e for e in events if e["kind"] == "sent" and e.get("status") == "SEND_OK"]
    refused = {e["body"]: e.get("error") or "" for e in events if e["kind"] == "refused"}
    stored = probe.stored_count(params["topic"])
    n = len(params["messages"])
    if params["outcome"] == "stored":
        if refused:
            body, error = next(iter(refused.items()))
            return f"{body} refused: {error}"
        if len(accepted) < n or stored != n:
            return f"{len(accepted)} of {n} sends accepted, {stored} stored"
        return None
    if accepted:
        return f"{accepted[0]['body']} accepted (SEND_OK), wanted a refusal"
    missing = [m["body"] for m in params["messages"] if m["body"] not in refused]
    if missing:
        return f"no answer reported for {missing[0]}"
    want = params["refusal"].format(topic=params["topic"]) if params.get("refusal") else None
    off = [error for error in refused.values() if want and want not in error]
    if off:
        return f"refused with {off[0]!r}, wanted {want!r}"
    return f"{stored} message(s) stored after the refusals" if stored else None


def no_permission_build(ctx: Context) -> dict:
    """An account that may only subscribe sends: refused for want of PUB on the (per-run) topic."""
    params = refused_build("noperm", keys(READER), None)(ctx)
    if ctx.mode == "acl2":
        return dict(params, refusal=f"User:{READER[0]} has no permission to access Topic:{{topic}} from")
    return dict(params, refusal="No default permission for topic:{topic}")


def plain_client_build(ctx: Context) -> dict:
    """A client without TLS: turned away by an enforcing broker (any error), served by a permissive one."""
    return {"messages": messages("plain", 1), "tls": False, "outcome": "refused" if ctx.mode == "tls" else "stored",
            "refusal": None, "wait": 10.0}


def nothing(ctx: Context) -> dict:
    return {}


SCENARIOS: list[Scenario] = [
    send_scenario("sync"),
    send_scenario("async"),
    send_scenario("oneway"),
    send_scenario("batch"),
    Scenario("cluster_consume", "cluster consume", "consume", cluster_build, cluster_check),
    Scenario("broadcast_consume", "broadcast consume", "consume", broadcast_build, broadcast_check),
    Scenario("tag_filter", "tag filter", "consume", tag_build, filter_check),
    Scenario("sql92_filter", "SQL92 filter", "consume", sql_build, filter_check),
    Scenario("orderly", "orderly", "orderly", orderly_build, orderly_check, message_type="FIFO"),
    Scenario("delay_level", "delay level", "delay", delay_build, delay_check, message_type="DELAY"),
    Scenario("timer", "timer message (5.x)", "timer", timer_build, timer_check, message_type="DELAY"),
    Scenario("retry", "retry", "retry", retry_build, retry_check),
    Scenario("dlq", "DLQ", "dlq", dlq_build, dlq_check),
    Scenario("tx_commit", "transaction commit", "transaction", tx_build([("COMMIT_MESSAGE", None)]), tx_check,
             message_type="TRANSACTION"),
    Scenario("tx_rollback", "transaction rollback", "transaction",
             tx_build([("COMMIT_MESSAGE", None), ("ROLLBACK_MESSAGE", None)]), tx_check, message_type="TRANSACTION"),
    Scenario("tx_check", "transaction check-back", "transaction", tx_build([("UNKNOW", "COMMIT_MESSAGE")], check_back=True),
             tx_check, message_type="TRANSACTION"),
    Scenario("query_id", "query by id", "query_id", query_id_build, query_id_check),
    Scenario("query_key", "query by key", "query_key", query_key_build, query_key_check),
    Scenario("admin_topic", "admin topic create/list", "admin_topic", nothing, topic_check, create_topic=False),
    Scenario("admin_cluster", "admin cluster info", "admin_cluster", nothing, cluster_info_check, create_topic=False),
    Scenario("admin_progress", "admin consumer progress", "admin_progress", progress_build, progress_check),
    Scenario("request_reply", "request-reply", "request_reply", request_reply_build, request_reply_check),
    Scenario("lite_pull", "lite pull assign/seek/commit", "lite_pull", lite_pull_build, lite_pull_check),
    Scenario("dlq_consume", "consume from the DLQ", "dlq_consume", dlq_consume_build, dlq_consume_check),
    Scenario("three_consumers", "three consumers, 100 sends", "consume", three_build, three_check),
    Scenario("restart_resume", "restart resumes at the committed offset", "restart", restart_build, restart_check),
    Scenario("big_body", "4 MiB body", "send", big_build, body_scenario_check),
    Scenario("compressed", "compressed bodies", "send", compressed_build, compressed_check),
    Scenario("non_ascii", "non-ASCII keys and properties", "send", non_ascii_build, non_ascii_check),
    Scenario("pop", "POP consumption (5.x)", "pop", pop_build, pop_check, wait=45.0, pop_mode=True),
    Scenario("fifo_consume", "FIFO consumption over gRPC (5.x)", "fifo_consume", fifo_consume_build, fifo_consume_check,
             wait=40.0, orderly_group=True, message_type="FIFO", clients=("py5", "java5grpc", "node5", "go5"),
             clients_reason=("a 5.x gRPC SDK SimpleConsumer of an orderly group, over the gRPC endpoint; this column's "
                             "ordered consumption is the orderly scenario")),
    Scenario("crowd", "4 producers and 4 SimpleConsumers at once (5.x)", "crowd", crowd_build, crowd_check, wait=60.0,
             clients=("py5", "java5grpc", "node5", "go5"),
             clients_reason=("5.x gRPC SDK producers and SimpleConsumers, each its own client instance, over the gRPC "
                             "endpoint; this column's groups are three_consumers")),
]
#: The modes with ACL on: 1.0 accounts, and 2.0 users and policies.
ACL_MODES = ("acl", "acl2")
#: Run only in their modes (``python -m interop --mode acl`` / ``acl2`` / ``tls`` / ``tls-permissive``).
SECURITY_SCENARIOS: list[Scenario] = [
    Scenario("acl_wrong_secret", "ACL: wrong secret key refused", "refused_send",
             refused_build("wrongsk", {**keys(USER), "secret_key": WRONG_SECRET},
                           {"acl": f"Check signature failed for accessKey={USER[0]}", "acl2": "check signature failed."}),
             refused_check, modes=ACL_MODES),
    Scenario("acl_unknown_key", "ACL: unknown access key refused", "refused_send",
             refused_build("unknownak", {"access_key": "InteropNobody", "secret_key": USER[1]},
                           {"acl": "No acl config for InteropNobody", "acl2": "User:InteropNobody is not found."}),
             refused_check, modes=ACL_MODES),
    Scenario("acl_no_credentials", "ACL: no credentials refused", "refused_send",
             refused_build("nokeys", None, {"acl": "No accessKey is configured", "acl2": "username cannot be null."}),
             refused_check, modes=ACL_MODES),
    Scenario("acl_no_permission", "ACL: publish without PUB permission refused", "refused_send", no_permission_build,
             refused_check, modes=ACL_MODES),
    Scenario("tls_plain_client", "TLS: client without TLS (refused when enforcing)", "refused_send", plain_client_build,
             refused_check, modes=("tls", "tls-permissive")),
]
BY_KEY = {s.key: s for s in SCENARIOS + SECURITY_SCENARIOS}
