"""The Java columns' program, compiled against the client jars Maven resolves, cached under ~/.cache.

``java`` is rocketmq-client/-tools 4.9.8, ``java5`` the newest 5.x remoting client (the pom's
``rocketmq5`` profile). A build is keyed by a hash of the sources, the jars and the JDK, so a
second run (or CI with a warm cache) only asks Maven for the classpath.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from interop.drivers.base import REPO
from testkit.buildlock import one_build_at_a_time

JAVA_DIR = REPO / "interop" / "java"
MAIN = "org.rmqtx.interop.Interop"
#: column -> (Maven profile, environment variable that may name the jars instead of Maven)
COLUMNS = {"java": (None, "ROCKETMQ_CLIENT_CLASSPATH"), "java5": ("rocketmq5", "ROCKETMQ5_CLIENT_CLASSPATH")}


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmqtx-interop"


def tail(text: str, lines: int = 3) -> str:
    return " ".join(text.strip().splitlines()[-lines:])[-300:]


@dataclass(frozen=True)
class JavaBuild:
    """Compiled classes plus the client's jars; ``key`` names this exact combination."""

    column: str
    classes: Path
    jars: tuple[Path, ...]
    key: str

    @property
    def classpath(self) -> str:
        return os.pathsep.join([str(self.classes), *map(str, self.jars)])


@one_build_at_a_time
def maven_classpath(profile: str | None) -> tuple[str | None, str]:
    """The classpath Maven gave for this pom and profile before (while its jars are all there), else ask Maven."""
    pom = (JAVA_DIR / "pom.xml").read_bytes()
    saved = cache_dir() / f"classpath-{profile or 'default'}-{hashlib.sha256(pom).hexdigest()[:16]}.txt"
    if saved.exists():
        classpath = saved.read_text().strip()
        if classpath and all(Path(jar).exists() for jar in classpath.split(os.pathsep)):
            return classpath, ""
    classpath, why = _ask_maven(profile)
    if classpath:
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(classpath)
    return classpath, why


def _ask_maven(profile: str | None) -> tuple[str | None, str]:
    """``dependency:build-classpath`` offline first (a populated ~/.m2), then online: (classpath, why not)."""
    if not shutil.which("mvn"):
        return None, "mvn not on PATH"
    why = ""
    with tempfile.NamedTemporaryFile(suffix=".classpath") as target:
        for offline in (["-o"], []):
            cmd = ["mvn", "-q", "-B", *offline, *(["-P", profile] if profile else []), "-f", str(JAVA_DIR / "pom.xml"),
                   "dependency:build-classpath", f"-Dmdep.outputFile={target.name}"]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                why = "mvn timed out"
                continue
            classpath = Path(target.name).read_text().strip()
            if done.returncode == 0 and classpath:
                return classpath, ""
            why = f"mvn failed: {tail(done.stdout + done.stderr)}"
    return None, why


def _jars(classpath: str) -> list[Path]:
    out: list[Path] = []
    for item in classpath.split(os.pathsep):
        if item.endswith("*"):
            out.extend(sorted(Path(item[:-1] or ".").glob("*.jar")))
        elif item:
            out.append(Path(item))
    return out


@one_build_at_a_time
def build(column: str) -> JavaBuild | str:
    """The column's classes and jars, or why there are none."""
    profile, env = COLUMNS[column]
    if not shutil.which("javac"):
        return "no JDK (javac) on PATH"
    classpath = os.environ.get(env)
    if not classpath:
        classpath, why = maven_classpath(profile)
        if not classpath:
            return f"no rocketmq-client jars: {env} unset and Maven gave none ({why})"
    jars = _jars(classpath)
    sources = sorted((JAVA_DIR / "src" / "main" / "java").rglob("*.java"))
    digest = hashlib.sha256(subprocess.run(["javac", "-version"], capture_output=True, text=True).stdout.encode())
    for path in sources:
        digest.update(path.name.encode() + path.read_bytes())
    for jar in jars:
        digest.update(f"{jar.name}:{jar.stat().st_size if jar.exists() else -1}".encode())
    key = digest.hexdigest()[:16]
    classes = cache_dir() / f"{column}-{key}" / "classes"
    if not (classes / MAIN.replace(".", "/")).with_suffix(".class").exists():
        classes.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=classes.parent))
        javac = subprocess.run(["javac", "--release", "8", "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(staging),
                                *map(str, sources)], capture_output=True, text=True)
        if javac.returncode != 0:
            shutil.rmtree(staging, True)
            return f"javac failed: {tail(javac.stderr)}"
        shutil.rmtree(classes, True)
        staging.rename(classes)
    return JavaBuild(column, classes, tuple(jars), key)
