"""The one reviewed list of what may differ between Java's answers and rmqtx's, each with its reason.

Everything not named here is compared exactly: code, flag, language, version, opaque, remark,
serialization, ext field names in wire order with their values, and body bytes. A value that must
differ is not ignored where it can be checked another way: broker ports must be Java's 20911 and
rmqtx's own port; commit log offsets and store times are compared through the record they name
(``Translation``), so an offset Java handed out for a message must be the one rmqtx handed out
for the same message, however the two got there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rmqtx.remoting import encode_frame
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.serializer import decode_frame
from tests.replay.capture import Exchange

#: The Java broker's port in every capture.
JAVA_BROKER_PORT = 20911


@dataclass(frozen=True)
class Rule:
    """How one value is compared, and why it may not be byte-equal."""

    codes: frozenset[int]  # request codes whose answers (or, for pushed requests, whose frames) carry it
    part: str  # "ext" (ext field), "record" (stored-format message in a body), "json" (a number in a JSON body)
    name: str
    how: str  # see Translation.compare
    reason: str


def _codes(*codes: int) -> frozenset[int]:
    return frozenset(codes)


_SENDS = _codes(RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
_RECORD_BODIES = _codes(RequestCode.PULL_MESSAGE, RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID,
                        RequestCode.CHECK_TRANSACTION_STATE)

RULES: tuple[Rule, ...] = (
    # -- ext fields ----------------------------------------------------------------------------
    Rule(_SENDS, "ext", "msgId", "offset-msg-id",
         "offset message id = store host, store port, commit log offset: the port must be rmqtx's own, the offset "
         "must name the same message as Java's"),
    Rule(_codes(RequestCode.CHECK_TRANSACTION_STATE), "ext", "offsetMsgId", "offset-msg-id", "as for send answers"),
    Rule(_codes(RequestCode.CHECK_TRANSACTION_STATE), "ext", "commitLogOffset", "commitlog-offset",
         "offset of the half message's re-put copy: compared through the message it names"),
    Rule(_codes(RequestCode.QUERY_MESSAGE), "ext", "indexLastUpdatePhyoffset", "commitlog-offset",
         "commit log offset of the last indexed message: compared through the message it names"),
    Rule(_codes(RequestCode.QUERY_MESSAGE), "ext", "indexLastUpdateTimestamp", "store-time",
         "store time of the last indexed message: rmqtx stores now, Java stored on 2026-11-21"),
    Rule(_codes(RequestCode.GET_EARLIEST_MSG_STORETIME), "ext", "timestamp", "store-time",
         "store time of the queue's first message: compared through that message"),
    Rule(_codes(RequestCode.GET_BROKER_CONFIG), "ext", "version", "data-version",
         "DataVersion of the broker configuration: its timestamp is the broker's start time"),
    # -- numbers inside JSON bodies ---------------------------------------------------------------
    Rule(_codes(RequestCode.GET_CONSUME_STATS), "json", "lastTimestamp", "store-time",
         "store time of the last consumed message of each queue: compared through that message"),
    # -- stored-format messages in bodies ------------------------------------------------------
    Rule(_RECORD_BODIES, "record", "physical_offset", "commitlog-offset", "compared through the message it names"),
    Rule(_RECORD_BODIES, "record", "store_timestamp", "store-time", "rmqtx stores now, Java stored on 2026-11-21"),
    Rule(_RECORD_BODIES, "record", "store_port", "broker-port", "the broker's listening port"),
    Rule(_RECORD_BODIES, "record", "born_port", "ignore", "the replaying client's own ephemeral TCP port"),
    Rule(_RECORD_BODIES, "record", "prop:ORIGIN_MESSAGE_ID", "offset-msg-id",
         "a retried message's original offset message id (store port + commit log offset)"),
    Rule(_RECORD_BODIES, "record", "prepared_transaction_offset", "commitlog-offset",
         "a committed message names its half message's commit log offset"),
)


def rules_for(code: int, part: str) -> dict[str, Rule]:
    return {r.name: r for r in RULES if r.part == part and code in r.codes}


#: Header fields not compared, by kind of frame.
PUSHED_OPAQUE_REASON = ("requests the broker sends itself (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) "
                        "carry the broker's own request counter as opaque")

#: GET_BROKER_RUNTIME_INFO (28) table: keys whose values are wall-clock, disk or rate figures.
RUNTIME_VOLATILE = {
    "bootTimestamp": "the broker's start time",
    "runtime": "time since start",
    "commitLogDirCapacity": "the disk the store happens to be on",
    "commitLogDiskRatio": "the disk the store happens to be on",
    "consumeQueueDiskRatio": "the disk the store happens to be on",
    "putTps": "rates over the last 10 s / 1 min: depend on the replay's pace",
    "getFoundTps": "rates: depend on the replay's pace",
    "getMissTps": "rates: depend on the replay's pace",
    "getTransferedTps": "rates: depend on the replay's pace",
    "getTotalTps": "rates: depend on the replay's pace",
    "putMessageDistributeTime": "put latency histogram: depends on the machine",
    "putMessageEntireTimeMax": "slowest put in ms: depends on the machine",
    "getMessageEntireTimeMax": "slowest get in ms: depends on the machine",
    "putLatency99": "put latency percentile: depends on the machine",
    "putLatency999": "put latency percentile: depends on the machine",
    "putMessageAverageSize": "average over every put since start: the Java broker also counted puts before the capture window",
    "msgPutTotalTodayNow": "counter: the Java broker also counted puts before the capture window",
    "msgGetTotalTodayNow": "counter: the Java broker also counted gets before the capture window",
    "putMessageTimesTotal": "counter: as above",
    "putMessageSizeTotal": "counter: as above",
    "commitLogMaxOffset": "the commit log's end: offsets shift after the transaction scenario's race (JAVA_RACES)",
    "dispatchBehindBytes": "how far the reput thread lags at that instant",
    "pageCacheLockTimeMills": "how long the commit log lock is held at that instant",
}
#: Runtime keys rmqtx adds that 4.9.8 has no source for, with why.
RUNTIME_ADDED = {
    key: "RocketMQ 5.x's timer wheel figures: rmqtx runs 5.x's timer (timerWheelEnable, on by default as in 5.x)"
    for key in ("timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps")
} | {"getTransferredTps": "RocketMQ 5.x's spelling of getTransferedTps, which 5.x's mqadmin exportMetrics reads"} | {
    key: "RocketMQ 5.x's runtime keys (5.x's mqadmin clusterList reads brokerActive and the ack pool's)"
    for key in ("brokerActive", "litePullThreadPoolQueueSize", "litePullThreadPoolQueueCapacity",
                "litePullThreadPoolQueueHeadWaitTimeMills", "ackThreadPoolQueueSize", "ackThreadPoolQueueCapacity",
                "ackThreadPoolQueueHeadWaitTimeMills")
}
#: Runtime keys named after a path: compared by prefix, with why.
RUNTIME_PER_PATH_PREFIXES = {
    "commitLogDiskRatio_": "one key per commit log directory, named by its path: both must have one, names differ",
}

#: Request rewrites: the captured request is sent as is except for these, each with its reason.
REQUEST_REWRITES = {
    (RequestCode.PULL_MESSAGE, "suspendTimeoutMillis"): (
        "a held pull that Java answered PULL_NOT_FOUND when its wait ran out (or never answered, still held at "
        "shutdown) waits 1 s instead of 15 s: the answer does not depend on how long it waited"),
    (RequestCode.END_TRANSACTION, "commitLogOffset"): "Java's commit log offset of the half message -> rmqtx's",
    (RequestCode.CONSUMER_SEND_MSG_BACK, "offset"): "Java's commit log offset of the consumed message -> rmqtx's",
    (RequestCode.VIEW_MESSAGE_BY_ID, "offset"): "Java's commit log offset (from the offset message id) -> rmqtx's",
    (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, "timestamp"): (
        "the client asked for a message's store time as Java stored it -> the same message's store time in rmqtx"),
}

#: Places where Java's own timing decided the answer; from there offsets may shift (see Translation).
JAVA_RACES = {
    ("scenario-transaction.jsonl", RequestCode.END_TRANSACTION, "8"): (
        "Java ran END_TRANSACTION (COMMIT) on its own thread pool: its op record landed after the next half message "
        "(offsets 0x115D, 0x13B5 in the capture). rmqtx handles a connection's requests in order, so from here on "
        "commit log offsets are compared through the messages they name, no longer as numbers"),
}

#: Answers decided by a race inside the Java broker that a replay cannot reproduce.
JAVA_RACE_ANSWERS = {
    ("scenario-retry.jsonl", 43): (
        "SUBSCRIPTION_NOT_LATEST: Java's pull thread saw the pull before its heartbeat thread registered the "
        "subscription the pull names (the README's 'race with the heartbeat'); rmqtx handles the heartbeat first"),
}

#: Request codes seen in the captures that the broker replay does not compare, and why.
NOT_REPLAYED = {
    RequestCode.REGISTER_BROKER: "broker -> NameServer; replayed byte for byte by tests/namesrv/test_replay.py",
    RequestCode.UNREGISTER_BROKER: "broker -> NameServer; replayed by tests/namesrv/test_replay.py",
    RequestCode.QUERY_DATA_VERSION: "broker -> NameServer; replayed by tests/namesrv/test_replay.py",
    RequestCode.GET_ROUTEINFO_BY_TOPIC: "client -> NameServer; replayed by tests/namesrv/test_replay.py",
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: "mqadmin -> NameServer; tests/namesrv/test_replay.py",
    RequestCode.GET_BROKER_CLUSTER_INFO: "mqadmin -> NameServer; tests/namesrv/test_replay.py",
    RequestCode.DELETE_TOPIC_IN_NAMESRV: "mqadmin -> NameServer; tests/namesrv/test_replay.py",
    9999: "scenario-bad-input: unknown code; every case replayed to a running twistd by tests/e2e/test_standalone.py",
    0: "scenario-bad-input case i (header {}); tests/e2e/test_standalone.py",
}

#: Bad-input requests that are known codes: compared by tests/e2e/test_standalone.py, with this difference.
BAD_INPUT_NOTES = {
    RequestCode.GET_MAX_OFFSET: ("case a4 (no ext fields): Java answers SYSTEM_ERROR with its NullPointerException "
                                 "text as remark; rmqtx answers SYSTEM_ERROR with its own text"),
    RequestCode.GET_ROUTEINFO_BY_TOPIC: "case a4 against the NameServer: byte for byte in tests/namesrv/test_replay.py",
}

#: Whole answers whose bodies are compared by key set and selected values rather than bytes.
BODY_BY_KEYS = {
    RequestCode.GET_BROKER_RUNTIME_INFO: "a table of live statistics: keys, order-free, and the values not in RUNTIME_VOLATILE",
    RequestCode.GET_BROKER_CONFIG: ("Java dumps every field of its four config classes (~190, Hashtable order); "
                                    "rmqtx dumps the settings it has: the keys both have must hold the same values, "
                                    "except paths, ports and addresses"),
}
#: GET_BROKER_CONFIG keys whose values differ by set-up, with why.
CONFIG_VOLATILE = {
    "storePathRootDir": "the store is in a temp dir",
    "storePathCommitLog": "the store is in a temp dir",
    "namesrvAddr": "the test's NameServer port",
    "listenPort": "a free port",
    "haListenPort": "Java's is listenPort + 1; the test broker listens on port 0, so its HA port is another free one",
    "rocketmqHome": "the capture's ROCKETMQ_HOME; the tests set none",
    "maxIndexNum": "smaller index files in tests",
    "maxHashSlotNum": "smaller index files in tests",
}

#: Short wait for held pulls that ran out in Java.
SHORT_SUSPEND_MS = "1000"


class Translation:
    """Commit log offsets and store times of the same messages in Java's broker and in rmqtx's."""

    def __init__(self, broker_port: int) -> None:
        self.broker_port = broker_port
        self.offsets: dict[int, int] = {}
        self.times: dict[int, int] = {}
        self.shift_allowed = False

    # -- learning and checking -----------------------------------------------------------------
    def offset(self, java: int, ours: int) -> str | None:
        """Record or check that Java's offset ``java`` and rmqtx's ``ours`` name the same message."""
        if not self.shift_allowed and java != ours:
            return f"commit log offset {ours} != Java's {java} (no Java race before this point)"
        known = self.offsets.setdefault(java, ours)
        return None if known == ours else f"commit log offset {ours} != {known}, which names Java's {java}"

    def time(self, java: int, ours: int) -> str | None:
        known = self.times.setdefault(java, ours)
        return None if known == ours else f"store time {ours} != {known}, the store time of the message Java stored at {java}"

    def port(self, java: int, ours: int) -> str | None:
        if java != JAVA_BROKER_PORT or ours != self.broker_port:
            return f"broker port {ours} (Java {java}): expected {self.broker_port} (Java {JAVA_BROKER_PORT})"
        return None

    def msg_id(self, java: str, ours: str) -> str | None:
        """Offset message ids, comma-joined for batches: same host, own port, offsets of the same messages."""
        js, os_ = java.split(","), ours.split(",")
        if len(js) != len(os_):
            return f"msgId {ours!r} vs Java's {java!r}"
        for j, o in zip(js, os_):
            if len(j) != 32 or len(o) != 32 or j[:8] != o[:8]:
                return f"msgId {o!r} vs Java's {j!r}"
            why = self.port(int(j[8:16], 16), int(o[8:16], 16)) or self.offset(int(j[16:], 16), int(o[16:], 16))
            if why:
                return why
        return None

    def compare(self, how: str, java: object, ours: object) -> str | None:
        """None when equal under ``how``; else what differs."""
        if how == "ignore":
            return None
        if how == "broker-port":
            return self.port(int(java), int(ours))  # type: ignore[arg-type]
        if how == "commitlog-offset":
            return self.offset(int(java), int(ours))  # type: ignore[arg-type]
        if how == "store-time":
            return self.time(int(java), int(ours))  # type: ignore[arg-type]
        if how == "offset-msg-id":
            return self.msg_id(str(java), str(ours))
        if how == "data-version":
            j, o = json.loads(str(java)), json.loads(str(ours))
            return None if list(j) == list(o) and j["counter"] == o["counter"] else f"{ours} vs Java's {java}"
        raise ValueError(how)

    # -- requests --------------------------------------------------------------------------------
    def to_ours_offset(self, java: str) -> str:
        return str(self.offsets.get(int(java), int(java)))

    def to_ours_time(self, java: str) -> str:
        return str(self.times.get(int(java), int(java)))


def rewrite_request(ex: Exchange, tr: Translation) -> bytes:
    """The captured request as sent, except for the REQUEST_REWRITES."""
    cmd = ex.cmd
    ext = cmd.ext_fields or {}
    fields: dict[str, str] = {}
    if cmd.code == RequestCode.PULL_MESSAGE and "suspendTimeoutMillis" in ext:
        answer = ex.answer_cmd
        if answer is None or answer.code == ResponseCode.PULL_NOT_FOUND:
            fields["suspendTimeoutMillis"] = SHORT_SUSPEND_MS
    elif cmd.code in (RequestCode.END_TRANSACTION, RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.VIEW_MESSAGE_BY_ID):
        name = "commitLogOffset" if cmd.code == RequestCode.END_TRANSACTION else "offset"
        if name in ext:
            fields[name] = tr.to_ours_offset(ext[name])
    elif cmd.code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP and "timestamp" in ext:
        fields["timestamp"] = tr.to_ours_time(ext["timestamp"])
    if not fields or all(ext.get(k) == v for k, v in fields.items()):
        return ex.frame
    changed = decode_frame(ex.frame)
    for key, value in fields.items():
        assert (cmd.code, key) in REQUEST_REWRITES
        changed.ext_fields[key] = value  # type: ignore[index]
    return encode_frame(changed)
