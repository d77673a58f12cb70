"""The optional compiled accelerator: ``rmqtx._accel`` when built and not disabled, else None.

Set ``RMQTX_PURE_PYTHON=1`` to run without it. Every function in it has a pure-Python twin of the
same name and signature (the reference, still tested): ``decode_binary_fields`` and
``encode_binary_ext`` in rmqtx.remoting.serializer, ``java_string_hash`` in rmqtx.common.javacompat,
``index_key_hash2`` and ``write_record`` in rmqtx.store.record.
"""

from __future__ import annotations

import os
from types import ModuleType

PURE_ENV = "RMQTX_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        from rmqtx import _accel
    except ImportError:
        return None
    return _accel


accel: ModuleType | None = _load()
