"""atheris fuzz target: the frame decoder and the broker's request body decoders.

Run: ``python tests/security/fuzz_decoders.py -max_total_time=20 CORPUS_DIR``. Any exception other
than the decoders' own refusals (FrameError, HeaderError, BodyError) is a crash; keep each crash
input found as a case in ``tests/security/hostile.py``.
"""

from __future__ import annotations

import sys

import atheris

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])  # run from a checkout without installing

with atheris.instrument_imports(include=["rmqtx", "tests.security"]):
    from tests.security.hostile import one_input


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
