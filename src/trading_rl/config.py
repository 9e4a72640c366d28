"""Typed parameter sections: one frozen dataclass per ``conf/*/parameters_*.yml`` section.

Why dataclasses (not pydantic): the domain library already passes frozen dataclasses around
(``EnvConfig``, ``ICMConfig``); what Kedro hands a node is a plain mapping, and what the checks need
is small (types, intervals, choices, unknown keys with the full dotted key named), so the standard
library covers it without a new dependency or a second object model.

A section is declared as a frozen dataclass subclassing :class:`Section`; each field's type comes
from its annotation and its range from :func:`setting` metadata::

    @dataclass(frozen=True, kw_only=True)
    class TrainingParams(Section):
        total_timesteps: int = setting(10_000, interval="[1, inf)")

``Section.from_mapping(mapping, "sac_icm.agent.training")`` overlays ``mapping`` on the defaults
(nested sections key by key, lists and free mappings whole) and raises :class:`ConfigError` naming
the dotted key of the first unknown, renamed, missing, mistyped or out-of-range parameter. A field
without a default is required: its only value is the one in ``conf/``. A field annotated
``Overlay[SomeSection]`` holds keys of that section laid over a base chosen where they apply
(:class:`Overlay`), checked here like the section itself.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Generic, Literal, TypeVar, Union

import numpy as np

S = TypeVar("S", bound="Section")

_INTERVAL = re.compile(r"^([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])$")


class ConfigError(ValueError):
    """A parameter is unknown, missing, of the wrong type or out of range; the message names it."""


def dotted(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def setting(
    default: Any = MISSING,
    *,
    interval: str | None = None,
    choices: tuple[Any, ...] | None = None,
    check: Callable[[Any], str | None] | None = None,
    runtime: bool = False,
    omitted_at_default: bool = False,
) -> Any:
    """A dataclass field with a range: ``interval`` like ``"(0, 1]"`` (``inf`` allowed), ``choices``
    the allowed values, ``check(value)`` returns what the value must be, or ``None`` when it is fine.
    ``runtime=True`` declares a key that cannot change what is learned or evaluated (logging, resume,
    check intervals, paths, device): :meth:`Section.identity_view` leaves it out of a configuration's
    identity. ``omitted_at_default=True`` declares a key added after configurations were recorded:
    at its default it is left out of the identity, so those configurations keep theirs. Mutable
    defaults (lists, dicts, sections) are copied per instance."""
    if interval is not None:
        _interval_parts(interval)
    metadata = {
        "interval": interval,
        "choices": choices,
        "check": check,
        "runtime": runtime,
        "omitted_at_default": omitted_at_default,
    }
    if default is MISSING:
        return dataclasses.field(metadata=metadata)
    if isinstance(default, (list, dict, Section, Overlay)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _interval_parts(interval: str) -> tuple[str, str, str, str]:
    """``(low bracket, low, high, high bracket)`` of an interval like ``"(0, 1]"``."""
    match = _INTERVAL.match(interval)
    if match is None:
        raise ValueError(f"bad interval {interval!r}; write it like '(0, 1]'")
    low_bracket, low, high, high_bracket = match.groups()
    return low_bracket, low, high, high_bracket


def in_interval(value: float, interval: str) -> bool:
    low_bracket, low, high, high_bracket = _interval_parts(interval)
    low_value, high_value = float(low), float(high)
    above = value > low_value if low_bracket == "(" else value >= low_value
    below = value < high_value if high_bracket == ")" else value <= high_value
    return above and below


@dataclass(frozen=True)
class Section:
    """Base of every parameter section: :meth:`from_mapping`, :meth:`to_dict`, :meth:`validate`.

    ``RENAMED`` maps an old key to its new name and ``REFUSED`` a key to the reason it is no longer
    accepted; both are refused with that message instead of "unknown".
    """

    RENAMED: ClassVar[Mapping[str, str]] = {}
    REFUSED: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def from_mapping(
        cls: type[S], mapping: Mapping[str, Any] | None = None, prefix: str = "", base: S | None = None
    ) -> S:
        """``mapping`` over ``base`` (default: the field defaults), checked; ``prefix`` is the
        section's dotted key, used in every error."""
        if isinstance(mapping, cls) and base is None:
            return mapping
        if mapping is None:
            mapping = {}
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"parameter '{prefix}' must be a mapping, got {mapping!r}")
        known = {f.name: f for f in fields(cls) if f.init}
        for key in mapping:
            if key not in known:
                raise ConfigError(cls._unknown_message(str(key), prefix, known))
        hints = _type_hints(cls)
        values: dict[str, Any] = {}
        for name, field in known.items():
            key = dotted(prefix, name)
            if base is not None:
                current = getattr(base, name)
            elif field.default is not MISSING:
                current = field.default
            elif field.default_factory is not MISSING:
                current = field.default_factory()
            else:
                current = MISSING
            if name in mapping:
                values[name] = _convert(mapping[name], hints[name], key, current)
                _check_range(values[name], field, key)
            elif current is MISSING:
                raise ConfigError(f"parameter '{key}' is missing")
            else:
                values[name] = current
        try:
            section = cls(**values)
        except ConfigError:
            raise
        except (TypeError, ValueError) as error:
            raise ConfigError(f"parameter '{prefix}': {error}") from error
        section.validate(prefix)
        return section

    def identity(self) -> dict[str, Any]:
        """This section's part of a configuration's identity (``provenance.identity_hash``): its
        values as they act (``identity_view`` of ``to_dict``), the same whether ``conf/`` writes a
        default out or leaves it to the code. A field added later is declared
        ``omitted_at_default`` so that identities recorded before it stay the same."""
        return type(self).identity_view(self.to_dict())

    @classmethod
    def _unknown_message(cls, key: str, prefix: str, known: Mapping[str, Any]) -> str:
        if key in cls.RENAMED:
            return f"'{dotted(prefix, key)}' was renamed to '{dotted(prefix, cls.RENAMED[key])}'"
        if key in cls.REFUSED:
            return f"parameter '{dotted(prefix, key)}' is not accepted: {cls.REFUSED[key]}"
        close = difflib.get_close_matches(key, list(known), n=1)
        hint = f" (did you mean '{dotted(prefix, close[0])}'?)" if close else f"; known: {sorted(known)}"
        return f"unknown parameter '{dotted(prefix, key)}'{hint}"

    @classmethod
    def identity_view(cls, mapping: Mapping[str, Any]) -> dict[str, Any]:
        """``mapping`` (this section as plain data) reduced to what defines behaviour: fields declared
        ``runtime=True`` are dropped, and a section switched off by its ``enabled`` flag is only
        ``{"enabled": False}`` (its other contents cannot act), or left out where it is off by
        default (so a configuration recorded before the section existed is the same). Keys the
        section does not know are kept as they are: a recorded configuration may hold keys of an
        older schema."""
        known = {f.name: f for f in fields(cls) if f.init}
        if "enabled" in known and mapping.get("enabled", known["enabled"].default) is False:
            return {"enabled": False}
        hints = _type_hints(cls)
        view: dict[str, Any] = {}
        for key, value in mapping.items():
            field = known.get(key)
            if field is not None and (
                field.metadata.get("runtime") or (field.metadata.get("omitted_at_default") and value == field.default)
            ):
                continue
            kind = hints.get(key)
            if isinstance(kind, type) and issubclass(kind, Section) and isinstance(value, Mapping):
                value = kind.identity_view(value)
                if value == {"enabled": False} and kind.identity_view({}) == value:
                    continue
            view[key] = value
        return view

    def validate(self, prefix: str) -> None:
        """Checks across fields (``min <= max`` ...); raise :class:`ConfigError` naming the key."""

    def overlay(self: S, mapping: Mapping[str, Any] | None, prefix: str) -> S:
        """This section with ``mapping`` laid over it (nested sections key by key, lists and free
        mappings whole), checked like :meth:`from_mapping`: how overrides of a resolved section
        (``walk_forward.agent_overrides`` over ``sac_icm.agent``) apply."""
        return type(self).from_mapping(mapping, prefix, base=self)

    def replaced(self: S, mapping: Mapping[str, Any], prefix: str) -> S:
        """This section with each key of ``mapping`` replacing its value whole (a nested section
        too), checked like :meth:`from_mapping` (``tuning.walk_forward`` over ``walk_forward``)."""
        return type(self).from_mapping({**self.to_dict(), **mapping}, prefix)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (nested sections as dicts)."""
        return {f.name: plain(getattr(self, f.name)) for f in fields(self) if f.init}


class Overlay(Mapping[str, Any], Generic[S]):
    """Keys of section ``kind`` as ``conf/`` writes them, to be laid over a base chosen where they
    apply: a field annotated ``Overlay[AgentParams]`` (``walk_forward.agent_overrides`` over
    ``sac_icm.agent``, ``options_her.env_overrides`` over an env spec's config, ``regimes`` over
    regime_validation's defaults). The keys are checked once, where the field is parsed, as that
    section over its code defaults (unknown keys, types, ranges, its ``validate``), and that section
    is kept as ``over_defaults``. The mapping itself stays as written: it is what a configuration's
    identity, a resume checkpoint and a saved agent recorded before the field was typed."""

    def __init__(self, kind: type[S], given: Mapping[str, Any] | None = None, prefix: str = "") -> None:
        self.kind = kind
        self.over_defaults: S = kind.from_mapping(given, prefix)
        self._given = copy.deepcopy(dict(given or {}))

    def __getitem__(self, key: str) -> Any:
        return self._given[key]

    def __iter__(self) -> typing.Iterator[str]:
        return iter(self._given)

    def __len__(self) -> int:
        return len(self._given)

    def __repr__(self) -> str:
        return f"Overlay[{self.kind.__name__}]({self._given!r})"


def stored_section(kind: type[S], data: Any, key: str) -> S:
    """A section that a file stores as plain data (its ``to_dict``), read back into ``kind`` where
    the file is read: the one way stored sections enter, so they get the parameters' checks, a key
    added to the section since the file was written reads its code default, and every error names
    ``key``, the file's name for the section (``feature_params[sp500]``,
    ``serving_config.env_config``)."""
    return kind.from_mapping(data, key)


def plain(value: Any) -> Any:
    """``value`` as plain data: sections as dicts, inside mappings and lists too."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _type_hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _fail(key: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"parameter '{key}' must be {expected}, got {value!r}")


