"""Run twisted.trial; in a strict run (CI) also fail when it ran too few tests or skipped any (see tests/conftest.py).

Usage: ``python -m tests.trial_strict [trial options] tests``; the word ``--trial-share`` stands for the
modules of tests/conftest.py's TRIAL_SHARE (tox's trial env: the part of the suite the pytest env leaves).
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ALLOWED_SKIPS, floor, strict, trial_share_modules


def check(output: str) -> list[str]:
    """What makes a strict run fail, from trial's text report."""
    problems = []
    ran = re.findall(r"^Ran (\d+) tests? in", output, re.M)
    least = floor("trial")
    if not ran or int(ran[-1]) < least:
        problems.append(f"trial ran {ran[-1] if ran else 0} tests, fewer than its floor {least}")
    for block in re.split(r"^=+$", output, flags=re.M):
        block = block.strip()
        if block.startswith("[SKIPPED]"):
            lines = [line for line in block.splitlines()[1:] if line.strip()]
            lines = lines[: next((i for i, line in enumerate(lines) if line.startswith("---")), len(lines))]
            reason = lines[0] if lines else ""
            if not any(allowed in reason for allowed in ALLOWED_SKIPS):
                problems.append(f"skipped: {reason} ({', '.join(lines[1:])})")
    return problems


def expand(argv: list[str]) -> list[str]:
    """trial's arguments, ``--trial-share`` replaced by the modules it names."""
    out: list[str] = []
    for arg in argv:
        out.extend(trial_share_modules() if arg == "--trial-share" else [arg])
    return out


def main(argv: list[str]) -> int:
    proc = subprocess.run([sys.executable, "-m", "twisted.trial", *expand(argv)], stdout=subprocess.PIPE, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0 or not strict():
        return proc.returncode
    problems = check(proc.stdout)
    for line in problems:
        print(f"strict run failed: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
