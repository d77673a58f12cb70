"""A standalone with ACL on, signed raw calls, and the Java/Python ACL client runners for tests."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from rmqtx.acl.signing import sign_request
from rmqtx.remoting.codes import RequestCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.serializer import decode_frame, encode_frame
from testkit.buildlock import one_build_at_a_time
from testkit.standalone import REPO, Standalone

HERE = Path(__file__).resolve().parent
USER, USER_SK = "RocketMQUser", "user-secret-1"
ADMIN, ADMIN_SK = "RocketMQAdmin", "admin-secret-1"
WHITE, WHITE_SK = "WhiteListed", "white-secret-1"

ACL_YML = f"""\
globalWhiteRemoteAddresses:
- 127.0.0.2
accounts:
- accessKey: {USER}
  secretKey: {USER_SK}
  whiteRemoteAddress:
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - TopicA=PUB|SUB
  - TopicR=SUB
  groupPerms:
  - GroupA=SUB
  - GroupD=DENY
- accessKey: {ADMIN}
  secretKey: {ADMIN_SK}
  admin: true
- accessKey: {WHITE}
  secretKey: {WHITE_SK}
  whiteRemoteAddress: 127.0.0.3
  admin: true
"""


def acl_server(yml: str = ACL_YML) -> Standalone:
    """A standalone (not started) with aclEnable=true and plain_acl.yml in its temp dir."""
    conf_dir = Path(tempfile.mkdtemp(prefix="rmqtx-acl-conf-"))
    path = conf_dir / "plain_acl.yml"
    path.write_text(yml)
    server = Standalone({"aclEnable": "true", "aclFilePath": str(path)})
    server.acl_path = path  # type: ignore[attr-defined]
    server.acl_conf_dir = conf_dir  # type: ignore[attr-defined]
    return server


def raw_call(addr: str, request: RemotingCommand, source: str = "127.0.0.1", timeout: float = 5.0) -> RemotingCommand:
    """One request over a fresh socket bound to ``source`` (any 127.x address works on loopback)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout, source_address=(source, 0)) as sock:
        sock.sendall(encode_frame(request))
        buf = b""
        while True:
            while len(buf) < 4:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed before answering")
                buf += chunk
            total = int.from_bytes(buf[:4], "big")
            while len(buf) < 4 + total:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed mid-answer")
                buf += chunk
            cmd = decode_frame(buf[: 4 + total])
            buf = buf[4 + total :]
            if cmd.is_response and cmd.opaque == request.opaque:
                return cmd


def signed(code: int, fields: dict | None, body: bytes = b"", ak: str = ADMIN, sk: str = ADMIN_SK) -> RemotingCommand:
    cmd = RemotingCommand.request(code, fields or {}, body)
    sign_request(cmd, ak, sk)
    return cmd


def topic_names(server: Standalone) -> set[str]:
    resp = raw_call(server.broker, signed(RequestCode.GET_ALL_TOPIC_CONFIG, {}))
    return set(json.loads(resp.body)["topicConfigTable"])


def max_offset(server: Standalone, topic: str, queue: int) -> int:
    resp = raw_call(server.broker, signed(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue}))
    return int(resp.ext_fields["offset"]) if resp.ext_fields and "offset" in resp.ext_fields else -1


_classpath: str | None = None


@one_build_at_a_time
def java_classpath() -> str:
    """The 4.9.8 client + acl jars, resolved by Maven from tests/security/java/pom.xml (once per run)."""
    global _classpath
    if _classpath is None:
        out = Path(tempfile.mkdtemp(prefix="rmqtx-acl-cp-")) / "cp.txt"
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
            cwd=HERE / "java", check=True, timeout=600, capture_output=True,
        )
        _classpath = out.read_text().strip()
    return _classpath


#: The JVM's start-up dominates these short runs (as in tests/admin/mqadmin_java.py): C1 only, serial GC.
JVM_FLAGS = ("-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
_scenario: list[str] | None = None


def java_scenario(*props: str) -> list[str]:
    """``java FLAGS PROPS -cp ... AclScenario``: AclScenario.java compiled once per process (the source
    launcher would compile it again in every JVM, over a second of CPU each), with the JRE's own javac module."""
    global _scenario
    if _scenario is None:
        out = tempfile.mkdtemp(prefix="rmqtx-acl-classes-")
        atexit.register(shutil.rmtree, out, True)
        subprocess.run(["java", "-m", "jdk.compiler/com.sun.tools.javac.Main", "-nowarn", "-d", out, "-cp", java_classpath(),
                        str(HERE / "java" / "AclScenario.java")], check=True, timeout=300, capture_output=True)
        _scenario = ["-cp", f"{out}{os.pathsep}{java_classpath()}", "AclScenario"]
    return ["java", *JVM_FLAGS, *props, *_scenario]


def _lines(proc: subprocess.CompletedProcess) -> list[dict]:
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        raise AssertionError(f"exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return lines


def run_java(server: Standalone, *steps: str, timeout: float = 240) -> list[dict]:
    proc = subprocess.run(
        [*java_scenario("-Drocketmq.client.logUseSlf4j=false"), server.namesrv, *steps],
        capture_output=True, text=True, timeout=timeout, cwd=tempfile.gettempdir(),
        env={**os.environ, "ROCKETMQ_HOME": tempfile.gettempdir()},
    )
    return _lines(proc)


def run_python(server: Standalone, *steps: str, timeout: float = 120) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, str(HERE / "py_acl_client.py"), server.namesrv, *steps],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
    )
    return _lines(proc)


def run_mqadmin(server: Standalone, home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Apache's mqadmin (MQAdminStartup); it takes its keys from ``home``/conf/tools.yml."""
    return subprocess.run(
        ["java", *JVM_FLAGS, f"-Drocketmq.home.dir={home}", "-cp", java_classpath(), "org.apache.rocketmq.tools.command.MQAdminStartup",
         *args, "-n", server.namesrv],
        capture_output=True, text=True, timeout=timeout, cwd=str(home), env={**os.environ, "ROCKETMQ_HOME": str(home)},
    )


def mqadmin_home(access_key: str, secret_key: str) -> Path:
    """A ROCKETMQ_HOME for mqadmin: conf/tools.yml with the keys, a silent logback config."""
    home = Path(tempfile.mkdtemp(prefix="rmqtx-mqadmin-"))
    (home / "conf").mkdir()
    (home / "conf" / "logback_tools.xml").write_text('<configuration><root level="OFF"/></configuration>')
    (home / "conf" / "tools.yml").write_text(f"accessKey: {access_key}\nsecretKey: {secret_key}\n")
    return home
