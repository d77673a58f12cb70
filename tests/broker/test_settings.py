"""broker.conf is parsed once into typed, frozen sections; a bad value stops start-up in one line;
UPDATE_BROKER_CONFIG is the one run-time change and the broker acts on it; GET_BROKER_CONFIG's listing."""

from __future__ import annotations

import dataclasses
import unittest

from twisted.internet import defer

from rmqtx.broker.config import BrokerConfig, known_keys
from rmqtx.launcher import make_broker
from rmqtx.remoting import RemotingClient, RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.startup import StartupError
from tests.broker.wire import send
from tests.client.support import ClusterTestCase
from tests.ops.support import Scratch

SECTIONS = ("store", "ha", "grpc", "console", "tls", "pop", "timer", "switches")

#: One bad value per section (and two broker fields), with the line start-up stops with.
BAD_VALUES = {
    "grpcPort": ("abc", "grpcPort='abc' is not a port number"),
    "maxInvisibleTimeMills": ("1h", "broker.conf: maxInvisibleTimeMills=1h is not a number"),
    "haListenPort": ("x", "broker.conf: haListenPort=x is not a number"),
    "consolePort": ("80a", "broker.conf: consolePort='80a' is not a number"),
    "consoleAdminEnable": ("yes", "broker.conf: consoleAdminEnable=yes is neither true nor false"),
    "reviveQueueNum": ("eight", "broker.conf: reviveQueueNum=eight is not a number"),
    "enableRetryTopicV2": ("on", "broker.conf: enableRetryTopicV2=on is neither true nor false"),
    "timerPrecisionMs": ("1s", "broker.conf: timerPrecisionMs=1s is not a number"),
    "timerWheelEnable": ("maybe", "broker.conf: timerWheelEnable=maybe is neither true nor false"),
    "litePullMessageEnable": ("no", "broker.conf: litePullMessageEnable=no is neither true nor false"),
    "recallMessageEnable": ("1", "broker.conf: recallMessageEnable=1 is neither true nor false"),
    "enableUpdateBrokerConfig": ("yes", "broker.conf: enableUpdateBrokerConfig=yes is neither true nor false"),
    "tls.server.mode": ("strict", "tls.server.mode must be one of disabled, permissive, enforcing, not 'strict'"),
    "fileReservedTime": ("three", "broker.conf: fileReservedTime=three is not a number"),
    "listenPort": ("10911x", "broker.conf: listenPort=10911x is not a number"),
    "brokerRole": ("LEADER", "broker.conf: brokerRole='LEADER' is not ASYNC_MASTER, SYNC_MASTER or SLAVE"),
}


