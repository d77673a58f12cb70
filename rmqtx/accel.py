"""The optional compiled accelerator: ``rmqtx._accel`` when built and not disabled, else None.

Set ``RMQTX_PURE_PYTHON=1`` to run without it. Every function in it has a pure-Python twin of the
same name and signature (the reference, still tested in tests/remoting/test_accel.py):
``decode_binary_fields``, ``encode_binary_ext``, ``binary_frame_head``, ``decode_frame_payload`` and
``send_answer_frame`` in rmqtx.remoting.serializer, ``send_v2_values`` in rmqtx.remoting.headers,
``java_string_hash`` in rmqtx.common.javacompat, ``parse_properties`` and ``join_properties`` in
rmqtx.common.message, ``index_key_hash2``, ``write_record`` and ``offset_msg_id`` in
rmqtx.store.record, ``index_put`` and ``index_put_keys`` in rmqtx.store.index, ``scan_units`` in
rmqtx.store.consume_queue. One type too: ``Committer``, the SYNC_FLUSH group commit thread, whose
twin is ``PyCommitter`` in rmqtx.store.committer (same methods and behaviour; the C one never takes
the GIL; tests/store/test_committer.py runs both). And ``send_lane``, a plain SEND_MESSAGE_V2 stored
and answered in one call, whose twin is the ordinary send path it shortcuts (rmqtx/broker/processors/send_lane.py;
tests/broker/test_send_lane.py compares the stores and answers the two leave).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

PURE_ENV = "RMQTX_PURE_PYTHON"


#: What the Python side calls; a build from older sources lacks some, and is then not used at all.
REQUIRED = ("Committer", "binary_frame_head", "configure", "configure_command", "decode_binary_fields",
            "decode_frame_payload", "encode_binary_ext", "index_key_hash2", "index_put", "index_put_keys",
            "java_string_hash", "join_properties", "offset_msg_id", "parse_properties", "scan_units",
            "send_answer_frame", "send_lane", "send_v2_values", "write_record")


def _load() -> ModuleType | None:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        from rmqtx import _accel  # type: ignore[attr-defined]  # the optional C extension, built or not
    except ImportError:
        return None
    missing = [name for name in REQUIRED if not hasattr(_accel, name)]
    if missing:
        sys.stderr.write(f"rmqtx: the compiled accelerator is older than the code (it lacks {', '.join(missing)}); "
                         "running pure Python until it is rebuilt (pip install, or setup.py build_ext --inplace)\n")
        return None
    return _accel


accel: ModuleType | None = _load()
