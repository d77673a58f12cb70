"""Processes a test or benchmark owns: each in its own process group, killed whole on stop or exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

_procs: list[subprocess.Popen] = []


def spawn(cmd: list[str], out: Path, **kw) -> subprocess.Popen:
    """Start in its own process group (so its children die with it), output to a file."""
    with open(out, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, **kw)
    proc.out_path = out  # type: ignore[attr-defined]  # for the error message if it dies
    _procs.append(proc)
    return proc


def stop(proc: subprocess.Popen | None, grace: float = 15.0) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    try:  # leftovers of the group (the group id is the leader's pid)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc in _procs:
        _procs.remove(proc)


def kill9(proc: subprocess.Popen) -> None:
    """SIGKILL the process group at once (a crash), and forget it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    if proc in _procs:
        _procs.remove(proc)


def stop_all() -> None:
    """Stop every process ``spawn`` started and that is still listed."""
    for proc in list(_procs):
        stop(proc, grace=5.0)


def owned() -> list[subprocess.Popen]:
    """The processes ``spawn`` started that were not stopped yet."""
    return list(_procs)


def accepts(addr: str) -> bool:
    """Whether ``host:port`` accepts a TCP connection now."""
    host, port = addr.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=0.5).close()
        return True
    except OSError:
        return False
