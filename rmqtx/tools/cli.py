"""rmqadmin's subcommands: mqadmin's names, flags and output, on :class:`AdminOps`."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Awaitable, Callable, TextIO

from rmqtx.acl.signing import RequestSigner
from rmqtx.client.message import MessageExt, decode_messages
from rmqtx.common.topics import DLQ_PREFIX, RETRY_PREFIX
from rmqtx.remoting.client import RemotingClient
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import CreateTopicRequestHeader
from rmqtx.store.record import decode_offset_msg_id
from rmqtx.tools import tables
from rmqtx.tools.ops import AdminError, AdminOps, mq_table

Runner = Callable[[AdminOps, argparse.Namespace, TextIO], Awaitable[None]]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Runner]] = {}
LONG_MAX = 2**63 - 1
BODY_DIR = "/tmp/rocketmq/msgbodys"


def command(name: str, desc: str, options: Callable[[argparse.ArgumentParser], None]) -> Callable[[Runner], Runner]:
    def register(fn: Runner) -> Runner:
        COMMANDS[name] = (desc, options, fn)
        return fn

    return register


def _opt(parser: argparse.ArgumentParser, short: str, long: str, help: str, required: bool = False, flag: bool = False) -> None:
    if flag:
        parser.add_argument(f"-{short}", f"--{long}", dest=short, action="store_true", help=help)
    else:
        parser.add_argument(f"-{short}", f"--{long}", dest=short, required=required, help=help)


def _target(parser: argparse.ArgumentParser, what: str) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerAddr", dest="b", help=f"{what} to which broker")
    group.add_argument("-c", "--clusterName", dest="c", help=f"{what} to which cluster")


def _bool(text: str | None, default: bool) -> bool:
    return default if text is None else text.strip().lower() == "true"


# -- topics --------------------------------------------------------------------------------------
def _update_topic_opts(p: argparse.ArgumentParser) -> None:
    _target(p, "create topic")
    _opt(p, "t", "topic", "topic name", required=True)
    _opt(p, "r", "readQueueNums", "set read queue nums")
    _opt(p, "w", "writeQueueNums", "set write queue nums")
    _opt(p, "p", "perm", "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]")
    _opt(p, "o", "order", "set topic's order(true|false)")
    _opt(p, "a", "attributes", "attribute(+a=b,+c=d,-e), as 5.x mqadmin: +message.type=FIFO|DELAY|TRANSACTION|NORMAL")


@command("updateTopic", "Update or create topic", _update_topic_opts)
async def update_topic(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    tc = {
        "topicName": a.t.strip(),
        "readQueueNums": int(a.r) if a.r else 8,
        "writeQueueNums": int(a.w) if a.w else 8,
        "perm": int(a.p) if a.p else 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": _bool(a.o, False),
    }
    header = CreateTopicRequestHeader(
        tc["topicName"], "TBW102", tc["readQueueNums"], tc["writeQueueNums"], tc["perm"], "SINGLE_TAG", 0, tc["order"],
        a.a.strip() if a.a else None,
    )
    for addr in [a.b.strip()] if a.b else await ops.masters(a.c.strip()):
        await ops.create_topic(addr, header)
        out.write(f"create topic to {addr} success.\n")
    out.write(tables.topic_config_text(tc) + "\n")  # mqadmin ends without a newline; a shell prompt would follow it


def _delete_topic_opts(p: argparse.ArgumentParser) -> None:
    _opt(p, "t", "topic", "topic name", required=True)
    _opt(p, "c", "clusterName", "delete topic from which cluster", required=True)


@command("deleteTopic", "Delete topic from broker and NameServer.", _delete_topic_opts)
async def delete_topic(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    topic, cluster = a.t.strip(), a.c.strip()
    for addr in await ops.masters(cluster):
        await ops.delete_topic_in_broker(addr, topic)
    out.write(f"delete topic [{topic}] from cluster [{cluster}] success.\n")
    await ops.delete_topic_in_namesrv(topic, cluster)
    out.write(f"delete topic [{topic}] from NameServer success.\n")


@command("topicList", "Fetch all topic list from name server", lambda p: _opt(p, "c", "clusterModel", "clusterModel", flag=True))
async def topic_list(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    if not a.c:
        for topic in await ops.all_topics():
            out.write(f"{topic}\n")
        return
    info = await ops.cluster_info()
    out.write("%-20s  %-48s  %-48s\n" % ("#Cluster Name", "#Topic", "#Consumer Group"))
    for topic in await ops.all_topics():
        if topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX):
            continue
        cluster, groups = "", [""]
        try:
            brokers = await ops.broker_addrs_of(topic)
            name, addr = brokers[0]
            cluster = next((c for c, names in (info.get("clusterAddrTable") or {}).items() if name in names), "")
            groups = await ops.consumed_by_who(addr, topic) or [""]
        except (AdminError, IndexError):
            pass
        for group in groups:
            out.write("%-20s  %-64s  %-64s\n" % (tables.front(cluster, 20), tables.front(topic, 64), tables.front(group, 64)))


@command("topicRoute", "Examine topic route info", lambda p: _opt(p, "t", "topic", "topic name", required=True))
async def topic_route(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    out.write(tables.route_text(await ops.route(a.t.strip())) + "\n")


@command("topicStatus", "Examine topic Status info", lambda p: _opt(p, "t", "topic", "topic name", required=True))
async def topic_status(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    topic = a.t.strip()
    table: dict = {}
    for _, addr in await ops.broker_addrs_of(topic):
        table.update(await ops.topic_stats(addr, topic))
    if not table:
        raise AdminError("Not found the topic stats info")
    out.write("%-32s  %-4s  %-20s  %-20s    %s\n" % ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"))
    for mq in sorted(table):
        offsets = table[mq]
        last = offsets.get("lastUpdateTimestamp", 0)
        human = tables.human_ms(last) if last > 0 else ""
        out.write("%-32s  %-4d  %-20d  %-20d    %s\n" % (tables.front(mq[1], 32), mq[2], offsets["minOffset"], offsets["maxOffset"], human))


# -- cluster and brokers ----------------------------------------------------------------------------
@command("clusterList", "List all of clusters", lambda p: None)
async def cluster_list(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    info = await ops.cluster_info()
    fmt = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s\n"
    out.write(fmt % ("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE"))
    for cluster, names in (info.get("clusterAddrTable") or {}).items():
        for name in sorted(names):
            bd = (info.get("brokerAddrTable") or {}).get(name)
            if bd is None:
                continue
            for bid, addr in sorted(((int(k), v) for k, v in (bd.get("brokerAddrs") or {}).items())):
                try:
                    kv = await ops.runtime_info(addr)
                except AdminError:
                    kv = {}
                tps_in = float((kv.get("putTps") or "0").split(" ")[0] or 0)
                tps_out = float((kv.get("getTransferedTps") or "0").split(" ")[0] or 0)
                earliest = kv.get("earliestMessageTimeStamp") or ""
                hour = (time.time() * 1000 - int(earliest)) / 1000.0 / 60.0 / 60.0 if earliest else 0.0
                space = float(kv.get("commitLogDiskRatio") or 0.0)
                out.write(fmt % (
                    cluster, name, bid, addr, kv.get("brokerVersionDesc", ""),
                    "%9.2f(%s,%sms)" % (tps_in, kv.get("sendThreadPoolQueueSize", ""), kv.get("sendThreadPoolQueueHeadWaitTimeMills", "")),
                    "%9.2f(%s,%sms)" % (tps_out, kv.get("pullThreadPoolQueueSize", ""), kv.get("pullThreadPoolQueueHeadWaitTimeMills", "")),
                    kv.get("pageCacheLockTimeMills", ""), "%2.2f" % hour, "%.4f" % space,
                ))


def _broker_or_cluster(p: argparse.ArgumentParser) -> None:
    _opt(p, "b", "brokerAddr", "Broker address")
    _opt(p, "c", "clusterName", "which cluster")


@command("brokerStatus", "Fetch broker runtime status data", _broker_or_cluster)
async def broker_status(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    addrs = [a.b.strip()] if a.b else (await ops.masters(a.c.strip()) if a.c else [])
    for addr in addrs:
        for key, value in sorted((await ops.runtime_info(addr)).items()):
            out.write(("%-24s %-32s: %s\n" % (addr, key, value)) if not a.b else ("%-32s: %s\n" % (key, value)))


@command("getBrokerConfig", "Get broker config by cluster or special broker!", _broker_or_cluster)
async def get_broker_config(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    if a.b:
        targets = [(f"============{a.b.strip()}============\n", a.b.strip())]
    elif a.c:
        targets = [(f"============Master: {addr}============\n", addr) for addr in await ops.masters(a.c.strip())]
    else:
        targets = []
    for banner, addr in targets:
        out.write(banner)
        for key, value in await ops.broker_config(addr):
            out.write("%-50s=  %s\n" % (key, value))
        out.write("\n")


# -- consumers ------------------------------------------------------------------------------------
async def _group_broker(ops: AdminOps, group: str) -> list[str]:
    return [addr for _, addr in await ops.broker_addrs_of(RETRY_PREFIX + group)]


async def _consume_stats(ops: AdminOps, group: str) -> tuple[dict, float]:
    table: dict = {}
    tps = 0.0
    for addr in await _group_broker(ops, group):
        stats = await ops.consume_stats(addr, group)
        table.update(mq_table(stats.get("offsetTable")))
        tps += float(stats.get("consumeTps") or 0.0)
    if not table:
        raise AdminError(
            "Not found the consumer group consume stats, because return offset table is empty, maybe the consumer not consume any message",
            ResponseCode.CONSUMER_NOT_ONLINE,
        )
    return table, tps


async def _connection(ops: AdminOps, group: str, addr: str | None = None) -> dict:
    addrs = [addr] if addr else (await _group_broker(ops, group))[:1]
    cc = await ops.consumer_connection(addrs[0], group) if addrs else {}
    if not cc.get("connectionSet"):
        raise AdminError("Not found the consumer group connection", ResponseCode.CONSUMER_NOT_ONLINE)
    return cc


def _progress_opts(p: argparse.ArgumentParser) -> None:
    _opt(p, "g", "groupName", "consumer group name")


@command("consumerProgress", "Query consumers's progress, speed", _progress_opts)
async def consumer_progress(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    if a.g:
        table, tps = await _consume_stats(ops, a.g.strip())
        out.write("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s\n" % (
            "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"))
        total = 0
        for mq in sorted(table):
            w = table[mq]
            diff = w["brokerOffset"] - w["consumerOffset"]
            total += diff
            last = "N/A" if not w.get("lastTimestamp") else tables.date_seconds(w["lastTimestamp"])
            out.write("%-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s\n" % (
                tables.front(mq[0], 64), tables.front(mq[1], 32), mq[2], w["brokerOffset"], w["consumerOffset"], diff, last))
        out.write("\n")
        out.write("Consume TPS: %.2f\n" % tps)
        out.write("Diff Total: %d\n" % total)
        return
    out.write("%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s\n" % ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"))
    for topic in await ops.all_topics():
        if not topic.startswith(RETRY_PREFIX):
            continue
        group = topic[len(RETRY_PREFIX):]
        tps, diff, count, version, kind, model = 0, 0, 0, "OFFLINE", "", ""
        try:
            table, tps_f = await _consume_stats(ops, group)
            tps, diff = int(tps_f), sum(w["brokerOffset"] - w["consumerOffset"] for w in table.values())
        except AdminError:
            pass
        try:
            cc = await _connection(ops, group)
            count = len(cc["connectionSet"])
            version = tables.version_desc(min(c["version"] for c in cc["connectionSet"]))
            kind = "PULL" if cc.get("consumeType") == "CONSUME_ACTIVELY" else "PUSH"
            model = cc.get("messageModel", "") if kind == "PUSH" else ""
        except AdminError:
            pass
        out.write("%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d\n" % (tables.front(group, 64), count, version, kind, model, tps, diff))


def _connection_opts(p: argparse.ArgumentParser) -> None:
    _opt(p, "g", "consumerGroup", "consumer group name", required=True)
    _opt(p, "b", "brokerAddr", "broker address")


@command("consumerConnection", "Query consumer's socket connection, client version and subscription", _connection_opts)
async def consumer_connection(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    cc = await _connection(ops, a.g.strip(), a.b.strip() if a.b else None)
    out.write("%-36s %-22s %-10s %s\n" % ("#ClientId", "#ClientAddr", "#Language", "#Version"))
    for c in cc["connectionSet"]:
        out.write("%-36s %-22s %-10s %s\n" % (c["clientId"], c["clientAddr"], c["language"], tables.version_desc(c["version"])))
    out.write("\nBelow is subscription:\n")
    out.write("%-20s %s\n" % ("#Topic", "#SubExpression"))
    for sub in (cc.get("subscriptionTable") or {}).values():
        out.write("%-20s %s\n" % (sub["topic"], sub["subString"]))
    out.write("\n")
    out.write(f"ConsumeType: {cc.get('consumeType')}\n")
    out.write(f"MessageModel: {cc.get('messageModel')}\n")
    out.write(f"ConsumeFromWhere: {cc.get('consumeFromWhere')}\n")


def _update_group_opts(p: argparse.ArgumentParser) -> None:
    _target(p, "create subscription group")
    _opt(p, "g", "groupName", "consumer group name", required=True)
    _opt(p, "s", "consumeEnable", "consume enable")
    _opt(p, "m", "consumeFromMinEnable", "from min offset")
    _opt(p, "d", "consumeBroadcastEnable", "broadcast")
    _opt(p, "o", "consumeMessageOrderly", "consume message orderly")
    _opt(p, "q", "retryQueueNums", "retry queue nums")
    _opt(p, "r", "retryMaxTimes", "retry max times")
    _opt(p, "p", "groupRetryPolicy", "the json string of retry policy (5.x)")
    _opt(p, "i", "brokerId", "consumer from which broker id")
    _opt(p, "w", "whichBrokerWhenConsumeSlowly", "which broker id when consume slowly")
    _opt(p, "a", "notifyConsumerIdsChanged", "notify consumerId changed")


@command("updateSubGroup", "Update or create subscription group", _update_group_opts)
async def update_sub_group(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    config = {
        "brokerId": int(a.i) if a.i else 0,
        "consumeBroadcastEnable": _bool(a.d, False),
        "consumeEnable": _bool(a.s, True),
        "consumeFromMinEnable": _bool(a.m, False),
        "groupName": a.g.strip(),
        "notifyConsumerIdsChangedEnable": _bool(a.a, True),
        "retryMaxTimes": int(a.r) if a.r else 16,
        "retryQueueNums": int(a.q) if a.q else 1,
        "whichBrokerWhenConsumeSlowly": int(a.w) if a.w else 1,
    }
    # 5.x mqadmin's options: sent only when given, so a 4.9.8 broker's tools see 4.9.8's bean
    if a.o is not None:
        config["consumeMessageOrderly"] = _bool(a.o, False)
    if a.p is not None:
        config["groupRetryPolicy"] = json.loads(a.p)
    config = dict(sorted(config.items()))  # fastjson writes the bean's fields in this order
    for addr in [a.b.strip()] if a.b else await ops.masters(a.c.strip()):
        await ops.create_group(addr, config)
        out.write(f"create subscription group to {addr} success.\n")
    out.write(tables.group_config_text(config))


# -- messages -------------------------------------------------------------------------------------
async def _print_message(ops: AdminOps, msg: MessageExt, addr: str, out: TextIO) -> None:
    path = Path(BODY_DIR) / msg.msg_id
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msg.body)
    rows = [
        ("OffsetID:", msg.offset_msg_id),
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.properties.get('TAGS')}]"),
        ("Keys:", f"[{msg.properties.get('KEYS')}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commit_log_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", tables.human_ms(msg.born_timestamp)),
        ("Store Timestamp:", tables.human_ms(msg.store_timestamp)),
        ("Born Host:", msg.born_host),
        ("Store Host:", msg.store_host),
        ("System Flag:", msg.sys_flag),
        ("Properties:", tables.properties_text(msg.properties)),
        ("Message Body Path:", str(path)),
    ]
    for label, value in rows:
        out.write("%-20s %s\n" % (label, value))
    groups = await ops.consumed_by_who(addr, msg.topic)
    if not groups:
        out.write("\n\nWARN: No Consumer")
        return
    out.write("\n\n")
    for group in groups:
        consumed = msg.queue_offset < max(0, await _committed(ops, addr, group, msg))
        track = "CONSUMED" if consumed else "NOT_CONSUME_YET"
        out.write(f"MessageTrack [consumerGroup={group}, trackType={track}, exceptionDesc=null]")


async def _committed(ops: AdminOps, addr: str, group: str, msg: MessageExt) -> int:
    fields = {"consumerGroup": group, "topic": msg.topic, "queueId": msg.queue_id}
    response = await ops.call(addr, RequestCode.QUERY_CONSUMER_OFFSET, fields, ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
    return int(response.field("offset", "-1") or -1)


@command("queryMsgById", "Query Message by Id", lambda p: _opt(p, "i", "msgId", "Message Id", required=True))
async def query_msg_by_id(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    for msg_id in [m.strip() for m in a.i.split(",") if m.strip()]:
        try:
            host, port, offset = decode_offset_msg_id(msg_id)
        except Exception:
            raise AdminError(f"the msgId is not an offset message id: {msg_id}") from None
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        msg = MessageExt.from_stored(await ops.view_message(addr, offset))
        await _print_message(ops, msg, addr, out)


def _by_key_opts(p: argparse.ArgumentParser) -> None:
    _opt(p, "t", "topic", "topic name", required=True)
    _opt(p, "k", "msgKey", "Message Key", required=True)


@command("queryMsgByKey", "Query Message by Key", _by_key_opts)
async def query_msg_by_key(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    topic, key = a.t.strip(), a.k.strip()
    found: list[MessageExt] = []
    for name, addr in await ops.broker_addrs_of(topic):
        body = await ops.query_message(addr, topic, key, 64, 0, LONG_MAX)
        found += [m for m in decode_messages(body, name) if key in (m.properties.get("KEYS") or "").split(" ")]
    out.write("%-50s %4s %40s\n" % ("#Message ID", "#QID", "#Offset"))
    for msg in found:
        out.write("%-50s %4d %40d\n" % (msg.msg_id, msg.queue_id, msg.queue_offset))


def _reset_opts(p: argparse.ArgumentParser) -> None:
    _opt(p, "g", "group", "set the consumer group", required=True)
    _opt(p, "t", "topic", "set the topic", required=True)
    _opt(p, "s", "timestamp", "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]", required=True)
    _opt(p, "f", "force", "set the force rollback by timestamp switch[true|false]")


def _parse_timestamp(text: str) -> int:
    if text == "now":
        return -1
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        day, _, rest = text.partition("#")
        hms, _, millis = rest.rpartition(":")
        return int(time.mktime(time.strptime(f"{day} {hms}", "%Y-%m-%d %H:%M:%S")) * 1000) + int(millis or 0)
    except ValueError:
        raise AdminError(f"bad timestamp {text!r}: use now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS") from None


@command("resetOffsetByTime", "Reset consumer offset by timestamp(without client restart).", _reset_opts)
async def reset_offset_by_time(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    group, topic, text = a.g.strip(), a.t.strip(), a.s.strip()
    stamp = _parse_timestamp(text)
    force = _bool(a.f, True)
    table: dict = {}
    try:
        for _, addr in await ops.broker_addrs_of(topic):
            table.update(await ops.reset_offset(addr, topic, group, stamp, force))
    except AdminError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        await _reset_offline(ops, group, topic, stamp, force, text, out)
        return
    out.write(
        "rollback consumer offset by specified group[%s], topic[%s], force[%s], timestamp(string)[%s], timestamp(long)[%s]\n"
        % (group, topic, tables.java_bool(force), text, stamp)
    )
    out.write("%-40s  %-40s  %-40s\n" % ("#brokerName", "#queueId", "#offset"))
    for mq in sorted(table):
        out.write("%-40s  %-40d  %-40d\n" % (tables.front(mq[1], 32), mq[2], table[mq]))


async def _reset_offline(ops: AdminOps, group: str, topic: str, stamp: int, force: bool, text: str, out: TextIO) -> None:
    """No consumer online: commit the offsets in the broker directly (ResetOffsetByTimeOldCommand)."""
    rows = []
    for _, addr in await ops.broker_addrs_of(topic):
        stats = mq_table((await ops.consume_stats(addr, group)).get("offsetTable"))
        queues = {mq: w for mq, w in stats.items() if mq[0] == topic}
        if not queues:
            for mq, t in (await ops.topic_stats(addr, topic)).items():
                queues[mq] = {"brokerOffset": t["maxOffset"], "consumerOffset": t["minOffset"]}
        for mq in sorted(queues):
            w = queues[mq]
            if stamp == -1:
                target = await ops.queue_offset(addr, RequestCode.GET_MAX_OFFSET, topic, mq[2])
            else:
                target = await ops.queue_offset(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic, mq[2], stamp)
            rollback = w["consumerOffset"]
            if force or target <= w["consumerOffset"]:
                rollback = target
                await ops.update_consumer_offset(addr, group, topic, mq[2], target)
            rows.append((mq[1], mq[2], w["brokerOffset"], w["consumerOffset"], target, rollback))
    out.write(
        "rollback consumer offset by specified consumerGroup[%s], topic[%s], force[%s], timestamp(string)[%s], timestamp(long)[%s]\n"
        % (group, topic, tables.java_bool(force), text, stamp)
    )
    out.write("%-20s  %-20s  %-20s  %-20s  %-20s  %-20s\n" % (
        "#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#rollbackOffset"))
    for name, qid, broker_offset, consumer_offset, target, rollback in rows:
        out.write("%-20s  %-20d  %-20d  %-20d  %-20d  %-20d\n" % (tables.front(name, 32), qid, broker_offset, consumer_offset, target, rollback))


# -- ACL 2.0 users and ACLs (5.x mqadmin's createUser ... listAcl) --------------------------------------
_USER_ROW = "%-16s  %-22s  %-22s  %-22s\n"
_ACL_ROW = "%-16s  %-10s  %-22s  %-20s  %-24s  %-10s\n"


def _java(value: object) -> str:
    """How Java's printf shows a value: null, or a list as [a, b]."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_java(v) for v in value) + "]"
    return str(value)


