"""The record every dispatcher is fed (Java's DispatchRequest), apart so that the commit log, the
index and the pipeline can all name it without importing one another."""
from __future__ import annotations

from typing import NamedTuple

from rmqtx.common.message import parse_properties

from . import record as R


class DispatchRequest(NamedTuple):
    """One stored record as the dispatchers see it (Java's DispatchRequest); a tuple so the put
    path can make it with ``tuple.__new__`` and no Python call."""

    topic: str
    queue_id: int
    physical_offset: int
    size: int
    #: the consume queue's tag field when the writer knows it, else None (computed from properties)
    tags_code: int | None
    store_timestamp: int
    queue_offset: int
    sys_flag: int
    #: the properties string exactly as stored
    properties: str
    #: ``properties`` parsed, when the writer has it (the pipeline parses it otherwise)
    props: dict[str, str] | None


def request_from_record(offset: int, rec: R.Record) -> DispatchRequest:
    """The request for a record read back from the commit log (recovery, replica)."""
    return DispatchRequest(rec.topic, rec.queue_id, offset, rec.total_size, None, rec.store_timestamp,
                           rec.queue_offset, rec.sys_flag, rec.properties, parse_properties(rec.properties))


