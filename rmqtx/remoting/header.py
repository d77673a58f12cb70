"""Typed command headers: declared once as dataclasses, read from and written to ext fields.

A header class names its fields as Java does; a field without a default is required. Field
order is the Java class's declared order, which the ROCKETMQ binary form of "fast" headers keeps.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, ClassVar, TypeVar

from rmqtx.remoting.command import RemotingCommand, java_string

H = TypeVar("H", bound="CommandHeader")


class HeaderError(ValueError):
    """A request's ext fields do not fit its header class (missing or malformed field)."""


def parse_bool(text: str) -> bool:
    """Java's parseBoolean, plus the C++ client's ``1``/``0`` (it sends ``batch: "1"``)."""
    return text.strip().lower() in ("true", "1")


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise HeaderError(f"For input string: \"{text}\"") from None


_PARSERS: dict[Any, Callable[[str], Any]] = {str: str, int: _parse_int, bool: parse_bool}


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    parse: Callable[[str], Any]
    required: bool
    default: Any


class CommandHeader:
    """Base of every typed header; subclasses are ``@dataclass`` with Java field names."""

    #: True for Java's FastCodesHeader classes: binary form writes their fields first, in order.
    FAST: ClassVar[bool] = False
    _specs: ClassVar[tuple[_FieldSpec, ...]]

    @classmethod
    def _field_specs(cls) -> tuple[_FieldSpec, ...]:
        specs = cls.__dict__.get("_specs")
        if specs is None:
            hints = typing.get_type_hints(cls)
            built = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                kind = hints[f.name]
                args = [a for a in typing.get_args(kind) if a is not type(None)]
                base = args[0] if args else kind
                required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                default = None if f.default is dataclasses.MISSING else f.default
                built.append(_FieldSpec(f.name, _PARSERS[base], required, default))
            specs = tuple(built)
            cls._specs = specs
        return specs

    @classmethod
    def from_fields(cls: type[H], ext: dict[str, str] | None) -> H:
        """Decode from ext fields; a missing required field raises the way Java words it."""
        ext = ext or {}
        values = {}
        for spec in cls._field_specs():
            raw = ext.get(spec.name)
            if raw is None:
                if spec.required:
                    raise HeaderError(f"the custom field <{spec.name}> is null")
                values[spec.name] = spec.default
            else:
                values[spec.name] = spec.parse(raw)
        return cls(**values)

    @classmethod
    def from_command(cls: type[H], cmd: RemotingCommand) -> H:
        return cls.from_fields(cmd.ext_fields)

    def to_fields(self) -> dict[str, str]:
        """Ext fields in declared order; ``None`` fields are left out, as Java does."""
        out: dict[str, str] = {}
        for spec in self._field_specs():
            value = getattr(self, spec.name)
            if value is not None:
                out[spec.name] = java_string(value)
        return out

    @classmethod
    def fast_keys(cls) -> tuple[str, ...]:
        return tuple(s.name for s in cls._field_specs()) if cls.FAST else ()

    def apply_to(self, cmd: RemotingCommand, extra: dict[str, str] | None = None) -> RemotingCommand:
        """Put this header (and ``extra`` fields Java adds with addExtField) into ``cmd``."""
        fields = dict(extra or {})
        fields.update(self.to_fields())
        cmd.ext_fields = fields
        cmd.fast_keys = self.fast_keys()
        return cmd
