"""An alert and its level: what every rule returns, every channel sends and the JSON-lines file holds
(one :meth:`Alert.to_dict` per line)."""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np


class Level(enum.IntEnum):
    """An alert's severity, ordered; the values are the ``logging`` levels the log channel uses."""

    INFO = logging.INFO
    WARNING = logging.WARNING
    CRITICAL = logging.CRITICAL

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def of(cls, value: str | Level) -> Level:
        """``"info"``, ``"warning"`` or ``"critical"`` (or a ``Level``) as a ``Level``."""
        if isinstance(value, Level):
            return value
        try:
            return cls[str(value).upper()]
        except KeyError:
            raise ValueError(f"unknown alert level {value!r}; one of {list(LEVELS)}") from None


LEVELS: tuple[str, ...] = tuple(level.label for level in Level)


def json_data(value: Any) -> Any:
    """``value`` as JSON data: numpy scalars as Python numbers, non-finite floats as ``None``,
    timestamps as ISO text, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(key): json_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_data(item) for item in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, ``None`` when it is missing or not finite (JSON has no NaN)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def moment_of(timestamp: str) -> datetime:
    """An alert's ISO 8601 ``timestamp`` as an aware datetime (UTC when it names no offset): what a
    cooldown in seconds compares."""
    moment = datetime.fromisoformat(timestamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def iso_timestamp(timestamp: Any) -> str:
    """A bar's or decision's time as ISO 8601 text (``pandas.Timestamp``, ``datetime`` or text)."""
    if timestamp is None:
        raise ValueError("an alert needs the timestamp of the bar or decision it is about")
    return str(timestamp.isoformat() if hasattr(timestamp, "isoformat") else timestamp)


@dataclass(frozen=True)
class Alert:
    """One alert: which ``rule`` fired at which ``level``, a ``message`` for people, the ``value``
    and the ``threshold`` it reached, the ``timestamp`` (ISO 8601) of the bar or decision it is about,
    ``context`` (model version, symbol, the statistics behind it) and ``bar``, the bar's index in its
    series (what a cooldown in bars counts)."""

    rule: str
    level: Level
    message: str
    value: float | None
    threshold: float | None
    timestamp: str
    context: Mapping[str, Any] = field(default_factory=dict)
    bar: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What the cooldown is kept per: ``(rule, level)``."""
        return self.rule, self.level.label

    def to_dict(self) -> dict[str, Any]:
        """The alert as JSON data: one line of the JSON-lines file, one webhook body."""
        return {
            "rule": self.rule,
            "level": self.level.label,
            "message": self.message,
            "value": finite_or_none(self.value),
            "threshold": finite_or_none(self.threshold),
            "timestamp": self.timestamp,
            "bar": self.bar,
            "context": json_data(dict(self.context)),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alert:
        return cls(
            rule=str(data["rule"]),
            level=Level.of(data["level"]),
            message=str(data.get("message", "")),
            value=data.get("value"),
            threshold=data.get("threshold"),
            timestamp=str(data["timestamp"]),
            context=dict(data.get("context") or {}),
            bar=None if data.get("bar") is None else int(data["bar"]),
        )
