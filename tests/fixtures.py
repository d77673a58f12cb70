"""Locate and read the captured Apache RocketMQ 4.9.8 fixtures (``tests/captures/apache-4.9.8``; ``$RMQTX_FIXTURES``
overrides)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

#: Frames and stores captured from Apache RocketMQ 4.9.8 (their README says how); in the repository, so a clone
#: alone runs every test.
FIXTURES = Path(os.environ.get("RMQTX_FIXTURES") or Path(__file__).resolve().parent / "captures" / "apache-4.9.8")


def records(name: str) -> Iterator[dict]:
    """Every record of one fixture file, in order."""
    with open(FIXTURES / name, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def frame_files() -> list[str]:
    """The wire capture files (not the client harness logs)."""
    return sorted(p.name for p in FIXTURES.glob("scenario-*.jsonl") if not p.name.endswith(".client.jsonl"))


def java_frames() -> Iterator[tuple[str, dict, bytes]]:
    """(file, record, frame bytes) for every frame a Java process wrote.

    In the bad-input capture only the servers' answers are Java's; its requests came from a script.
    """
    for name in frame_files():
        for rec in records(name):
            if "hex" not in rec or not rec.get("decoded"):
                continue
            if name == "scenario-bad-input.jsonl" and rec.get("dir") != "s2c":
                continue
            yield name, rec, bytes.fromhex(rec["hex"])
