"""The OCI image of rmqtx itself: ``rmqstandalone`` with its store on the volume ``/store``.

No image registry is reachable from the build machines, so, as for the interop matrix's Java image
(``interop/container.py``), the image is a root file system assembled here and loaded with
``podman import``: this machine's Python interpreter and standard library (at their own paths, with
the shared libraries they link), and rmqtx installed with its dependencies by pip under
``/opt/rmqtx/site``. ``deploy/Containerfile`` builds the same image where a registry is reachable.
The tag is a hash of the sources, the build recipe and the interpreter, so it is built once per change.

    python -m deploy.image            # build (if needed) and print the tag
    podman --runtime runc run --rm --network host -v rmqtx-store:/store TAG
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from pathlib import Path

from interop.container import _linked_libraries, engine

REPO = Path(__file__).resolve().parents[1]
REPO_NAME = "localhost/rmqtx"
LAYOUT_VERSION = "1"  # bump when the image's layout changes
SITE = "/opt/rmqtx/site"
PYTHON = "/usr/local/bin/python3"
STORE = "/store"
#: What the image runs: both servers on all interfaces of the container, the store on the volume.
COMMAND = ["/usr/local/bin/twistd", "-n", "--pidfile=", "rmqstandalone", "--bind", "0.0.0.0", "--store", STORE]
#: Parts of the standard library a server never imports.
_STDLIB_SKIP = ("site-packages", "dist-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip",
                "__pycache__", "lib2to3", "pydoc_data", "config-*")


def package_sources() -> list[Path]:
    """What pip builds rmqtx from: its package, its twistd plugin and the build recipe (no build products)."""
    files = [REPO / name for name in ("pyproject.toml", "setup.py", "README.md")]
    for top in ("rmqtx", "twisted"):
        for path in (REPO / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".so", ".cache"):
                files.append(path)
    return sorted(files)


def image_tag() -> str:
    digest = hashlib.sha256(f"{LAYOUT_VERSION}|{sys.version}|{sys.base_prefix}|{COMMAND}".encode())
    for path in [*package_sources(), Path(__file__)]:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return f"{REPO_NAME}:{digest.hexdigest()[:16]}"


def ensure_image() -> tuple[str | None, str]:
    """(tag, "") once the image exists, building it if needed; (None, why) when it cannot be had."""
    cli = engine()
    if cli is None:
        return None, "no container engine (podman or docker)"
    tag = image_tag()
    if subprocess.run([*cli, "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag, ""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rmqtx-image-") as tmp:
        root = Path(tmp) / "rootfs"
        why = assemble(root, Path(tmp) / "src")
        if why:
            return None, why
        archive = Path(tmp) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        changes = [f"CMD {_json(COMMAND)}", f"VOLUME {STORE}", f"WORKDIR {STORE}", f"ENV PYTHONPATH={SITE}",
                   "ENV LANG=C.UTF-8", "ENV PYTHONDONTWRITEBYTECODE=1", "EXPOSE 9876", "EXPOSE 10911"]
        flags = [arg for change in changes for arg in ("--change", change)]
        done = subprocess.run([*cli, "import", *flags, str(archive), tag], capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"{cli[0]} import failed: {done.stderr.strip()[-300:]}"
    print(f"built {tag} in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    listed = subprocess.run([*cli, "images", "--format", "{{.Repository}}:{{.Tag}}", REPO_NAME], capture_output=True, text=True)
    old = [t for t in listed.stdout.split() if t != tag and t.startswith(REPO_NAME + ":")]
    if old:  # earlier builds are never used again
        subprocess.run([*cli, "rmi", *old], capture_output=True)
    return tag, ""


def _json(items: list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def assemble(root: Path, src: Path) -> str:
    """The root file system; returns why it could not be made, or ""."""
    interpreter = Path(os.path.realpath(sys.executable))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    _copy(interpreter, root)
    shutil.copytree(stdlib, root / stdlib.relative_to("/"), symlinks=True, ignore=shutil.ignore_patterns(*_STDLIB_SKIP))
    bin_dir = root / PYTHON.lstrip("/")
    bin_dir.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(interpreter, bin_dir)
    src.mkdir()
    for path in package_sources():  # a copy: pip's in-tree build must not touch this tree
        target = src / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    site = root / SITE.lstrip("/")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--no-warn-script-location",
                          "--target", str(site), str(src)], capture_output=True, text=True)
    if pip.returncode != 0:
        return f"pip could not install rmqtx for the image: {pip.stderr.strip()[-500:]}"
    shutil.rmtree(site / "bin", ignore_errors=True)  # their #! lines name this machine's Python
    for name, call in (("twistd", "from twisted.scripts.twistd import run; run()"),
                       ("rmqadmin", "from rmqtx.tools.admin import main; raise SystemExit(main())")):
        script = root / "usr" / "local" / "bin" / name
        script.write_text(f"#!{PYTHON}\n{call}\n")
        script.chmod(0o755)
    for lib in _linked_libraries(root):
        if not str(lib).startswith(str(root)):
            _copy(lib, root)
    for path in (root / "tmp", root / STORE.lstrip("/")):
        path.mkdir(mode=0o1777, exist_ok=True)
        path.chmod(0o1777)
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text("root:x:0:0:root:/tmp:/bin/false\n")
    (etc / "group").write_text("root:x:0:\n")
    for name in ("hosts", "resolv.conf"):
        (etc / name).touch()
    return ""


def _copy(path: Path, root: Path) -> None:
    """``path`` into the image at the same absolute path."""
    target = root / path.relative_to("/")
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def main() -> int:
    tag, why = ensure_image()
    if tag is None:
        print(f"deploy.image: {why}", file=sys.stderr)
        return 1
    print(tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
