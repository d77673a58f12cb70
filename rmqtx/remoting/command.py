"""RemotingCommand: the one message type of RocketMQ's remoting protocol."""

from __future__ import annotations

import itertools
from typing import Mapping

from rmqtx.remoting.codes import (
    CURRENT_VERSION,
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    LanguageCode,
    ResponseCode,
    SerializeType,
)

#: Like Java's static request id counter: new commands take the next value as their opaque.
_next_opaque = itertools.count()


def next_opaque() -> int:
    """Take the next opaque, as a freshly built Java command does."""
    return next(_next_opaque)


class RemotingCommand:
    """A request or response frame: header fields, ext fields (all strings) and a body.

    ``ext_fields`` is ``None`` when the header has no ``extFields`` at all, ``{}`` when it is an
    empty map (Java writes the two differently). ``fast_keys`` names ext fields that the ROCKETMQ
    binary form writes first, in that order (Java's ``FastCodesHeader`` classes).
    """

    __slots__ = (
        "code",
        "language",
        "version",
        "opaque",
        "flag",
        "remark",
        "ext_fields",
        "body",
        "serialize_type",
        "fast_keys",
    )

    def __init__(
        self,
        code: int,
        *,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        remark: str | None = None,
        opaque: int | None = None,
        flag: int = 0,
        language: str = "JAVA",
        version: int = CURRENT_VERSION,
        serialize_type: SerializeType | None = None,
        fast_keys: tuple[str, ...] = (),
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = next_opaque() if opaque is None else opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.serialize_type = serialize_type
        self.fast_keys = fast_keys

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
        **kwargs: object,
    ) -> "RemotingCommand":
        """Build a request; ext field values are turned into Java-style strings."""
        return cls(
            code,
            ext_fields=stringify_fields(ext_fields) if ext_fields is not None else None,
            body=body,
            flag=ONEWAY_FLAG if oneway else 0,
            **kwargs,  # type: ignore[arg-type]
        )

    def make_response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        *,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        fast_keys: tuple[str, ...] = (),
    ) -> "RemotingCommand":
        """Build the response to this request: same opaque, response flag, same serialization."""
        return RemotingCommand(
            int(code),
            ext_fields=ext_fields,
            body=body,
            remark=remark,
            opaque=self.opaque,
            flag=RESPONSE_FLAG,
            serialize_type=self.serialize_type,
            fast_keys=fast_keys,
        )

    # -- flags --------------------------------------------------------------------------------
    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def mark_response(self) -> None:
        self.flag |= RESPONSE_FLAG

    def mark_oneway(self) -> None:
        self.flag |= ONEWAY_FLAG

    @property
    def language_code(self) -> int:
        try:
            return LanguageCode[self.language]
        except KeyError:
            return LanguageCode.OTHER

    def field(self, name: str, default: str | None = None) -> str | None:
        """One ext field, or ``default`` when absent."""
        if self.ext_fields is None:
            return default
        return self.ext_fields.get(name, default)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (
            f"<RemotingCommand {kind} code={self.code} opaque={self.opaque} "
            f"remark={self.remark!r} ext={self.ext_fields!r} body={len(self.body)}B>"
        )


def java_string(value: object) -> str:
    """Render a value as Java's ``String.valueOf`` would (booleans lower case)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def stringify_fields(fields: Mapping[str, object]) -> dict[str, str]:
    """Ext fields as strings, dropping ``None`` values (Java leaves null fields out)."""
    return {k: java_string(v) for k, v in fields.items() if v is not None}