class SectionsTest(unittest.TestCase):
    def test_parsed_once_into_typed_sections(self) -> None:
        cfg = BrokerConfig.from_properties({
            "grpcPort": "18081", "grpcListenAddress": "0.0.0.0", "minInvisibleTimeMillsForRecv": "1000",
            "haListenPort": "20912", "haMasterAddress": "10.0.0.1:10912", "brokerRole": "slave", "brokerId": "1",
            "consolePort": "0", "consoleAdminEnable": "TRUE", "reviveQueueNum": "4", "timerPrecisionMs": "0",
            "litePullMessageEnable": "false", "tls.server.mode": "Permissive", "fileReservedTime": "1",
        })
        self.assertEqual((cfg.grpc.port, cfg.grpc.listen_address, cfg.grpc.limits.min_invisible_ms_for_recv),
                         (18081, "0.0.0.0", 1000))
        self.assertEqual((cfg.ha.listen_port, cfg.ha.master_address, cfg.ha_listen_port), (20912, "10.0.0.1:10912", 20912))
        self.assertEqual((cfg.brokerRole, cfg.store.broker_role, cfg.store.file_reserved_time), ("SLAVE", "SLAVE", 1))
        self.assertEqual((cfg.console.port, cfg.console.admin_enable), (0, True))
        self.assertEqual((cfg.pop.reviveQueueNum, cfg.timer.timerPrecisionMs), (4, 1))  # precision at least 1 ms
        self.assertFalse(cfg.switches.lite_pull_message_enable)
        self.assertEqual((cfg.tls.server.mode, cfg.tls.server_mode_given), ("permissive", True))

    def test_defaults(self) -> None:
        cfg = BrokerConfig.from_properties({"listenPort": "30911"})
        self.assertIsNone(cfg.grpc.port)
        self.assertEqual(cfg.grpc.listen_address, "127.0.0.1")
        self.assertEqual(cfg.ha_listen_port, 30912)  # listenPort + 1, as Java's BrokerStartup
        self.assertIsNone(cfg.ha.master_address)
        self.assertEqual(cfg.console.port, -1)
        self.assertEqual((cfg.tls.server.mode, cfg.tls.server_mode_given), ("disabled", False))
        self.assertTrue(cfg.switches.lite_pull_message_enable)
        self.assertFalse(cfg.switches.enable_update_broker_config)
        self.assertEqual(cfg.brokerId, 0)  # a master is brokerId 0 whatever the file says

    def test_sections_and_config_are_frozen(self) -> None:
        cfg = BrokerConfig.from_properties({"grpcPort": "18081"})
        for name in SECTIONS:
            section = getattr(cfg, name)
            first = dataclasses.fields(section)[0].name
            with self.assertRaises(dataclasses.FrozenInstanceError, msg=name):
                setattr(section, first, getattr(section, first))
        with self.assertRaises(dataclasses.FrozenInstanceError):
            cfg.autoCreateTopicEnable = False  # type: ignore[misc]
        with self.assertRaises(dataclasses.FrozenInstanceError):
            cfg.grpc = dataclasses.replace(cfg.grpc, port=1)  # type: ignore[misc]
        with self.assertRaises(TypeError):
            cfg.properties["grpcPort"] = "1"  # type: ignore[index]
        with self.assertRaises(AttributeError):
            cfg.update(storePathRootDir="/tmp/x")  # only the run-time keys change at run time
        cfg.update(autoCreateTopicEnable=False)
        self.assertFalse(cfg.autoCreateTopicEnable)

    def test_each_bad_value_is_refused_at_parse_time(self) -> None:
        for key, (value, line) in BAD_VALUES.items():
            with self.subTest(key=key):
                with self.assertRaises(ValueError) as caught:
                    BrokerConfig.from_properties({key: value})
                self.assertEqual(str(caught.exception), line)
                with self.assertRaises(StartupError) as stopped:  # what twistd prints after "rmqtx: cannot start: "
                    make_broker({key: value})
                self.assertEqual(str(stopped.exception), line)

    def test_unknown_key_warned_with_the_closest_and_dropped(self) -> None:
        from twisted.logger import globalLogPublisher

        seen: list[dict] = []
        globalLogPublisher.addObserver(seen.append)
        try:
            cfg = BrokerConfig.from_properties({"grpcPrt": "1", "autoCreateTopicEnabel": "false"})
        finally:
            globalLogPublisher.removeObserver(seen.append)
        hints = {e["key"]: e["hint"] for e in seen if e.get("log_namespace") == "rmqtx.broker.config"}
        self.assertEqual(hints, {"grpcPrt": " (did you mean grpcPort?)",
                                 "autoCreateTopicEnabel": " (did you mean autoCreateTopicEnable?)"})
        self.assertEqual(dict(cfg.properties), {})
        self.assertTrue(cfg.autoCreateTopicEnable)
        self.assertNotIn("store", known_keys())  # a section is no broker.conf key


class StartupLineTest(unittest.TestCase):
    """Two of the bad values through the real twistd entry points: one line on stderr, exit 1."""

    def test_bad_section_values_stop_start_up(self) -> None:
        scratch = Scratch()
        self.addCleanup(scratch.close)
        conf = scratch.dir / "broker.conf"
        conf.write_text("haListenPort=x\n")
        proc = scratch.run(["rmqbroker", "-c", str(conf), "-p", str(scratch.broker_port)])
        self.assertEqual((proc.returncode, proc.stderr), (1, "rmqtx: cannot start: broker.conf: haListenPort=x is not a number\n"))
        conf.write_text("reviveQueueNum=eight\n")
        proc = scratch.run(scratch.standalone_args("-c", str(conf)))
        self.assertEqual((proc.returncode, proc.stderr),
                         (1, "rmqtx: cannot start: broker.conf: reviveQueueNum=eight is not a number\n"))
        self.assertNotIn("Traceback", proc.stdout)


