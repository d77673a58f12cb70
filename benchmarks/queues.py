"""What many topics and queues cost a broker: N topics of Q queues, one message to each queue.

    python benchmarks/queues.py                          # 200 topics x 8 queues, rmqtx: about a minute
    python benchmarks/queues.py --topics 2000 --queues 8 # the "many topics and queues" issue's case
    python benchmarks/queues.py --against java           # the same against Apache's 4.9.8 broker
    python benchmarks/queues.py --against both --topics 12500   # 100,000 queues, rmqtx then Java, with ratios
    python benchmarks/queues.py --topics 125000 --store-type defaultRocksDB --consume   # the million queues

Against a fresh broker process on a fresh temp store and free ports (``twistd rmqstandalone``, or
Apache's 4.9.8 NameServer+Broker built and started as ``vs_java.py`` does), in turn:

1. ``--topics`` topics of ``--queues`` queues made with UPDATE_AND_CREATE_TOPIC, one at a time over
   one connection (as ``mqadmin updateTopic`` in a loop): the time for all of them (with
   ``--create-batch N``, rmqtx only: N per UPDATE_AND_CREATE_TOPIC_LIST, 5.x's code 18);
2. one ``--size``-byte SEND_MESSAGE_V2 to every queue, ``--depth`` requests in flight on each of
   ``--conns`` connections (rmqtx's own remoting client): the time, the rate and failures, and the
   server's CPU seconds for steps 1 and 2 (/proc utime+stime: steadier than wall time on a busy host);
3. how long after the last answer every acknowledged message is readable (GET_MAX_OFFSET of each
   queue; Java's broker dispatches to its consume queues in a thread, after answering), then the
   broker process's RssAnon, mapped regions (lines of /proc/PID/maps) and open descriptors, before
   step 1, after it and after step 2 (``--settle`` seconds later);
4. restart time: a clean stop (SIGTERM, waited for) then a start on the same store until the broker
   accepts and serves routes; then a kill -9 and a start again (crash recovery). After each start
   every queue's max offset is read back and must be 1;
5. with ``--consume``, every queue's message pulled back (PULL_MESSAGE from offset 0, ``--conns``
   connections x ``--depth`` in flight) after the last start: the time and the broker's peak RSS;
6. with ``--delete``, every topic deleted with DELETE_TOPIC_IN_BROKER, one at a time: the time and CPU.

``--store-type defaultRocksDB`` starts rmqtx with its RocksDB consume queues (the rocksdb extra).

Prints one Markdown table (with ``--against both``, rmqtx's and Java's runs one after the other, side
by side with their ratio). The machine is shared: compare figures of one run, not across runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import vs_java  # noqa: E402
from testkit import procs  # noqa: E402
from twisted.internet import defer  # noqa: E402

from rmqtx.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402
from rmqtx.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader, send_header_to_v2  # noqa: E402
from rmqtx.common import fastjson  # noqa: E402
from rmqtx.common.topic_config import TopicConfig  # noqa: E402

PREFIX = "QBench"


def proc_figures(pid: int) -> dict[str, int]:
    """RssAnon (kB), mapped regions and open descriptors of a process."""
    maps = sum(1 for _ in open(f"/proc/{pid}/maps"))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {"rss_anon_kb": vs_java.rss_anon_kb(pid), "maps": maps, "fds": fds}


def settle_files(pid: int, since: float, quiet: float = 3.0, limit: float = 300.0) -> tuple[float, dict[str, int]]:
    """Wait until the broker's descriptor count has not moved for ``quiet`` seconds (its consume-queue
    files are made in a thread, after the answers); (seconds since the sends when it last moved, figures)."""
    start = time.monotonic()
    last = proc_figures(pid)
    moved = start
    while time.monotonic() - moved < quiet and time.monotonic() - start < limit:
        time.sleep(0.5)
        now = proc_figures(pid)
        if now["fds"] != last["fds"]:
            moved = time.monotonic()
        last = now
    return since + moved - start, last


def broker_pid(server: vs_java.Server) -> int:
    return server.procs[-1].pid  # rmqtx: its one process; Java: the broker, started after the NameServer


def topic_names(n: int) -> list[str]:
    return [f"{PREFIX}_{i:05d}" for i in range(n)]


def create_request(topic: str, queues: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
        "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})


def send_request(topic: str, queue_id: int, body: bytes, n: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producerGroup="P_queues", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=queue_id,
        sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
        properties=f"UNIQ_KEY\x01{n:032X}\x02WAIT\x01true", reconsumeTimes=0, unitMode=False, batch=False)
    fields, order = send_header_to_v2(header)
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=body, fast_keys=order)


def create_list_request(topics: list[str], queues: int) -> RemotingCommand:
    """5.x's UPDATE_AND_CREATE_TOPIC_LIST (code 18): several topics in one request (4.9.8 has no such code)."""
    configs = [TopicConfig(topic, queues, queues).to_json() for topic in topics]
    return RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
                           body=fastjson.dumps({"topicConfigList": configs}))


