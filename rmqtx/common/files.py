"""Small files written the way Java's MixAll.string2File writes them (so Apache and rmqtx read each other's)."""

from __future__ import annotations

import os


def write_like_string2file(path: str, text: str) -> None:
    """Java's MixAll.string2File: write ``path.tmp``, keep the previous file as ``path.bak``, rename into place."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(path):
        os.replace(path, path + ".bak")
    os.replace(tmp, path)
