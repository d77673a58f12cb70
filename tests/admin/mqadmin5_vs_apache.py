"""Apache's mqadmin 5.5.0 against Apache 5.4.0 and against rmqtx, side by side: a probe, not a CI test
(two more JVMs and about 100 s on a shared machine). Prints one line per subcommand with each server's
answer (``ok`` or mqadmin's ``CODE: n  DESC: ...``) and whether they agree; exits 1 when one differs
other than in ``EXPECTED``.

    PYTHONPATH=. python -m tests.admin.mqadmin5_vs_apache

docs/mqadmin5.md records its last result.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.admin.mqadmin_java import FAILURE_TEXT, MQAdmin, Run
from testkit.apache5 import ApacheProxy
from testkit.standalone import Standalone

CLUSTER = "DefaultCluster"
BROKER = "broker-a"
#: subcommand -> why rmqtx answers otherwise than Apache 5.4.0 (docs/mqadmin5.md).
EXPECTED = {
    "updateStaticTopic": "rmqtx has no static topics: a broker without them answers code 3 (Apache 5.4.0 creates it)",
}
ANSWER = re.compile(r"CODE: \d+\s+DESC: [^\n]*")


def commands(broker: str, namesrv: str, home: Path) -> list[tuple[str, ...]]:
    return [
        ("updateTopic", "-c", CLUSTER, "-t", "T5_fifo", "-a", "+message.type=FIFO"),
        ("updateTopicList", "-b", broker, "-f", f"{home}/topics.json"),
        ("updateSubGroupList", "-b", broker, "-f", f"{home}/groups.json"),
        ("updateColdDataFlowCtrGroupConfig", "-b", broker, "-g", "G5_cold", "-v", "1000"),
        ("getColdDataFlowCtrInfo", "-b", broker), ("removeColdDataFlowCtrGroupConfig", "-b", broker, "-g", "G5_cold"),
        ("haStatus", "-b", broker), ("setCommitLogReadAheadMode", "-b", broker, "-m", "1"),
        ("setCommitLogReadAheadMode", "-b", broker, "-m", "0"), ("resetMasterFlushOffset", "-b", broker, "-o", "0"),
        ("exportPopRecord", "-b", broker), ("rocksDBConfigToJson", "-c", CLUSTER, "-t", "topics"),
        ("checkRocksdbCqWriteProgress", "-c", CLUSTER, "-t", "T5_fifo"), ("switchTimerEngine", "-b", broker, "-e", "R"),
        ("getBrokerLiteInfo", "-b", broker), ("getBrokerEpoch", "-b", BROKER),
        ("getControllerMetaData", "-a", namesrv), ("getSyncStateSet", "-a", namesrv, "-b", BROKER),
        ("getControllerConfig", "-a", namesrv), ("updateControllerConfig", "-a", namesrv, "-k", "a", "-v", "b"),
        ("electMaster", "-a", namesrv, "-bn", BROKER, "-c", CLUSTER, "-b", "0"),
        ("cleanBrokerMetadata", "-a", namesrv, "-bn", BROKER, "-c", CLUSTER, "-b", "0"),
        ("setConsumeMode", "-b", broker, "-g", "G5_list1", "-t", "T5_fifo", "-m", "POP", "-q", "2"),
        ("getConsumerConfig", "-g", "G5_list2"), ("topicRoute", "-t", "T5_list1"), ("topicStatus", "-t", "T5_list1"),
        ("exportConfigs", "-c", CLUSTER, "-f", f"{home}/cfg"), ("exportMetadata", "-c", CLUSTER, "-f", f"{home}/meta"),
        ("exportMetrics", "-c", CLUSTER, "-f", f"{home}/metrics"), ("clusterList",), ("brokerStatus", "-b", broker),
        ("updateStaticTopic", "-c", CLUSTER, "-t", "T5_static", "-qn", "4"),
    ]


def answer(run: Run) -> str:
    found = ANSWER.search(run.text)
    if found:
        return found.group(0).split(" BROKER:")[0].strip()
    return "ok" if run.code == 0 and not FAILURE_TEXT.search(run.text) else f"failed: {run.text.strip().splitlines()[-1][:80]}"


def probe(broker: str, namesrv: str) -> dict[str, str]:
    mqadmin = MQAdmin(namesrv, version="5.5.0")
    try:
        home = mqadmin.home
        (home / "topics.json").write_text(json.dumps([
            {"topicName": "T5_list1", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "attributes": {"+message.type": "FIFO"}},
            {"topicName": "T5_list2", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}]))
        (home / "groups.json").write_text(json.dumps([{"groupName": "G5_list1"}, {"groupName": "G5_list2", "retryMaxTimes": 3}]))
        runs = mqadmin.run_batch(commands(broker, namesrv, home), jvms=1)  # in order: later ones read what earlier made
        return {r.argv[0] + (f" -m {r.argv[-1]}" if r.argv[0] == "setCommitLogReadAheadMode" else ""): answer(r) for r in runs}
    finally:
        mqadmin.close()


def main() -> int:
    apache = ApacheProxy().start()
    try:
        java = probe(apache.broker, apache.namesrv)
    finally:
        apache.close()
    server = Standalone({"brokerClusterName": CLUSTER, "brokerName": BROKER}).start()
    try:
        ours = probe(server.broker, server.namesrv)
    finally:
        server.close()
    differ = 0
    for name in java:
        same = java[name] == ours[name]
        note = "" if same else (f"  (expected: {EXPECTED[name.split()[0]]})" if name.split()[0] in EXPECTED else "  DIFFERS")
        differ += not same and name.split()[0] not in EXPECTED
        print(f"{name:<36} apache: {java[name]:<60} rmqtx: {ours[name]}{note}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
