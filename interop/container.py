"""The OCI image the Java columns run in: a Java runtime, the client jars and the compiled program.

No image registry is reachable from the build machines, so the image is made from a root file
system assembled here (a ``jlink`` runtime, or the host's JRE, plus the shared libraries it links)
and loaded with ``podman import`` (or ``docker import``). Its tag is a hash of everything in it, so
it is built once per change of the sources, the jars or the JDK and found again on later runs.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from interop.javabuild import JavaBuild

REPO_NAME = "localhost/rmqtx-interop-java"
LAYOUT_VERSION = "2"  # bump when the image's layout changes
#: Modules the clients (netty, fastjson, the tools) use; jlink keeps just these.
MODULES = "java.se,jdk.unsupported,jdk.crypto.ec,jdk.management,jdk.naming.dns,jdk.zipfs,jdk.localedata"
JAVA_IN_IMAGE = "/opt/java/bin/java"


def engine() -> list[str] | None:
    """The container CLI with its flags: podman with runc (crun fails on rlimits here), else docker."""
    if shutil.which("podman"):
        runtime = ["--runtime", "runc"] if shutil.which("runc") or os.path.exists("/usr/sbin/runc") else []
        return ["podman", *runtime]
    if shutil.which("docker"):
        return ["docker"]
    return None


def run_flags(cli: list[str]) -> list[str]:
    """``run`` options: the host's network (the broker is on loopback); podman as root also needs /sys.

    Podman gives root containers nofile/nproc limits of about a million, which runc may not set
    under a lower hard limit ("error setting rlimit type 7/6"); ask for what this process may have.
    """
    flags = ["--rm", "-i", "--network", "host", "-e", "HOME=/tmp", "-e", "LANG=C.UTF-8", "-e", "LC_ALL=C.UTF-8"]
    if cli[0] == "podman":
        flags += ["-v", "/sys:/sys", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro"]
        nofile = _hard(resource.RLIMIT_NOFILE, 65536)
        nproc = _hard(resource.RLIMIT_NPROC, 32768)
        flags += ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]
    return flags


def _hard(kind: int, cap: int) -> int:
    hard = resource.getrlimit(kind)[1]
    return cap if hard == resource.RLIM_INFINITY else min(hard, cap)


def java_home() -> Path:
    javac = shutil.which("javac") or shutil.which("java")
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    return Path(os.path.realpath(javac or "/usr/bin/java")).parents[1]


def image_tag(builds: list[JavaBuild]) -> str:
    home = java_home()
    version = subprocess.run([str(home / "bin" / "java"), "-version"], capture_output=True, text=True).stderr
    digest = hashlib.sha256(f"{LAYOUT_VERSION}|{home}|{version}|{MODULES}".encode())
    for b in sorted(builds, key=lambda b: b.column):
        digest.update(f"|{b.column}:{b.key}".encode())
    return f"{REPO_NAME}:{digest.hexdigest()[:16]}"


def ensure_image(builds: list[JavaBuild]) -> tuple[str | None, str]:
    """(tag, "") once the image exists, building it if needed; (None, why) when it cannot be had."""
    cli = engine()
    if cli is None:
        return None, "no container engine (podman or docker); install podman and runc, or pass --no-containers"
    tag = image_tag(builds)
    if subprocess.run([*cli, "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag, ""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rmqtx-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        why = assemble(root, builds)
        if why:
            return None, why
        archive = Path(tmp) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        done = subprocess.run([*cli, "import", "--change", f"CMD [\"{JAVA_IN_IMAGE}\", \"-version\"]", str(archive), tag],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"{cli[0]} import failed: {done.stderr.strip()[-200:]}"
    print(f"built {tag} in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    _drop_older(cli, tag)
    return tag, ""


def _drop_older(cli: list[str], keep: str) -> None:
    """Earlier builds of the image are never used again."""
    listed = subprocess.run([*cli, "images", "--format", "{{.Repository}}:{{.Tag}}", REPO_NAME], capture_output=True, text=True)
    old = [t for t in listed.stdout.split() if t != keep and t.startswith(REPO_NAME)]
    if old:
        subprocess.run([*cli, "rmi", *old], capture_output=True)


def assemble(root: Path, builds: list[JavaBuild]) -> str:
    """The root file system: /opt/java, its libraries, /opt/interop/<column>/{classes,lib}, /tmp, /etc."""
    home = java_home()
    runtime = root / "opt" / "java"
    runtime.parent.mkdir(parents=True)
    jlink = home / "bin" / "jlink"
    made = jlink.exists() and (home / "jmods").is_dir() and subprocess.run(
        [str(jlink), "--add-modules", MODULES, "--strip-debug", "--no-header-files", "--no-man-pages", "--compress=2",
         "--output", str(runtime)], capture_output=True).returncode == 0
    if not made:  # a JRE without jmods: copy the runtime, following Debian's links into /etc
        shutil.rmtree(runtime, True)
        for part in ("bin", "lib", "conf"):
            if (home / part).exists():
                shutil.copytree(home / part, runtime / part, symlinks=False, ignore=shutil.ignore_patterns("src.zip", "ct.sym"))
    if not (runtime / "bin" / "java").exists():
        return f"no Java runtime could be assembled from {home}"
    if not (runtime / "lib" / "server" / "classes.jsa").exists():  # jlink makes none: the class data sharing archive
        subprocess.run([str(runtime / "bin" / "java"), "-Xshare:dump"], capture_output=True)  # halves each JVM's start
    for lib in _linked_libraries(runtime):
        target = root / lib.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copy2(lib, target)
    for b in builds:
        base = root / "opt" / "interop" / b.column
        shutil.copytree(b.classes, base / "classes")
        (base / "lib").mkdir(parents=True)
        for jar in b.jars:
            shutil.copy2(jar, base / "lib" / jar.name)
    (root / "tmp").mkdir(mode=0o1777)
    os.chmod(root / "tmp", 0o1777)
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text("root:x:0:0:root:/tmp:/bin/false\n")
    (etc / "group").write_text("root:x:0:\n")
    for name in ("hosts", "resolv.conf"):
        (etc / name).touch()
    return ""


def _linked_libraries(runtime: Path) -> set[Path]:
    """Every shared library (and the loader) the runtime's binaries need, as resolved paths on the host."""
    found: set[Path] = set()
    elves = [p for p in runtime.rglob("*") if p.is_file() and (p.suffix == ".so" or p.parent.name == "bin")]
    for elf in elves:
        out = subprocess.run(["ldd", str(elf)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            path = next((x for x in parts if x.startswith("/")), None)
            if path and not path.startswith(str(runtime)):
                found.add(Path(path))
                found.add(Path(os.path.realpath(path)))
    return found


def java_command(cli: list[str], tag: str, column: str, name: str, jvm_flags: list[str], args: list[str]) -> list[str]:
    """``<engine> run`` of one cell in the image."""
    classpath = f"/opt/interop/{column}/classes:/opt/interop/{column}/lib/*"
    return [*cli, "run", *run_flags(cli), "--name", name, tag, JAVA_IN_IMAGE, *jvm_flags, "-Duser.home=/tmp", "-cp", classpath, *args]