def _describe(kind: Any) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if kind in names:
        return names[kind]
    if typing.get_origin(kind) is Literal:
        return f"one of {list(typing.get_args(kind))}"
    if isinstance(kind, type) and issubclass(kind, Section):
        return "a mapping"
    if typing.get_origin(kind) in (list, tuple):
        return "a list"
    if typing.get_origin(kind) in (dict, Overlay):
        return "a mapping"
    return str(kind)


def _convert(value: Any, kind: Any, key: str, current: Any = MISSING) -> Any:
    """``value`` checked against the annotation ``kind``; numbers normalised to int/float."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return value
    if origin in (Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None:
            if type(None) in options:
                return None
            raise _fail(key, " or ".join(_describe(option) for option in options), value)
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(value, option, key, current if isinstance(current, Section) else MISSING)
            except ConfigError as error:
                errors.append(error)
        if len(errors) == 1:
            raise errors[0]
        raise _fail(key, " or ".join(_describe(option) for option in options if option is not type(None)), value)
    if origin is Literal:
        if value not in typing.get_args(kind):
            raise _fail(key, _describe(kind), value)
        return value
    if isinstance(kind, type) and issubclass(kind, Section):
        base = current if isinstance(current, kind) else None
        return kind.from_mapping(value, key, base)
    if origin is Overlay:
        if not isinstance(value, Mapping):
            raise _fail(key, "a mapping", value)
        (section_kind,) = typing.get_args(kind)
        return Overlay(section_kind, value, key)
    if kind is bool:
        if not isinstance(value, (bool, np.bool_)):
            raise _fail(key, "true or false", value)
        return bool(value)
    if kind is int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise _fail(key, "an integer", value)
        return int(value)
    if kind is float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise _fail(key, "a number", value)
        if not math.isfinite(value):
            raise _fail(key, "a finite number", value)
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise _fail(key, "a string", value)
        return value
    if origin in (list, tuple):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
            raise _fail(key, "a list", value)
        (item_kind, *_) = typing.get_args(kind) or (Any,)
        return [_convert(item, item_kind, f"{key}[{index}]") for index, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise _fail(key, "a mapping", value)
        _, item_kind = typing.get_args(kind) or (str, Any)
        return {name: _convert(item, item_kind, dotted(key, name)) for name, item in value.items()}
    raise TypeError(f"parameter '{key}': annotation {kind!r} is not supported by Section")


def _check_range(value: Any, field: dataclasses.Field, key: str) -> None:
    if value is None:
        return
    interval = field.metadata.get("interval")
    if interval is not None and not in_interval(value, interval):
        raise _fail(key, f"in {interval}", value)
    choices = field.metadata.get("choices")
    if choices is not None and value not in choices:
        raise _fail(key, f"one of {list(choices)}", value)
    check = field.metadata.get("check")
    if check is not None:
        expected = check(value)
        if expected is not None:
            raise _fail(key, expected, value)


def require_not_above(section: Section, prefix: str, key: str, limit: str) -> None:
    """``section.key <= section.limit``, else ``ConfigError`` naming both dotted keys (``batch_size``
    and ``buffer_size``, ...)."""
    value, bound = getattr(section, key), getattr(section, limit)
    if value > bound:
        raise ConfigError(f"parameter '{prefix}.{key}' ({value}) must be <= '{prefix}.{limit}' ({bound})")


def layer_widths_problem(widths: list[int]) -> str | None:
    """The ``check`` of a network's hidden-layer widths (``setting(check=...)``)."""
    return None if widths and min(widths) >= 1 else "a non-empty list of layer widths >= 1"
