"""mqadmin 4.9.8's captured requests replayed to rmqtx: same codes, ext field keys and body shapes as Java's answers."""

from __future__ import annotations

from twisted.internet import defer

from rmqtx.broker.topics import TopicConfig
from rmqtx.common import fastjson
from rmqtx.remoting import RemotingClient
from rmqtx.remoting.serializer import decode_frame
from tests.admin.support import AdminTestCase
from tests.client.support import sleep
from tests.fixtures import records

#: Maps whose keys are data (topics, queues, addresses), not bean properties.
DATA_MAPS = {"offsetTable", "topicConfigTable", "brokerAddrTable", "clusterAddrTable", "brokerAddrs", "filterServerTable"}
#: Runtime keys that name Java's own paths or its schedule levels in use.
JAVA_ONLY_RUNTIME = ("commitLogDiskRatio_", "scheduleMessageOffset_")
#: GET_BROKER_CONFIG keys both brokers must report.
CORE_CONFIG_KEYS = {"brokerClusterName", "brokerName", "brokerId", "brokerIP1", "listenPort", "namesrvAddr",
                    "storePathRootDir", "brokerRole", "flushDiskType", "brokerPermission", "autoCreateTopicEnable",
                    "defaultTopicQueueNums", "messageDelayLevel", "maxMessageSize", "deleteWhen", "fileReservedTime"}


def exchanges():
    """(peer, request, Java's answer or None) for every request mqadmin and its tool client sent."""
    pairs, pending = [], {}
    for rec in records("scenario-admin.jsonl"):
        if "hex" not in rec:
            continue
        cmd = decode_frame(bytes.fromhex(rec["hex"]))
        key = (rec["src"], rec["conn"], cmd.opaque)
        if rec["dir"] == "c2s" and not cmd.is_response and cmd.code not in (103, 104):
            pending[key] = len(pairs)
            pairs.append([rec["peer"], cmd, None])
        elif rec["dir"] == "s2c" and cmd.is_response and key in pending:
            pairs[pending.pop(key)][2] = cmd
    return pairs


class AdminReplayTest(AdminTestCase):
    def assertShape(self, java, ours, where: str, parent: str = "") -> None:
        if isinstance(java, dict):
            self.assertIsInstance(ours, dict, where)
            if parent == "table":
                wanted = {k for k in java if not k.startswith(JAVA_ONLY_RUNTIME)}
                self.assertEqual(wanted - set(ours), set(), where)
                return
            if parent in DATA_MAPS or any(not isinstance(k, str) for k in java):
                common = [k for k in java if k in ours] or ([next(iter(java))] if java and ours else [])
                for key in common:
                    self.assertShape(java[key], ours.get(key, next(iter(ours.values()))), f"{where}.{key}", "")
                return
            self.assertEqual(sorted(java), sorted(ours), where)
            for key in java:
                self.assertShape(java[key], ours[key], f"{where}.{key}", key)
        elif isinstance(java, list) and java and ours:
            self.assertShape(java[0], ours[0], f"{where}[0]", parent)

    async def _prepare(self) -> None:
        """What the capture's broker held: T_fix (2 queues) consumed by C_fix, its retry topic."""
        ctx = self.cluster.broker.ctx
        ctx.topics.put(TopicConfig("T_fix", 2, 2))
        ctx.topics.create_system_topic("%RETRY%C_fix", 1, 6)
        for qid, offset in ((0, 4), (1, 4)):
            ctx.offsets.commit("C_fix", "T_fix", qid, offset)
        ctx.offsets.commit("C_fix", "%RETRY%C_fix", 0, 0)
        await ctx.registrar.register_all()

    @defer.inlineCallbacks
    def test_mqadmin_capture(self):
        compared = yield defer.ensureDeferred(self._replay())
        self.assertGreaterEqual(compared, 25)

    async def _replay(self) -> int:
        await self._prepare()
        client = RemotingClient()
        compared = 0
        try:
            for peer, request, java in exchanges():
                addr = self.cluster.broker_addr if peer == "broker" else self.cluster.namesrv_addr
                ours = await client.invoke(addr, request, timeout=5)
                if request.code == 17:
                    await sleep(0.3)  # the broker's oneway re-registration reaches the name server
                if java is None:
                    continue
                where = f"code {request.code} ({peer}) opaque {request.opaque}"
                self.assertEqual(ours.code, java.code, f"{where}: {ours.remark}")
                if java.remark is not None and java.code == 0:
                    self.assertEqual(ours.remark, java.remark, where)
                self.assertEqual(sorted(ours.ext_fields or {}), sorted(java.ext_fields or {}), where)
                self.assertEqual(ours.ext_fields is None, java.ext_fields is None, where)
                if request.code == 26:
                    keys = {line.split("=", 1)[0] for line in ours.body.decode().splitlines()}
                    self.assertEqual(CORE_CONFIG_KEYS - keys, set(), where)
                    self.assertEqual(sorted(fastjson.loads(ours.ext_fields["version"])), ["counter", "timestamp"])
                elif java.body:
                    self.assertShape(fastjson.loads(java.body), fastjson.loads(ours.body), where)
                else:
                    self.assertEqual(ours.body, b"", where)
                compared += 1
        finally:
            await client.close()
        return compared
