"""The interop matrix's broker settings, shared by its standalone (interop/server.py) and by the
Apache 5.4.0 pair started for the same scenarios (testkit/apache5.py --interop)."""

from __future__ import annotations

#: Short levels keep retry (level 3) and the C++ client's 16 retries before the DLQ quick.
LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
MATRIX_CONF = {"messageDelayLevel": LEVELS, "enablePropertyFilter": "true", "transactionCheckInterval": "2000",
               "transactionTimeOut": "3000", "recallMessageEnable": "true",
               # the gRPC scenarios receive with 1-2 s invisible durations (Apache's proxy: 10 s at least)
               "minInvisibleTimeMillsForRecv": "1000"}
