"""Bit flags of the protocol, defined once: a message's sysFlag (Java's ``MessageSysFlag``) and a pull
request's sysFlag (``PullSysFlag``)."""

from __future__ import annotations

# -- MessageSysFlag
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_BORN_HOST_V6 = 0x10
SYSFLAG_STORE_HOST_V6 = 0x20
SYSFLAG_INNER_BATCH = 0x80
#: 4.9.8 sets these compression-type bits (zlib) next to COMPRESSED; 5.x names the codec in bits 8-10.
SYSFLAG_ZLIB = 0x300
SYSFLAG_COMPRESSION_TYPE = 0x700
TRANSACTION_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED = 0x4
TRANSACTION_COMMIT = 0x8
TRANSACTION_ROLLBACK = 0xC

# -- PullSysFlag
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
