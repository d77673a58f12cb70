"""The optional compiled accelerator: ``rmqtx._accel`` when built and not disabled, else None.

Set ``RMQTX_PURE_PYTHON=1`` to run without it. Every function in it has a pure-Python twin of the
same name and signature (the reference, still tested in tests/remoting/test_accel.py):
``decode_binary_fields``, ``encode_binary_ext``, ``binary_frame_head``, ``decode_frame_payload`` and
``send_answer_frame`` in rmqtx.remoting.serializer, ``send_v2_values`` in rmqtx.remoting.headers,
``java_string_hash`` in rmqtx.common.javacompat, ``parse_properties`` and ``join_properties`` in
rmqtx.common.message, ``index_key_hash2``, ``write_record`` and ``offset_msg_id`` in
rmqtx.store.record, ``index_put`` and ``index_put_keys`` in rmqtx.store.index.
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