async def create_topics(reactor, broker: str, topics: list[str], queues: int, batch: int = 1) -> float:
    """One UPDATE_AND_CREATE_TOPIC per topic, or with ``batch`` > 1 one code-18 list per ``batch`` topics."""
    client = RemotingClient(reactor)
    t0 = time.monotonic()
    try:
        for i in range(0, len(topics), batch):
            some = topics[i:i + batch]
            request = create_request(some[0], queues) if batch == 1 else create_list_request(some, queues)
            resp = await client.invoke(broker, request, timeout=60)
            if resp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"create {some[0]}..: {resp.code} {resp.remark}")
        return time.monotonic() - t0
    finally:
        await client.close()


async def delete_topics(reactor, broker: str, topics: list[str]) -> float:
    """DELETE_TOPIC_IN_BROKER for each topic over one connection (as ``mqadmin deleteTopic`` in a loop)."""
    client = RemotingClient(reactor)
    t0 = time.monotonic()
    try:
        for topic in topics:
            resp = await client.invoke(broker, RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER,
                                                                       {"topic": topic}), timeout=60)
            if resp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"delete {topic}: {resp.code} {resp.remark}")
        return time.monotonic() - t0
    finally:
        await client.close()


async def send_all(reactor, broker: str, topics: list[str], queues: int, size: int, conns: int,
                   depth: int) -> tuple[float, set[tuple[str, int]]]:
    """One message to each queue, ``depth`` in flight per connection; (seconds, queues whose send failed)."""
    body = b"q" * size
    work = [(t, q) for q in range(queues) for t in topics]  # queue 0 of every topic first, as producers spread
    clients = [RemotingClient(reactor) for _ in range(conns)]
    failed: set[tuple[str, int]] = set()
    t0 = time.monotonic()

    async def lane(c: int, k: int) -> None:
        client = clients[c]
        for n in range(c * depth + k, len(work), conns * depth):
            topic, qid = work[n]
            resp = await client.invoke(broker, send_request(topic, qid, body, n), timeout=600)
            if resp.code != ResponseCode.SUCCESS:  # Java's broker answers "broker busy" under load
                failed.add((topic, qid))
                if len(failed) <= 3:
                    print(f"send {topic}/{qid}: {resp.code} {resp.remark}", file=sys.stderr)

    try:
        await defer.gatherResults([defer.ensureDeferred(lane(c, k)) for c in range(conns) for k in range(depth)],
                                  consumeErrors=True)
        return time.monotonic() - t0, failed
    finally:
        for client in clients:
            await client.close()


