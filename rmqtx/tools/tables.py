"""Text in mqadmin's shapes: Java's printf columns, toString forms, timestamps and version names."""

from __future__ import annotations

import re
import time
from typing import Any

from rmqtx.broker.jsonfiles import pretty
from rmqtx.common.fastjson import java_order

#: MQVersion ordinal of V4_0_0_SNAPSHOT; from there on every x.y.z has a SNAPSHOT then a release.
_V4_BASE = 212


def version_desc(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: 409 -> V4_9_8, 413 -> V5_0_0."""
    if ordinal < _V4_BASE:
        return f"V3_x({ordinal})"
    step, snapshot = divmod(ordinal - _V4_BASE, 2)
    major, rest = divmod(step, 100)
    return f"V{major + 4}_{rest // 10}_{rest % 10}{'_SNAPSHOT' if snapshot == 0 else ''}"


def java_bool(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def front(text: str, size: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``size`` characters."""
    return text[:size]


def human_ms(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS`` local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


def date_seconds(ms: int) -> str:
    """``yyyy-MM-dd HH:mm:ss`` local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def perm_text(perm: int) -> str:
    """``PermName.perm2String``: R, W, X (inherit) or '-'."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def topic_config_text(tc: dict) -> str:
    return (
        f"TopicConfig [topicName={tc['topicName']}, readQueueNums={tc['readQueueNums']}, "
        f"writeQueueNums={tc['writeQueueNums']}, perm={perm_text(tc['perm'])}, topicFilterType={tc['topicFilterType']}, "
        f"topicSysFlag={tc['topicSysFlag']}, order={java_bool(tc['order'])}]"
    )


def group_config_text(g: dict) -> str:
    names = ("groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable", "retryQueueNums",
             "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable")
    return "SubscriptionGroupConfig [" + ", ".join(f"{n}={java_bool(g[n])}" for n in names) + "]"


def route_text(route: dict) -> str:
    """``TopicRouteData.toJson(true)``'s layout (fastjson's pretty form, beans sorted), but valid JSON.

    fastjson writes the broker ids of brokerAddrs bare (``{0:"..."}``), which no JSON parser reads;
    here they are quoted, the one difference from mqadmin's output.
    """

    def bean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: bean(value[k]) for k in sorted(value, key=str)}
        if isinstance(value, list):
            return [bean(v) for v in value]
        return value

    shaped = bean(route)
    for bd in shaped.get("brokerDatas") or []:
        bd["brokerAddrs"] = {int(k): v for k, v in sorted((bd.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0]))}
    return _BARE_ID.sub(r'\1"\2":', pretty(shaped))


#: A bare integer map key as fastjson's pretty form writes it, right after '{' or ','.
_BARE_ID = re.compile(r'([{,])(-?\d+):(?=")')


def properties_text(props: dict[str, str]) -> str:
    """A Java ``HashMap<String,String>.toString()``."""
    return "{" + ", ".join(f"{k}={props[k]}" for k in java_order(list(props))) + "}"