def _items(text: str | None) -> list[str] | None:
    """StringUtils.split(text, ',') with each item trimmed; None when the option is absent."""
    return None if text is None else [t.strip() for t in text.split(",") if t]


def _compact(doc: dict) -> bytes:
    """A body as fastjson writes it: keys in order, absent values left out."""
    return json.dumps({k: v for k, v in sorted(doc.items()) if v is not None}, separators=(",", ":"),
                      ensure_ascii=False).encode()


async def _auth_targets(ops: AdminOps, a: argparse.Namespace) -> list[str]:
    return [a.b.strip()] if a.b else await ops.masters(a.c.strip())


def _user_opts(password_required: bool, status: bool) -> Callable[[argparse.ArgumentParser], None]:
    def options(p: argparse.ArgumentParser) -> None:
        _target(p, "the user")
        _opt(p, "u", "username", "the username", required=True)
        _opt(p, "p", "password", "the password", required=password_required)
        _opt(p, "t", "userType", "the user type (Super or Normal)")
        if status:
            _opt(p, "s", "userStatus", "the user status (enable or disable)")

    return options


@command("createUser", "Create user to cluster.", _user_opts(True, False))
async def create_user(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    body = _compact({"password": a.p.strip(), "userType": a.t.strip() if a.t else None, "username": a.u.strip()})
    for addr in await _auth_targets(ops, a):
        await ops.call(addr, RequestCode.AUTH_CREATE_USER, {"username": a.u.strip()}, body)
        out.write(f"create user to {addr} success.\n")


@command("updateUser", "Update user to cluster.", _user_opts(False, True))
async def update_user(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    body = _compact({"password": a.p.strip() if a.p else None, "userStatus": a.s.strip() if a.s else None,
                     "userType": a.t.strip() if a.t else None, "username": a.u.strip()})
    for addr in await _auth_targets(ops, a):
        await ops.call(addr, RequestCode.AUTH_UPDATE_USER, {"username": a.u.strip()}, body)
        out.write(f"update user to {addr} success.\n")


def _username_opts(p: argparse.ArgumentParser) -> None:
    _target(p, "the user")
    _opt(p, "u", "username", "the username", required=True)


@command("deleteUser", "Delete user from cluster.", _username_opts)
async def delete_user(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    for addr in await _auth_targets(ops, a):
        await ops.call(addr, RequestCode.AUTH_DELETE_USER, {"username": a.u.strip()})
        out.write(f"delete user to {addr} success.\n")


def _print_users(users: list[dict], out: TextIO) -> None:
    out.write(_USER_ROW % ("#UserName", "#Password", "#UserType", "#UserStatus"))
    for u in users:
        out.write(_USER_ROW % tuple(_java(u.get(k)) for k in ("username", "password", "userType", "userStatus")))


@command("getUser", "Get user from cluster.", _username_opts)
async def get_user(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    for addr in await _auth_targets(ops, a):
        resp = await ops.call(addr, RequestCode.AUTH_GET_USER, {"username": a.u.strip()})
        if resp.body:
            _print_users([ops.body(resp)], out)
            return


def _list_user_opts(p: argparse.ArgumentParser) -> None:
    _target(p, "list users")
    _opt(p, "f", "filter", "the filter of username")


@command("listUser", "List user from cluster.", _list_user_opts)
async def list_user(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    fields = {"filter": a.f.strip()} if a.f else {}
    for addr in await _auth_targets(ops, a):
        resp = await ops.call(addr, RequestCode.AUTH_LIST_USER, fields)
        if a.c:
            out.write(f"get user from {addr} success.\n")
        if resp.body:
            _print_users(ops.body(resp), out)


def _acl_opts(p: argparse.ArgumentParser) -> None:
    _target(p, "the acl")
    _opt(p, "s", "subject", "the subject, such as User:alice", required=True)
    _opt(p, "r", "resources", "the resources, such as Topic:t1,Group:g*", required=True)
    _opt(p, "a", "actions", "the actions, such as Pub,Sub", required=True)
    _opt(p, "d", "decision", "Allow or Deny", required=True)
    _opt(p, "i", "sourceIp", "the source IPs or CIDRs")


async def _put_acl(ops: AdminOps, a: argparse.Namespace, out: TextIO, code: int, verb: str) -> None:
    subject = a.s.strip()
    entries = [{"actions": _items(a.a), "decision": a.d.strip(), "resource": r, "sourceIps": _items(a.i)}
               for r in _items(a.r) or []]
    body = _compact({"policies": [{"entries": [{k: v for k, v in e.items() if v is not None} for e in entries]}],
                     "subject": subject})
    for addr in await _auth_targets(ops, a):
        await ops.call(addr, code, {"subject": subject}, body)
        out.write(f"{verb} acl to {addr} success.\n")


@command("createAcl", "Create acl to cluster.", _acl_opts)
async def create_acl(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    await _put_acl(ops, a, out, RequestCode.AUTH_CREATE_ACL, "create")


@command("updateAcl", "Update acl to cluster.", _acl_opts)
async def update_acl(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    await _put_acl(ops, a, out, RequestCode.AUTH_UPDATE_ACL, "update")


def _delete_acl_opts(p: argparse.ArgumentParser) -> None:
    _target(p, "the acl")
    _opt(p, "s", "subject", "the subject, such as User:alice", required=True)
    _opt(p, "r", "resources", "the resource to remove (all of the subject's when absent)")


@command("deleteAcl", "Delete acl from cluster.", _delete_acl_opts)
async def delete_acl(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    fields = {"subject": a.s.strip(), **({"resource": a.r.strip()} if a.r else {})}
    for addr in await _auth_targets(ops, a):
        await ops.call(addr, RequestCode.AUTH_DELETE_ACL, fields)
        out.write(f"delete acl to {addr} success.\n")


def _print_acls(acls: list[dict], out: TextIO) -> None:
    out.write(_ACL_ROW % ("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"))
    for acl in acls:
        policies = acl.get("policies") or []
        if not policies:
            out.write(_ACL_ROW % (_java(acl.get("subject")), "", "", "", "", ""))
        for policy in policies:
            for e in policy.get("entries") or []:
                out.write(_ACL_ROW % (_java(acl.get("subject")), _java(policy.get("policyType")), _java(e.get("resource")),
                                      _java(e.get("actions")), _java(e.get("sourceIps")), _java(e.get("decision"))))


def _get_acl_opts(p: argparse.ArgumentParser) -> None:
    _target(p, "the acl")
    _opt(p, "s", "subject", "the subject, such as User:alice", required=True)


@command("getAcl", "Get acl from cluster.", _get_acl_opts)
async def get_acl(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    for addr in await _auth_targets(ops, a):
        resp = await ops.call(addr, RequestCode.AUTH_GET_ACL, {"subject": a.s.strip()})
        if resp.body:
            _print_acls([ops.body(resp)], out)


def _list_acl_opts(p: argparse.ArgumentParser) -> None:
    _target(p, "list acls")
    _opt(p, "s", "subject", "the filter of subject")
    _opt(p, "r", "resource", "the filter of resource")


@command("listAcl", "List acl from cluster.", _list_acl_opts)
async def list_acl(ops: AdminOps, a: argparse.Namespace, out: TextIO) -> None:
    fields = {**({"subjectFilter": a.s.strip()} if a.s else {}), **({"resourceFilter": a.r.strip()} if a.r else {})}
    for addr in await _auth_targets(ops, a):
        resp = await ops.call(addr, RequestCode.AUTH_LIST_ACL, fields)
        if resp.body:
            _print_acls(ops.body(resp), out)


# -- entry ----------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rmqadmin", description="RocketMQ admin commands (mqadmin compatible)")
    subs = parser.add_subparsers(dest="command", metavar="command", required=True)
    for name, (desc, options, _) in COMMANDS.items():
        sub = subs.add_parser(name, help=desc, description=desc)
        sub.add_argument("-n", "--namesrvAddr", dest="n", help="Name server address list, eg: 192.168.0.1:9876;192.168.0.2:9876")
        sub.add_argument("--ak", dest="ak", help="ACL access key (requests are signed as Java's AclClientRPCHook signs them)")
        sub.add_argument("--sk", dest="sk", help="ACL secret key (never printed)")
        options(sub)
    return parser


def namesrv_list(arg: str | None) -> list[str]:
    text = arg or os.environ.get("NAMESRV_ADDR", "")
    return [a.strip() for a in text.split(";") if a.strip()]


async def run(argv: list[str], out: TextIO, err: TextIO, ops: AdminOps | None = None) -> int:
    """Parse ``argv``, run the subcommand, return the exit code (errors as one line on ``err``)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    own = ops is None
    try:
        if ops is None:
            if bool(args.ak) != bool(args.sk):
                raise AdminError("--ak and --sk go together")
            signer = RequestSigner(args.ak, args.sk) if args.ak else None
            ops = AdminOps(namesrv_list(args.n), RemotingClient(signer=signer))
        await COMMANDS[args.command][2](ops, args, out)
        return 0
    except (AdminError, ValueError, KeyError) as exc:
        err.write(f"rmqadmin {args.command} failed: {exc}\n")
        return 1
    finally:
        if own and ops is not None:
            await ops.close()
