"""Small Twisted helpers: public coroutine methods as Deferreds, user callbacks of any kind."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Coroutine, TypeVar

from twisted.internet import defer

from rmqtx.remoting.header import CommandHeader

T = TypeVar("T")


def deferred(func: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., "defer.Deferred[T]"]:
    """Make an ``async def`` method return a Deferred, the Twisted API users expect."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> "defer.Deferred[T]":
        return defer.ensureDeferred(func(*args, **kwargs))

    return wrapper


async def call_user(func: Callable[..., Any], *args: Any) -> Any:
    """Run a user callback that may return a value, a Deferred or an awaitable."""
    result = func(*args)
    if isinstance(result, defer.Deferred) or inspect.isawaitable(result):
        return await result
    return result



def java_fields(header: CommandHeader) -> dict[str, str]:
    """Ext fields in the order Java fills its HashMap: the inherited ``bname`` first.

    Order only shows where keys share a bucket (``bname`` with ``delayLevel``, ``commitOffset``...).
    """
    fields = header.to_fields()
    return {"bname": fields.pop("bname"), **fields} if "bname" in fields else fields
