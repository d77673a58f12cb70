"""The official Java client as two columns: ``java`` (rocketmq-client/-tools 4.9.8) and ``java5`` (5.x remoting).

One program (``interop/java``) compiled against each version's jars from Maven (interop/javabuild.py).
Each cell is a JVM in the OCI image of interop/container.py (podman, host network), or on the host
with ``--no-containers``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

from interop import container, javabuild
from interop.drivers.base import CellRun, Driver
from interop.scenarios import GROUP_WAIT, Context, Scenario

#: Start-up costs more CPU than the cells' work: one compiler tier, one GC thread.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Dfile.encoding=UTF-8", "-Dsun.jnu.encoding=UTF-8"]

#: Apache 4.9.8 refuses its own client's queries under ACL: the hook signs every ext field, the broker's
#: check leaves _UNIQUE_KEY_QUERY out (ISSUE #1409's fix assumed the flag came after signing). rmqtx does as Java.
ACL_QUERY = ("with ACL on, Apache 4.9.8's broker refuses this client's QUERY_MESSAGE (the client signs _UNIQUE_KEY_QUERY, "
             "the broker's check leaves it out); rmqtx answers as Java does")
#: What a lone consumer's start-up race can cost before its first delivery (scenarios.GROUP_WAIT tells the
#: races: the 5.x client's first rebalance 20 s late, or 4.9.8's pulls refused until the heartbeat at 31 s).
START_RACE_S = 25.0
_builds: dict[str, "javabuild.JavaBuild | str"] = {}
_image: tuple[str | None, str] | None = None


def java_build(column: str) -> "javabuild.JavaBuild | str":
    if column not in _builds:
        _builds[column] = javabuild.build(column)
    return _builds[column]


def shared_image(given: str | None = None) -> tuple[str | None, str]:
    """One image holds every Java column that builds; made (or found) once per process, or ``given`` (--java-image)."""
    global _image
    if _image is None and given:
        cli = container.engine()
        found = cli is not None and subprocess.run([*cli, "image", "inspect", given], capture_output=True).returncode == 0
        _image = (given, "") if found else (None, f"image {given} not found by {cli[0] if cli else 'any container engine'}")
    if _image is None:
        builds = [b for b in (java_build(c) for c in javabuild.COLUMNS) if isinstance(b, javabuild.JavaBuild)]
        _image = container.ensure_image(builds) if builds else (None, "no Java column builds")
    return _image


class JavaDriver(Driver):
    name = "java"
    slot = ("jvm", 3)  # a JVM start costs about a CPU-second; more at once starve the broker on two cores
    containers = True
    image: str | None = None  # a prebuilt image (interop/java/Dockerfile, target client) instead of building one
    unsupported = {"timer": "rocketmq-client 4.9.8 has no timer message API (Message.setDelayTimeMs / setDelayTimeSec / "
                            "setDeliverTimeMs came with 5.x)",
                   "pop": "rocketmq-client 4.9.8 has no POP consumption (RocketMQ 5.x)"}

    def __init__(self) -> None:
        self.build: javabuild.JavaBuild | None = None
        self.cli: list[str] | None = None
        self.tag: str | None = None

    def adapt(self, scenario: Scenario, params: dict, ctx: Context) -> str | None:
        if ctx.mode == "acl" and scenario.key in ("query_key", "query_id"):
            return ACL_QUERY
        if params["wait"] < GROUP_WAIT:  # an upper bound: a cell that gets its deliveries ends at once
            params["wait"] += START_RACE_S
        return super().adapt(scenario, params, ctx)

    def prepare(self) -> str | None:
        if not (self.containers and self.image):  # a given image has the program built in
            built = java_build(self.name)
            if isinstance(built, str):
                return built
            self.build = built
        if not self.containers:
            return None
        self.cli = container.engine()
        self.tag, why = shared_image(self.image)
        if not self.tag:
            return f"no container image: {why}"
        print(f"[{self.name}] cells run in container image {self.tag} ({' '.join(self.cli)})", file=sys.stderr, flush=True)
        return None

    def command(self, op: str, params: dict) -> list[str]:
        args = [javabuild.MAIN, op, json.dumps(params)]
        if not self.containers:
            assert self.build is not None
            return ["java", *JVM_FLAGS, "-cp", self.build.classpath, *args]
        assert self.cli is not None and self.tag is not None
        params["_container"] = f"rmqtx-{self.name}-{uuid.uuid4().hex[:12]}"
        return container.java_command(self.cli, self.tag, self.name, params["_container"], JVM_FLAGS, args)

    def run(self, op: str, params: dict, timeout: float) -> CellRun:
        """As the base; a container left behind by a timed-out cell is removed."""
        out = super().run(op, params, timeout)
        name = params.pop("_container", None)
        if out.timed_out and name and self.cli:
            subprocess.run([*self.cli, "rm", "-f", name], capture_output=True)
        return out


class Java5Driver(JavaDriver):
    name = "java5"
    unsupported: dict[str, str] = {}