async def max_offsets(reactor, broker: str, topics: list[str], queues: int,
                      failed: set[tuple[str, int]]) -> dict[str, int]:
    """How many queues hold as many messages as were acknowledged, and how many do not (GET_MAX_OFFSET)."""
    client = RemotingClient(reactor)
    counts: dict[str, int] = {}

    async def one(topic: str, qid: int) -> None:
        resp = await client.invoke(broker, RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": qid}), timeout=60)
        got = int(resp.ext_fields.get("offset", -1)) if resp.code == ResponseCode.SUCCESS else -1
        verdict = "right" if got == (0 if (topic, qid) in failed else 1) else f"max offset {got}"
        counts[verdict] = counts.get(verdict, 0) + 1

    work = [(t, q) for t in topics for q in range(queues)]
    try:
        for i in range(0, len(work), 256):
            await defer.gatherResults([defer.ensureDeferred(one(t, q)) for t, q in work[i:i + 256]],
                                      consumeErrors=True)
    finally:
        await client.close()
    return counts


#: A 4.9.8 broker loading mapped files (a restart) cleans buffers by reflection into java.nio, which
#: Java 9+ refuses without these (vs_java.py never restarts on a store, so it does not need them).
JAVA_OPENS = ["--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
              "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED"]


def start(against: str, tmp: Path, store_type: str = "default") -> vs_java.Server:
    if against == "java":
        if not set(JAVA_OPENS) <= set(vs_java.BROKER_OPTS):
            vs_java.BROKER_OPTS += JAVA_OPENS
        return vs_java.start_java(vs_java.java_classpaths(), "ASYNC_FLUSH", tmp)
    return vs_java.start_rmqtx("ASYNC_FLUSH", tmp, {"storeType": store_type})


def restart(against: str, old: vs_java.Server, base: Path, n: int, store_type: str = "default") -> vs_java.Server:
    """A start on the old server's store (moved into a new run directory: the starters lay out their own)."""
    tmp = base / f"run{n}"
    tmp.mkdir()
    shutil.move(str(old.tmp / "store"), str(tmp / "store"))
    return start(against, tmp, store_type)


def pull_request(topic: str, queue_id: int) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumerGroup="C_queues", topic=topic, queueId=queue_id, queueOffset=0, maxMsgNums=32, sysFlag=0x4,
        commitOffset=0, suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG")
    return header.apply_to(RemotingCommand(RequestCode.PULL_MESSAGE))


async def consume_all(reactor, broker: str, topics: list[str], queues: int, conns: int, depth: int,
                      failed: set[tuple[str, int]]) -> tuple[float, int]:
    """Pull every queue from offset 0; (seconds, queues whose pull did not bring back its one message)."""
    work = [(t, q) for q in range(queues) for t in topics if (t, q) not in failed]
    clients = [RemotingClient(reactor) for _ in range(conns)]
    wrong = 0
    t0 = time.monotonic()

    async def lane(c: int, k: int) -> None:
        nonlocal wrong
        for n in range(c * depth + k, len(work), conns * depth):
            topic, qid = work[n]
            resp = await clients[c].invoke(broker, pull_request(topic, qid), timeout=600)
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                wrong += 1
                if wrong <= 3:
                    print(f"pull {topic}/{qid}: {resp.code} {resp.remark}", file=sys.stderr)

    try:
        await defer.gatherResults([defer.ensureDeferred(lane(c, k)) for c in range(conns) for k in range(depth)],
                                  consumeErrors=True)
        return time.monotonic() - t0, wrong
    finally:
        for client in clients:
            await client.close()


def peak_rss_mb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return 0


def kill9(server: vs_java.Server) -> None:
    for proc in reversed(server.procs):
        procs.kill9(proc)


def check_read_back(reactor, server: vs_java.Server, topics: list[str], queues: int, failed: set[tuple[str, int]],
                    what: str, patience: float = 0.0) -> str:
    """Every acknowledged message readable (GET_MAX_OFFSET), asking again for up to ``patience`` seconds."""
    deadline = time.monotonic() + patience
    while True:
        counts = wait(reactor, max_offsets(reactor, server.broker, topics, queues, failed))
        if set(counts) == {"right"} or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if set(counts) != {"right"}:
        return f"{what}: queues by max offset {counts} (expected 1 where the send was acknowledged, else 0)"
    return ""


def wait(reactor, coro):
    """Run a coroutine on the reactor thread and wait for it here (the reactor runs in a thread)."""
    from twisted.internet import threads
    return threads.blockingCallFromThread(reactor, lambda: defer.ensureDeferred(coro))


class Rows(list):
    """The table's rows, each also logged as it comes (a long run shows its progress)."""

    def append(self, row: tuple[str, str]) -> None:
        vs_java.log(f"{row[0]}: {row[1]}")
        super().append(row)


def run(args: argparse.Namespace, reactor) -> list[tuple[str, str]]:
    topics = topic_names(args.topics)
    base = Path(tempfile.mkdtemp(prefix="rmqtx-queues-"))
    rows = Rows()
    problems: list[str] = []
    try:
        server = start(args.against, base / "run0", args.store_type)
        rows.append(("first start (s)", f"{server.start_seconds:.2f}"))
        pid = broker_pid(server)
        before = proc_figures(pid)
        cpu0 = vs_java.cpu_seconds(server.pids())
        created = wait(reactor, create_topics(reactor, server.broker, topics, args.queues, args.create_batch))
        how = "one request each" if args.create_batch == 1 else f"code 18, {args.create_batch} per request"
        rows.append((f"create {len(topics)} topics of {args.queues} queues (s)",
                     f"{created:.1f} ({len(topics) / created:.0f}/s, {how})"))
        mid = proc_figures(pid)
        cpu1 = vs_java.cpu_seconds(server.pids())
        seconds, failed_at = wait(reactor, send_all(reactor, server.broker, topics, args.queues, args.size,
                                                 args.conns, args.depth))
        cpu2 = vs_java.cpu_seconds(server.pids())
        total = len(topics) * args.queues
        rows.append((f"first message to each of {total} queues (s)",
                     f"{seconds:.1f} ({total / seconds:.0f}/s), {len(failed_at)} failed"))
        rows.append(("server CPU (s): topic creation; first sends", f"{cpu1 - cpu0:.1f}; {cpu2 - cpu1:.1f}"))
        t0 = time.monotonic()
        problems.append(check_read_back(reactor, server, topics, args.queues, failed_at, "after the sends", 300))
        rows.append(("every queue's message readable, after the sends (s)", f"{time.monotonic() - t0:.1f}"))
        time.sleep(args.settle)
        after = proc_figures(pid)
        for key, name in (("rss_anon_kb", "RssAnon (MB)"), ("maps", "mapped regions"), ("fds", "open descriptors")):
            scale = 1024 if key == "rss_anon_kb" else 1
            rows.append((f"{name}: start -> topics made -> messages sent",
                         f"{before[key] / scale:.0f} -> {mid[key] / scale:.0f} -> {after[key] / scale:.0f}"))
        rows.append(("RssAnon growth per queue (KB)", f"{(after['rss_anon_kb'] - before['rss_anon_kb']) / total:.1f}"))
        made, steady = settle_files(pid, time.monotonic() - t0)
        rows.append(("descriptors steady (every queue's file made), after the sends (s)", f"{made:.1f}"))
        rows.append(("then: RssAnon (MB), mapped regions, open descriptors; RssAnon growth per queue (KB)",
                     f"{steady['rss_anon_kb'] // 1024} / {steady['maps']} / {steady['fds']}; "
                     f"{(steady['rss_anon_kb'] - before['rss_anon_kb']) / total:.1f}"))
        t0 = time.monotonic()
        server.close()
        rows.append(("clean stop (s)", f"{time.monotonic() - t0:.2f}"))
        server = restart(args.against, server, base, 1, args.store_type)
        rows.append(("start after a clean stop (s)", f"{server.start_seconds:.2f}"))
        problems.append(check_read_back(reactor, server, topics, args.queues, failed_at, "after a clean stop"))
        rows.append(("after that start: RssAnon (MB), mapped regions, open descriptors",
                     "{rss_anon_kb} / {maps} / {fds}".format(**{**(f := proc_figures(broker_pid(server))),
                                                                 "rss_anon_kb": f["rss_anon_kb"] // 1024})))
        kill9(server)
        server = restart(args.against, server, base, 2, args.store_type)
        rows.append(("start after kill -9 (s)", f"{server.start_seconds:.2f}"))
        problems.append(check_read_back(reactor, server, topics, args.queues, failed_at, "after kill -9"))
        rows.append(("after that start: RssAnon (MB), mapped regions, open descriptors ",
                     "{rss_anon_kb} / {maps} / {fds}".format(**{**(f := proc_figures(broker_pid(server))),
                                                                 "rss_anon_kb": f["rss_anon_kb"] // 1024})))
        if args.consume:
            seconds, wrong = wait(reactor, consume_all(reactor, server.broker, topics, args.queues, args.conns,
                                                       args.depth, failed_at))
            rows.append(("pull every queue's message back (s)",
                         f"{seconds:.1f} ({(total - len(failed_at)) / seconds:.0f}/s), {wrong} wrong"))
            if wrong:
                problems.append(f"{wrong} pulls did not bring back their queue's message")
            rows.append(("broker's peak RSS over its last start (MB)", f"{peak_rss_mb(broker_pid(server))}"))
        if args.delete:
            cpu0 = vs_java.cpu_seconds(server.pids())
            seconds = wait(reactor, delete_topics(reactor, server.broker, topics))
            rows.append((f"delete {len(topics)} topics, one request each (s)",
                         f"{seconds:.1f} ({len(topics) / seconds:.0f}/s); server CPU "
                         f"{vs_java.cpu_seconds(server.pids()) - cpu0:.1f} s"))
        server.close()
    except Exception as e:  # noqa: BLE001 - the figures so far are still worth printing
        problems.append(f"{type(e).__name__}: {str(e)[-300:]}")
    finally:
        vs_java.stop_all()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}", file=sys.stderr)
    for p in problems:
        if p:
            rows.append(("PROBLEM", " ".join(p.split())))  # one table cell
    return rows


def _first_number(text: str) -> float | None:
    """The figure a ratio compares: the first number, or in "a -> b -> c" the last stage's."""
    text = text.split("->")[-1]
    head = text.split()[0] if text.split() else ""
    try:
        return float(head.rstrip(";,"))
    except ValueError:
        return None


def side_by_side(ours: list[tuple[str, str]], java: list[tuple[str, str]]) -> list[tuple[str, str, str, str]]:
    """Rows of both runs by name, with rmqtx's first figure over Java's."""
    theirs = dict(java)
    out = []
    for what, figure in ours + [(w, "") for w, _ in java if w not in dict(ours)]:
        other = theirs.get(what, "")
        a, b = _first_number(figure), _first_number(other)
        ratio = f"{a / b:.2f}" if a is not None and b else ""
        out.append((what, figure, other, ratio))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--queues", "--queues-per-topic", type=int, default=8)
    ap.add_argument("--size", type=int, default=256, help="message body bytes")
    ap.add_argument("--conns", type=int, default=8, help="sending connections")
    ap.add_argument("--depth", type=int, default=16, help="sends in flight per connection")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds between the last send and the /proc look")
    ap.add_argument("--against", choices=("rmqtx", "java", "both"), default="rmqtx")
    ap.add_argument("--store-type", choices=("default", "defaultRocksDB"), default="default",
                    help="rmqtx's storeType (Java 4.9.8 has the file store only)")
    ap.add_argument("--consume", action="store_true", help="after the last start, pull every queue's message back")
    ap.add_argument("--start-timeout", type=float, default=900.0, help="seconds a (re)start may take")
    ap.add_argument("--delete", action="store_true", help="last, delete every topic, one request each")
    ap.add_argument("--create-batch", type=int, default=1, metavar="N",
                    help="create topics N per UPDATE_AND_CREATE_TOPIC_LIST (5.x's code 18; rmqtx only)")
    ap.add_argument("--keep", action="store_true", help="leave the temp dir (stores, logs)")
    args = ap.parse_args()
    if args.create_batch < 1 or (args.create_batch > 1 and args.against != "rmqtx"):
        ap.error("--create-batch takes N >= 1, and N > 1 only --against rmqtx (Java 4.9.8 has no code 18)")
    signal.signal(signal.SIGTERM, vs_java._on_sigterm)
    vs_java.START_TIMEOUT = args.start_timeout
    if args.against != "java":
        vs_java.compile_rmqtx()
    from twisted.internet import reactor

    thread = threading.Thread(target=reactor.run, kwargs={"installSignalHandlers": False}, daemon=True)
    thread.start()
    loads = [os.getloadavg()[0]]
    try:
        if args.against == "both":
            ours = run(argparse.Namespace(**{**vars(args), "against": "rmqtx"}), reactor)
            loads.append(os.getloadavg()[0])
            java = run(argparse.Namespace(**{**vars(args), "against": "java"}), reactor)
        else:
            ours = java = run(args, reactor)
    finally:
        reactor.callFromThread(reactor.stop)
    loads.append(os.getloadavg()[0])
    print(f"\n{args.against} (storeType={args.store_type}): {args.topics} topics x {args.queues} queues, "
          f"{args.size}-byte bodies, "
          f"{args.conns} connections x {args.depth} in flight; load average "
          f"{' -> '.join(f'{x:.1f}' for x in loads)}\n")
    if args.against == "both":
        print("| what | rmqtx | Java 4.9.8 | rmqtx / Java |\n|---|---|---|---|")
        for row in side_by_side(ours, java):
            print("| " + " | ".join(row) + " |")
    else:
        print("| what | figure |\n|---|---|")
        for what, figure in ours:
            print(f"| {what} | {figure} |")
    if any(what == "PROBLEM" for what, _ in ours + java):
        sys.exit(1)


if __name__ == "__main__":
    main()
