"""What a read wants from a consume queue, judged on its units before the commit log is read
(Java's MessageFilter.isMatchedByConsumeQueue). The broker builds one per pull from the
subscription; the store only asks it questions, so it needs nothing from the broker."""
from __future__ import annotations

from typing import Iterable

from .consume_queue_ext import ExtUnit


class MessageFilter:
    """Keeps the units whose tags code is in :attr:`tags_codes` (every unit when it is None).

    Subclasses that judge more than the tags code (filter bit maps) override :meth:`matches_unit`
    and set :attr:`by_tags_only` to False; reads then leave the compiled scan for every unit.
    """

    __slots__ = ("tags_codes",)

    #: True when matches_unit is exactly "tags code in tags_codes": reads may use the compiled scan
    by_tags_only = True

    def __init__(self, tags_codes: Iterable[int] | None = None) -> None:
        self.tags_codes: frozenset[int] | None = None if tags_codes is None else frozenset(tags_codes)

    def matches_unit(self, tags_code: int | None, ext: ExtUnit | None) -> bool:
        """May the unit's record match? ``tags_code`` is None when unknown (its ext unit is lost),
        ``ext`` the unit's ext unit (store time, filter bit map) when the queue has one."""
        codes = self.tags_codes
        return tags_code is None or codes is None or tags_code in codes

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self.tags_codes) if self.tags_codes is not None else None})"
