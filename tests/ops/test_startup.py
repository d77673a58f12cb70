"""Start-up failures end twistd with one clear line on stderr and a non-zero status, no traceback."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
import unittest

from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import Standalone, call
from tests.ops.support import TWISTD, Scratch, tree_env


class StartupFailureTest(unittest.TestCase):
    def setUp(self) -> None:
        self.scratch = Scratch()
        self.addCleanup(self.scratch.close)

    def assertOneLine(self, proc: subprocess.CompletedProcess, expected: str) -> None:
        self.assertEqual(proc.returncode, 1, proc.stderr + proc.stdout)
        self.assertEqual(proc.stderr, f"rmqtx: cannot start: {expected}\n")
        self.assertNotIn("Traceback", proc.stdout)
        self.assertNotIn("boot success", proc.stdout)  # no NameServer announced whose broker then died

    def test_missing_config_file(self) -> None:
        missing = self.scratch.dir / "nope.conf"
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(missing)))
        self.assertOneLine(proc, f"cannot read the broker.conf file: No such file or directory ({missing})")

    def test_value_that_does_not_parse(self) -> None:
        conf = self.scratch.dir / "broker.conf"
        conf.write_text("autoCreateTopicEnable=ture\n")
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, "broker.conf: autoCreateTopicEnable=ture is neither true nor false")
        conf.write_text("defaultTopicQueueNums=8x\n")
        proc = self.scratch.run(["rmqbroker", "-c", str(conf), "-p", str(self.scratch.broker_port)])
        self.assertOneLine(proc, "broker.conf: defaultTopicQueueNums=8x is not a number")
        conf.write_text("fileReservedTime=three\n")  # a store setting
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, "broker.conf: fileReservedTime=three is not a number")
        for key in ("enableMixedMessageType", "enableTopicMessageTypeCheck"):  # 5.x's topic message-type switches
            conf.write_text(f"{key}=yes\n")
            proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
            self.assertOneLine(proc, f"broker.conf: {key}=yes is neither true nor false")

    def test_broker_port_in_use(self) -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", self.scratch.broker_port))
            taken.listen()
            proc = self.scratch.run(self.scratch.standalone_args())
        self.assertOneLine(proc, f"the broker cannot listen on 127.0.0.1:{self.scratch.broker_port}: Address already in use")
        self.assertFalse((self.scratch.dir / "store" / "abort").exists())  # the store was closed cleanly

    def test_namesrv_port_in_use(self) -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", self.scratch.namesrv_port))
            taken.listen()
            proc = self.scratch.run(["rmqnamesrv", "-p", str(self.scratch.namesrv_port), "--listen-address", "127.0.0.1"])
        self.assertOneLine(proc, f"the NameServer cannot listen on 127.0.0.1:{self.scratch.namesrv_port}: Address already in use")

    def test_locked_store(self) -> None:
        store = self.scratch.dir / "store"
        store.mkdir()
        fd = os.open(store / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # what a running Java or rmqtx broker holds
            proc = self.scratch.run(self.scratch.standalone_args())
        finally:
            os.close(fd)
        self.assertOneLine(proc, f"store directory {store} is locked by another running store (lock file {store}/lock)")

    def test_read_only_store(self) -> None:
        """As root, a read-only tmpfs mounted in a private namespace; otherwise a directory without write permission."""
        ro = self.scratch.dir / "ro"
        ro.mkdir()
        store = ro / "store"
        if os.geteuid() == 0:
            unshare = shutil.which("unshare")
            self.assertIsNotNone(unshare, "util-linux unshare is needed to mount a read-only file system")
            mount = f"mount -t tmpfs -o ro tmpfs {ro} && exec \"$@\""
            proc = self.scratch.run(self.scratch.standalone_args(store=str(store)),
                                    prefix=[unshare, "-rm", "sh", "-c", mount, "sh"])
            reason = "Read-only file system"
        else:
            ro.chmod(0o555)
            self.addCleanup(ro.chmod, 0o755)
            proc = self.scratch.run(self.scratch.standalone_args(store=str(store)))
            reason = "Permission denied"
        self.assertOneLine(proc, f"cannot open the store {store}: {reason} ({store})")


    def test_acl_file_java_refuses(self) -> None:
        """A plain_acl.yml whose access key is shorter than 7 characters: Java refuses it, so does rmqtx, in one line."""
        acl = self.scratch.dir / "plain_acl.yml"
        acl.write_text("accounts:\n  - accessKey: abc\n    secretKey: 12345678\n    admin: true\n")
        conf = self.scratch.dir / "broker.conf"
        conf.write_text(f"aclEnable=true\naclFilePath={acl}\n")
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, f"the ACL file {acl}: The accessKey=abc and secretKey=****** cannot be null "
                                 "and length should longer than 6")

    def test_acl_file_that_is_a_directory(self) -> None:
        """An error no check foresaw still ends start-up in one line (its traceback goes to the log)."""
        acl = self.scratch.dir / "acl-dir"
        acl.mkdir()
        conf = self.scratch.dir / "broker.conf"
        conf.write_text(f"aclEnable=true\naclFilePath={acl}\n")
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, f"IsADirectoryError: Is a directory ({acl})")

    def test_grpc_port_that_is_not_a_number(self) -> None:
        conf = self.scratch.dir / "broker.conf"
        conf.write_text("grpcPort=80a\n")
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, "grpcPort='80a' is not a port number")

    def test_metrics_exporters_rmqtx_lacks_stop_start_up(self) -> None:
        """Apache 5.x's OTLP and LOG metrics exporters are refused in one line (PROM is served)."""
        conf = self.scratch.dir / "broker.conf"
        conf.write_text("metricsExporterType=OTLP_GRPC\nmetricsGrpcExporterTarget=127.0.0.1:4317\n")
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, "broker.conf: metricsExporterType=OTLP_GRPC asks for the OpenTelemetry OTLP_GRPC exporter,"
                                 " which rmqtx does not implement; use PROM (Prometheus scrapes /metrics) or remove the key"
                                 " to start")

    def test_metrics_exporter_port_in_use(self) -> None:
        busy = socket.socket()
        self.addCleanup(busy.close)
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        conf = self.scratch.dir / "broker.conf"
        conf.write_text(f"metricsExporterType=PROM\nmetricsPromExporterPort={port}\nmetricsPromExporterHost=127.0.0.1\n")
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, f"metricsPromExporterPort (metricsExporterType=PROM) cannot listen on 127.0.0.1:{port}:"
                                 " Address already in use")

    def test_acl_2_settings_rmqtx_cannot_honour_stop_start_up(self) -> None:
        """ACL 2.0 is honoured with Apache's default and local providers; anything else stops start-up."""
        conf = self.scratch.dir / "broker.conf"
        conf.write_text("authenticationEnabled=true\nauthorizationEnabled=true\n"
                        "authenticationProvider=org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider\n"
                        "initAuthenticationUser={\"username\":\"rocketmq\",\"password\":\"12345678\"}\n")
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, "broker.conf: authenticationEnabled=true needs authenticationMetadataProvider="
                                 "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider"
                                 " (without it Apache refuses every request)")
        conf.write_text("authorizationEnabled=true\nauthorizationProvider=com.example.MyProvider\n")
        proc = self.scratch.run(["rmqbroker", "-c", str(conf), "-p", str(self.scratch.broker_port)])
        self.assertOneLine(proc, "broker.conf: authorizationProvider=com.example.MyProvider is not a class rmqtx implements"
                                 " (org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider);"
                                 " remove the key to start")
        conf.write_text("migrateAuthFromV1Enabled=true\n")
        proc = self.scratch.run(["rmqbroker", "-c", str(conf), "-p", str(self.scratch.broker_port)])
        self.assertOneLine(proc, "broker.conf: migrateAuthFromV1Enabled=true needs authenticationMetadataProvider and"
                                 " authorizationMetadataProvider (the local ones) to migrate into")

    def test_failover_and_replica_settings_stop_start_up(self) -> None:
        conf = self.scratch.dir / "broker.conf"
        for line, what in (("enableDLegerCommitLog=true", "DLedger commit log mode"),
                           ("inSyncReplicas=3", "a SYNC_MASTER waiting for more than one slave"),
                           ("storeType=rocksdb", "a store other than the file store or RocksDB consume queues "
                                                 "(storeType=default or defaultRocksDB)"),
                           ("timerUseRocksDB=true", "the RocksDB timer store (timer messages are kept in the timer "
                                                    "wheel's files)")):
            conf.write_text(line + "\n")
            proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
            self.assertOneLine(proc, f"broker.conf: {line} asks for {what}, which rmqtx does not implement; "
                                     "remove the key to start")
        conf.write_text("enableControllerMode=true\n")  # honoured (docs/controller.md): it needs its controllers
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)))
        self.assertOneLine(proc, "broker.conf: enableControllerMode=true needs controllerAddr (host:port, ';'-separated)")
        namesrv_conf = self.scratch.dir / "namesrv.conf"
        namesrv_conf.write_text("enableControllerInNamesrv=true\n")  # honoured (docs/controller.md): it needs its peers
        proc = self.scratch.run(["rmqnamesrv", "-c", str(namesrv_conf), "-p", str(self.scratch.namesrv_port)])
        self.assertOneLine(proc, "namesrv.conf: controllerDLegerPeers is empty (n0-127.0.0.1:9877;n1-...)")


    def test_rocksdb_store_without_its_extra(self) -> None:
        """storeType=defaultRocksDB on an install without the rocksdb extra: one line naming the extra."""
        hide = self.scratch.dir / "hide"
        (hide / "rocksdict").mkdir(parents=True)
        (hide / "rocksdict" / "__init__.py").write_text("raise ImportError(\"No module named 'rocksdict'\")\n")
        conf = self.scratch.dir / "broker.conf"
        conf.write_text("storeType=defaultRocksDB\n")
        path = tree_env()["PYTHONPATH"]
        proc = self.scratch.run(self.scratch.standalone_args("-c", str(conf)),
                                prefix=["env", f"PYTHONPATH={hide}{os.pathsep}{path}"])
        self.assertOneLine(proc, "storeType=defaultRocksDB needs the 'rocksdb' extra: pip install 'rmqtx[rocksdb]' "
                                 "(No module named 'rocksdict')")