class RuntimeUpdateTest(ClusterTestCase):
    """UPDATE_BROKER_CONFIG over the wire changes what a running broker does, and what it lists."""

    broker_conf = {"enableUpdateBrokerConfig": "true", "grpcPrt": "1"}

    def setUp(self):
        super().setUp()
        self.client = RemotingClient()
        self.addCleanup(lambda: defer.ensureDeferred(self.client.close()))

    async def call(self, code: int, body: bytes = b"") -> RemotingCommand:
        return await self.client.invoke(self.cluster.broker_addr, RemotingCommand.request(code, None, body), 5)

    async def listing(self) -> list[str]:
        answer = await self.call(RequestCode.GET_BROKER_CONFIG)
        self.assertEqual(answer.code, ResponseCode.SUCCESS)
        return answer.body.decode().splitlines()

    async def _updates(self) -> None:
        addr, cfg = self.cluster.broker_addr, self.cluster.broker.config
        before = await self.listing()
        created = await send(self.client, addr, "T_settings_auto_1", b"x")
        self.assertEqual(created.code, ResponseCode.SUCCESS, created.remark)  # auto-created topic

        answer = await self.call(RequestCode.UPDATE_BROKER_CONFIG, b"autoCreateTopicEnable=false\n")
        self.assertEqual(answer.code, ResponseCode.SUCCESS, answer.remark)
        refused = await send(self.client, addr, "T_settings_auto_2", b"x")
        self.assertEqual(refused.code, ResponseCode.TOPIC_NOT_EXIST, refused.remark)
        again = await send(self.client, addr, "T_settings_auto_1", b"y")
        self.assertEqual(again.code, ResponseCode.SUCCESS, again.remark)

        answer = await self.call(RequestCode.UPDATE_BROKER_CONFIG, b"brokerPermission=4\n")  # read only
        self.assertEqual(answer.code, ResponseCode.SUCCESS, answer.remark)
        read_only = await send(self.client, addr, "T_settings_auto_1", b"z")
        self.assertEqual(read_only.code, ResponseCode.NO_PERMISSION, read_only.remark)
        self.assertEqual((cfg.autoCreateTopicEnable, cfg.brokerPermission), (False, 4))

        answer = await self.call(RequestCode.UPDATE_BROKER_CONFIG, b"storePathRootDir=/tmp/x\n")
        self.assertEqual(answer.code, ResponseCode.NO_PERMISSION)
        answer = await self.call(RequestCode.UPDATE_BROKER_CONFIG, b"defaultTopicQueueNums=eight\n")
        self.assertEqual(answer.code, ResponseCode.SYSTEM_ERROR)

        after = await self.listing()
        changed = [(b, a) for b, a in zip(before, after) if b != a]
        self.assertEqual(changed, [("brokerPermission=6", "brokerPermission=4"),
                                   ("autoCreateTopicEnable=true", "autoCreateTopicEnable=false")])
        self.assertEqual(len(before), len(after))

    def test_update_changes_what_the_broker_does(self):
        return defer.ensureDeferred(self._updates())

    async def _listing(self) -> None:
        lines = await self.listing()
        keys = [line.split("=", 1)[0] for line in lines]
        fields = [f.name for f in dataclasses.fields(BrokerConfig) if f.init and f.name != "properties"]
        self.assertEqual(keys[:len(fields)], fields)  # the broker's own fields first, in their order
        given = [k for k in self.cluster.broker_conf if k in known_keys()] + ["namesrvAddr"]
        file_part = [k for k in keys[len(fields):] if k in given and k not in fields]
        self.assertEqual(file_part, [k for k in given if k not in fields])  # then the file's other keys, as given
        self.assertEqual(len(keys), len(set(keys)))
        self.assertNotIn("grpcPrt", keys)  # unknown: warned about and dropped
        ha = self.cluster.broker.ctx.ha.master
        self.assertIn(f"haListenPort={ha.listen_port}", lines)  # the port the HA listener took, listed once
        self.assertEqual(self.cluster.broker.config.ha_server_addr, f"127.0.0.1:{ha.listen_port}")

    def test_get_broker_config_listing(self):
        return defer.ensureDeferred(self._listing())
