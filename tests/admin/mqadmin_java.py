"""Run Apache's own ``mqadmin`` (MQAdminStartup from rocketmq-tools, resolved by Maven) as subprocesses.

Two versions: 4.9.8 (``tests/admin/java/pom.xml``) and 5.5.0, the newest 5.x Maven Central serves
(``tests/admin/java5/pom.xml``). Each classpath is asked of Maven once per process. ``MQAdmin.run`` gives a
command a fresh JVM, as the mqadmin script does; ``run_batch`` and ``run_chains`` run many subcommands
in each JVM (``MQAdminBatch.java``, one source for both versions). Every JVM of an ``MQAdmin`` has its
home, tmp dir and logs in one temp dir (consumerStatus files go there, never under ``~``; message
bodies go to the fixed ``BODY_DIR``, whose files the tests remove). Without Java or Maven the tests
skip, except under CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from testkit.buildlock import one_build_at_a_time

#: rocketmq-tools version -> the pom whose runtime classpath is that mqadmin
POMS = {"4.9.8": Path(__file__).with_name("java") / "pom.xml", "5.5.0": Path(__file__).with_name("java5") / "pom.xml"}
MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
#: mqadmin prints failures (stack traces, "CODE: n DESC: ...") and still exits 0.
FAILURE_TEXT = re.compile(r"\w*Exception\b|^\s+at [\w.$]+\(|(?i:\berror\b)|\bCODE: \d+", re.MULTILINE)
#: mqadmin's own timeouts are fixed (3 s for most calls). Several JVMs starting at once on a busy
#: machine can starve their I/O threads past them while rmqtx answers in milliseconds (measured: a
#: probe saw at most 91 ms from the name server while such a JVM timed out), so such a run is
#: repeated once, logged; a second timeout fails the test.
#: A starved JVM also reports its timeout as RemotingSendRequestException (the write's own listener had
#: not run yet when the wait ended) and, on its next call, as "connect to null" (it dropped the address).
CLIENT_TIMEOUT = re.compile(r"RemotingTimeoutException|RemotingSendRequestException|sendDefaultImpl call timeout|connect to null failed")
#: queryMsgById and friends write each body to this fixed path (not java.io.tmpdir); tests remove their files.
BODY_DIR = Path("/tmp/rocketmq/msgbodys")
#: The JVM's own start-up cost dominates; these keep each run near 0.7 s of CPU.
JVM_FLAGS = ("-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k")
LOGBACK = '<configuration><root level="OFF"/></configuration>\n'

#: Runs many subcommands in one JVM (MQAdmin.run_batch, run_chains), one source for both versions; compiled
#: once per process and version into a temp dir.
BATCH_SOURCE = Path(__file__).with_name("MQAdminBatch.java")

_lock = threading.Lock()
_classpaths: dict[str, str] = {}
_batch_classes: dict[str, str] = {}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def unavailable(why: str) -> Exception:
    """Locally a skip with the reason; in CI the same reason as a failure."""
    if in_ci():
        return AssertionError(f"mqadmin check cannot run in CI: {why}")
    return unittest.SkipTest(why)


def default_parallel() -> int:
    """JVMs at once: each needs ~0.8 s of CPU, then idles ~3 s in netty's graceful shutdown, so twice
    the cores; ``RMQTX_MQADMIN_PARALLEL`` overrides it (lower it on a machine shared with other work)."""
    return int(os.environ.get("RMQTX_MQADMIN_PARALLEL") or max(2, min(4, 2 * (os.cpu_count() or 1))))


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if not found:
        raise unavailable("no java on PATH and no JAVA_HOME (scripts/ensure-java.sh installs one)")
    return found


def classpath(version: str = "4.9.8") -> str:
    """rocketmq-tools ``version`` and its runtime dependencies, asked of Maven once per process."""
    with _lock:
        if version not in _classpaths:
            _classpaths[version] = _resolve(version)
        return _classpaths[version]


def batch_classes(version: str) -> str:
    """The directory holding MQAdminBatch compiled against rocketmq-tools ``version`` (once per process: the
    source launcher would compile it again in every JVM)."""
    cp = classpath(version)  # takes the lock itself
    with _lock:
        if version not in _batch_classes:
            out = tempfile.mkdtemp(prefix="mqadmin-batch-")
            atexit.register(shutil.rmtree, out, True)
            # the java binary's own compiler module (as tests/security/acl_support.py): no javac on PATH needed
            proc = subprocess.run([java_binary(), "-m", "jdk.compiler/com.sun.tools.javac.Main", "-nowarn", "-d", out, "-cp", cp,
                                   str(BATCH_SOURCE)],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise AssertionError(f"javac MQAdminBatch.java failed:\n{proc.stdout}{proc.stderr}")
            _batch_classes[version] = out
        return _batch_classes[version]


@one_build_at_a_time
def _resolve(version: str) -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise unavailable("no mvn on PATH (scripts/ensure-interop.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="mqadmin-cp-") as tmp:
        out = os.path.join(tmp, "classpath.txt")
        argv = [mvn, "-q", "-B", "-f", str(POMS[version]), "dependency:build-classpath",
                f"-Dmdep.outputFile={out}", "-Dmdep.includeScope=runtime"]
        proc = None
        for offline in (["-o"], []):  # the local repository first; Maven Central when something is missing
            proc = subprocess.run([argv[0], *offline, *argv[1:]], capture_output=True, text=True, timeout=600)
            if proc.returncode == 0 and os.path.exists(out):
                break
        else:
            raise unavailable(f"Maven could not resolve rocketmq-tools {version}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        cp = Path(out).read_text().strip()
    if f"rocketmq-tools-{version}.jar" not in cp:
        raise AssertionError(f"classpath lacks rocketmq-tools {version}: {cp}")
    return cp


@dataclass
class Run:
    argv: list[str]
    code: int
    out: str
    err: str
    #: milliseconds the subcommand took inside a batch JVM (run_batch), None for a JVM of its own
    ms: int | None = None

    @property
    def text(self) -> str:
        return self.out + self.err

    def __str__(self) -> str:
        took = f" in {self.ms} ms" if self.ms is not None else ""
        return f"mqadmin {' '.join(self.argv)} -> exit {self.code}{took}\n--- stdout\n{self.out[-4000:]}\n--- stderr\n{self.err[-4000:]}"


class MQAdmin:
    """``mqadmin SUBCOMMAND ... -n NAMESRV`` in fresh JVMs sharing one temp home."""

    def __init__(self, namesrv: str, parallel: int | None = None, timeout: float = 90, version: str = "4.9.8") -> None:
        self.java = java_binary()
        self.version = version
        self.cp = classpath(version)
        self.namesrv = namesrv
        self.parallel = parallel or default_parallel()
        self.timeout = timeout
        self._home = tempfile.TemporaryDirectory(prefix="mqadmin-home-")
        self.home = Path(self._home.name)
        (self.home / "conf").mkdir()
        (self.home / "tmp").mkdir()
        # made here, not by the JVMs: two started together race on mkdirs and the loser prints "RocketMQLog:ERROR"
        (self.home / "logs").mkdir()
        (self.home / "conf" / "logback_tools.xml").write_text(LOGBACK)

    def close(self) -> None:
        self._home.cleanup()

    def jvm(self) -> list[str]:
        h = str(self.home)
        return [self.java, *JVM_FLAGS, f"-Duser.home={h}", f"-Drocketmq.home.dir={h}", f"-Djava.io.tmpdir={h}/tmp",
                f"-Drocketmq.client.logRoot={h}/logs"]

    def argv(self, args: tuple[str, ...] | list[str]) -> list[str]:
        return [*self.jvm(), "-cp", self.cp, MAIN, *args, "-n", self.namesrv]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "ROCKETMQ_HOME")}
        env["ROCKETMQ_HOME"] = str(self.home)
        return env

    def run(self, *args: str) -> Run:
        """One command; run once more if its JVM gave up waiting for an answer (see CLIENT_TIMEOUT)."""
        run = self._run_once(args)
        if CLIENT_TIMEOUT.search(run.text):
            print(f"mqadmin {' '.join(args)}: the JVM timed out waiting for an answer; running it again", file=sys.stderr)
            run = self._run_once(args)
        return run

    def _run_once(self, args: tuple[str, ...]) -> Run:
        try:
            proc = subprocess.run(self.argv(args), capture_output=True, text=True, timeout=self.timeout,
                                  cwd=self.home, env=self.env())
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"mqadmin {' '.join(args)} ran over {self.timeout} s; output so far:\n{exc.stdout}\n{exc.stderr}")
        return Run(list(args), proc.returncode, proc.stdout, proc.stderr)

    def run_all(self, commands: list[tuple[str, ...]]) -> list[Run]:
        """Independent read-only commands side by side; results in the given order."""
        with ThreadPoolExecutor(self.parallel) as pool:
            return list(pool.map(lambda c: self.run(*c), commands))

    def run_batch(self, commands: list[tuple[str, ...]], jvms: int = 3) -> list[Run]:
        """Independent subcommands in ``jvms`` JVMs side by side (tests/admin/MQAdminBatch.java), each JVM
        running its share (every ``jvms``-th command) one after another: the same MQAdminStartup.main0 as
        one JVM per command, at a fraction of the CPU. Results in the given order; ``Run.code`` is a
        System.exit status (a bad command line), else 0. Commands that depend on each other go in one
        JVM (``jvms=1``) or one chain of ``run_chains``."""
        shares = [list(range(i, len(commands), jvms)) for i in range(min(jvms, len(commands)))]
        by_share = self._run_shares([[commands[i] for i in share] for share in shares])
        results = {i: run for share, runs in zip(shares, by_share) for i, run in zip(share, runs)}
        return [results[i] for i in range(len(commands))]

    def run_chains(self, *chains: list[tuple[str, ...]]) -> list[list[Run]]:
        """Each chain in a JVM of its own, its subcommands in the given order (a create before what reads
        it, deletes last); the chains side by side. The results, chain by chain."""
        return self._run_shares([list(chain) for chain in chains])

    def _run_shares(self, shares: list[list[tuple[str, ...]]]) -> list[list[Run]]:
        with ThreadPoolExecutor(max(1, len(shares))) as pool:
            return [future.result() for future in [pool.submit(self._run_share, share) for share in shares]]

    def _run_share(self, commands: list[tuple[str, ...]]) -> list[Run]:
        """One batch JVM, fed one subcommand at a time: each answer is read before the next line is
        written, so a subcommand whose client timed out (CLIENT_TIMEOUT) runs once more at once, in the
        same JVM, before the ones after it."""
        if not commands:
            return []
        with _BatchJVM(self) as jvm:
            runs = []
            for args in commands:
                run = jvm.run(args)
                if CLIENT_TIMEOUT.search(run.text):
                    print(f"mqadmin {' '.join(args)}: the JVM timed out waiting for an answer; running it again", file=sys.stderr)
                    run = jvm.run(args)
                runs.append(run)
            return runs

    def run_until(self, pattern: str, *args: str, timeout: float = 60) -> Run:
        """A command that never ends by itself (clusterRT): wait until its output matches, then stop it."""
        out_path = self.home / f"stream-{time.monotonic_ns()}.out"
        with open(out_path, "w") as out:
            proc = subprocess.Popen(self.argv(args), stdout=out, stderr=subprocess.STDOUT, text=True, cwd=self.home, env=self.env())
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.poll() is None:
                if re.search(pattern, out_path.read_text(), re.M):
                    break
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(15)
        return Run(list(args), proc.returncode, out_path.read_text(), "")


class _BatchJVM:
    """MQAdminBatch in one JVM: a line of arguments in, a JSON answer out, per subcommand."""

    def __init__(self, admin: MQAdmin) -> None:
        self.admin = admin
        classes = batch_classes(admin.version)
        argv = [*admin.jvm(), "-Djava.security.manager=allow", "-cp", f"{classes}{os.pathsep}{admin.cp}", "MQAdminBatch"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=admin.home, env=admin.env())
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self.stdin, self.stdout, self.stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        self.answers: queue.Queue[str | None] = queue.Queue()
        self.stray: list[str] = []  # stdout lines that are no answer, and stderr (the JVM's own warnings)
        self.readers = [threading.Thread(target=self._read, args=(self.stdout, True), daemon=True),
                        threading.Thread(target=self._read, args=(self.stderr, False), daemon=True)]
        for reader in self.readers:
            reader.start()

    def _read(self, pipe: IO[str], answers: bool) -> None:
        for line in pipe:
            if answers and line.startswith("{"):
                self.answers.put(line)
            else:
                self.stray.append(line)
        if answers:
            self.answers.put(None)

    def run(self, args: tuple[str, ...]) -> Run:
        try:
            self.stdin.write("\t".join([*args, "-n", self.admin.namesrv]) + "\n")
            self.stdin.flush()
            line = self.answers.get(timeout=self.admin.timeout)
        except (BrokenPipeError, queue.Empty):
            line = None
        if line is None:
            state = "ended" if self.proc.poll() is not None else f"gave no answer in {self.admin.timeout} s"
            raise AssertionError(f"mqadmin batch: {' '.join(args)}: the JVM {state} (exit {self.proc.returncode}); "
                                 f"its other output:\n{''.join(self.stray)[-4000:]}")
        answer = json.loads(line)
        return Run(list(args), answer.get("exit") or 0, answer["out"], answer["err"], answer.get("ms"))

    def __enter__(self) -> _BatchJVM:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stdin.close()  # MQAdminBatch halts at the end of its input
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for reader in self.readers:
            reader.join(5)
        self.stdout.close()
        self.stderr.close()