class ForegroundRunTest(unittest.TestCase):
    def test_no_pid_file_in_the_working_directory(self) -> None:
        scratch = Scratch()
        self.addCleanup(scratch.close)
        log = scratch.dir / "twistd.log"
        proc = subprocess.Popen([*TWISTD, "-n", "--logfile", str(log), *scratch.standalone_args()], cwd=scratch.dir,
                                env=tree_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        deadline = time.time() + 30
        while "boot success" not in (log.read_text() if log.exists() else ""):
            self.assertIsNone(proc.poll(), log.read_text() if log.exists() else "")
            self.assertLess(time.time(), deadline, "the standalone did not come up")
            time.sleep(0.1)
        self.assertIn("broker broker-a listening", log.read_text().split("boot success")[0])  # the broker first
        self.assertEqual(sorted(p.name for p in scratch.dir.iterdir()), ["store", "twistd.log"])
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        self.assertNotIn("twistd.pid", os.listdir(scratch.dir))


class MisspeltKeyTest(unittest.TestCase):
    def test_misspelt_key_warns_with_the_closest_key(self) -> None:
        server = Standalone({"autoCreateTopicEnabel": "false", "filterServerNums": "0"})
        self.addCleanup(server.close)
        server.start()
        self.assertIn("broker.conf key autoCreateTopicEnabel is not a RocketMQ broker setting; ignored "
                      "(did you mean autoCreateTopicEnable?)", server.log())
        self.assertNotIn("filterServerNums", server.log())  # a Java key rmqtx does not use is not warned about
        resp = call(server.broker, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, {}))
        settings = dict(line.split("=", 1) for line in resp.body.decode().splitlines())
        self.assertNotIn("autoCreateTopicEnabel", settings)
        self.assertEqual(settings["autoCreateTopicEnable"], "true")
        self.assertTrue(server.stop())

    def test_5x_keys_at_their_defaults_are_accepted_quietly(self) -> None:
        """The same 5.x keys with their features off start as on Apache's brokers, without a warning."""
        server = Standalone({"authenticationEnabled": "false", "authorizationEnabled": "false",
                             "enableControllerMode": "false", "storeType": "default", "inSyncReplicas": "1",
                             "authenticationProvider": "x.DefaultAuthenticationProvider"})
        self.addCleanup(server.close)
        server.start()
        self.assertNotIn("is not a RocketMQ broker setting", server.log())
        resp = call(server.broker, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, {}))
        settings = dict(line.split("=", 1) for line in resp.body.decode().splitlines())
        self.assertEqual(settings["authenticationEnabled"], "false")
        self.assertTrue(server.stop())


class RecoveryProgressTest(unittest.TestCase):
    def test_recovery_after_a_crash_logs_a_summary(self) -> None:
        server = Standalone()
        self.addCleanup(server.close)
        server.start()
        self.assertRegex(server.log(), r"store load: \S+ loaded after a clean shutdown: 0 records checked")
        server.create_topic("T_recover", queues=1)
        for i in range(5):
            server.send_to_queue("T_recover", 0, f"before the crash {i}")
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        server.start()
        self.assertRegex(server.log(), rf"store recovery: {server.root / 'store'} recovered after an abnormal shutdown: "
                                       r"(\d+) records checked, \1 dispatched to \d+ consume queues and the index, "
                                       r"commit log ends at offset [1-9]\d* \(\d+\.\d s\)")
        self.assertTrue(server.stop())
