"""rmqadmin run with each captured mqadmin command line; its stdout compared with mqadmin 4.9.8's.

The one list of what may differ (CLI_RULES) follows the broker replay's: addresses are the test's,
and figures that are rates, clocks or disk sizes are checked for their shape, not their value.
"""

from __future__ import annotations

import difflib
import io
import json
import re
from dataclasses import dataclass

from rmqtx.tools.cli import run
from tests.fixtures import records
from tests.replay.normalize import CONFIG_VOLATILE, RUNTIME_ADDED, RUNTIME_VOLATILE

JAVA_NAMESRV = "127.0.0.1:19870"
JAVA_BROKER = "127.0.0.1:20911"


@dataclass(frozen=True)
class CliRule:
    command: str
    pattern: str  # a regex over one stdout line; its groups are the volatile parts
    reason: str


#: Lines whose marked parts may differ, per command (each group is replaced by '#' on both sides).
CLI_RULES: tuple[CliRule, ...] = (
    CliRule("clusterList", r"^DefaultCluster +broker-a +0 +\S+ +V4_9_8 +(\d+\.\d\d\(\d+,\d+ms\)) +(\d+\.\d\d\(\d+,\d+ms\)) +(\d+) +(\S+) +(\S+)$",
            "#InTPS/#OutTPS (rates), #PCWait (page cache lock), #Hour (hours since the earliest message), #SPACE (disk use)"),
    CliRule("consumerProgress", r"^\S+ +broker-a +\d+ +\d+ +\d+ +\d+ +(N/A|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)$",
            "#LastTime: the local store time of the last consumed message (rmqtx stored it today)"),
)
#: brokerStatus prints the runtime table (key padded to 32, ': ', value): the same keys vary as in the replay.
BROKER_STATUS_PER_PATH = "commitLogDiskRatio_"

#: Commands whose output is compared in part only, with why.
CLI_PARTIAL = {
    "getBrokerConfig": ("mqadmin prints every field of Java's four config classes (~190); rmqtx has fewer settings. "
                        "Every line rmqtx prints must be a line mqadmin printed (paths and ports aside), and the "
                        "header line is exact"),
}
#: Where rmqadmin's output deliberately differs from mqadmin's, with why; compare_output undoes exactly this.
CLI_DELIBERATE = {
    "updateTopic": "rmqadmin ends the TopicConfig line with a newline; mqadmin's has none, so a shell prompt lands on it",
    "topicRoute": "rmqadmin quotes brokerAddrs' broker ids ({\"0\":...}); mqadmin's fastjson writes them bare ({0:...}), "
                  "which no JSON parser reads",
}


def deliberate(command: str, out: str) -> tuple[str, list[str]]:
    """rmqadmin's stdout turned back into what mqadmin would print, and what is wrong with the difference."""
    problems = []
    if command == "updateTopic":
        if not out.endswith("]\n"):
            problems.append("updateTopic output does not end with a newline")
        out = out[:-1] if out.endswith("\n") else out
    elif command == "topicRoute":
        try:
            json.loads(out)
        except ValueError as e:
            problems.append(f"topicRoute output is not JSON: {e}")
        out = re.sub(r'(\{|,)"(\d+)":', r"\1\2:", out)
    return out, problems


#: getBrokerConfig lines rmqtx prints and mqadmin could not: settings Java does not have.
RMQTX_ONLY_CONFIG = {
    "listenAddress": "rmqtx binds one address (Java binds all); tests bind 127.0.0.1",
    "channelExpiredTimeout": "Java's fixed 120 s client channel expiry, a setting in rmqtx",
    "aclFilePath": "where plain_acl.yml is read from; Java reads it from its home dir with no setting",
}


def mqadmin_commands() -> list[dict]:
    """Every captured mqadmin run: argv, exit code, stdout, stderr."""
    return [rec for rec in records("scenario-admin.client.jsonl") if rec.get("kind") == "CMD"]


def step_of(cmd: dict) -> str:
    """The command line as the wire capture's ``step`` names it (without -n)."""
    argv = cmd["argv"][1:]
    if "-n" in argv:
        i = argv.index("-n")
        argv = argv[:i] + argv[i + 2:]
    return " ".join(argv)


async def rmqadmin(cmd: dict, namesrv: str, broker: str) -> tuple[int, str, str]:
    argv = [broker if a == JAVA_BROKER else namesrv if a == JAVA_NAMESRV else a for a in cmd["argv"][1:]]
    out, err = io.StringIO(), io.StringIO()
    code = await run(argv, out, err)
    return code, out.getvalue(), err.getvalue()


def normalize(command: str, text: str, broker: str) -> list[str]:
    """stdout lines with the test's broker address put back to Java's and the volatile parts of CLI_RULES as '#'."""
    lines = text.replace(broker, JAVA_BROKER).split("\n")
    out = []
    for line in lines:
        for rule in CLI_RULES:
            if rule.command == command and (m := re.match(rule.pattern, line)):
                for i in range(len(m.groups()), 0, -1):
                    line = line[: m.start(i)] + "#" + line[m.end(i):]
        if command == "brokerStatus" and ":" in line:
            key, value = line.split(":", 1)
            name = key.strip()
            if name in RUNTIME_ADDED:
                continue  # a 5.x key (normalize.RUNTIME_ADDED says why)
            if name in RUNTIME_VOLATILE:
                line = f"{key}: #"
            elif name.startswith(BROKER_STATUS_PER_PATH):
                line = f"{BROKER_STATUS_PER_PATH}<path>: #"
        out.append(line)
    return out


def compare_output(cmd: dict, code: int, out: str, broker: str) -> list[str]:
    command = cmd["argv"][1]
    diffs = []
    if code != cmd["rc"]:
        diffs.append(f"exit code {code} != mqadmin's {cmd['rc']}")
    out, problems = deliberate(command, out)
    diffs += problems
    ours, java = normalize(command, out, broker), normalize(command, cmd["stdout"], JAVA_BROKER)
    if command == "getBrokerConfig":
        if ours[:1] != java[:1]:
            diffs.append(f"header {ours[:1]} != mqadmin's {java[:1]}")
        skip = tuple(CONFIG_VOLATILE) + tuple(RMQTX_ONLY_CONFIG)
        extra = [line for line in ours[1:] if line not in java and not line.startswith(skip)]
        diffs += [f"line mqadmin did not print: {line!r}" for line in extra]
        return diffs
    if ours != java:
        diffs.append("stdout differs:\n" + "\n".join(difflib.unified_diff(java, ours, "mqadmin", "rmqadmin", lineterm="")))
    return diffs
