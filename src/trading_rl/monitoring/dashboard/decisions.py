"""The served model's decision log as the dashboard reads it: one JSON object per line, one decision
per line, appended while the dashboard runs.

**Schema** (``DECISION_FIELDS``): ``timestamp``, ``symbol`` and ``target_position`` are required;
the others may be absent or ``null``. Extra keys are kept out of the table and never refused, so the
writer may log more than the dashboard shows. One level of nesting is flattened with ``_``
(``{"safeguard": {"verdict": ..., "rule": ...}}`` reads as ``safeguard_verdict`` / ``safeguard_rule``)
and ``FIELD_ALIASES`` maps the names of ``export.inference.Signal`` (``raw_action``, ...) onto the
table's. A line that is not a JSON object, lacks a required field or holds a wrong type is left out
and named (file, line, field) in ``DecisionsRead.problems``: the panel shows the message and every
valid decision, and nothing raises.

**Tail reading.** :class:`DecisionLogReader` keeps its byte offset and parses only the lines added
since its last read, so a page redrawn twice a second does not re-parse a long log. A last line
without its newline is a write in progress: it is read once its newline arrives. A file that shrank
or was replaced (another inode) is read again from its start.
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class DecisionField:
    """One field of a decision line: its ``name``, ``kind`` (``"timestamp"``, ``"text"`` or
    ``"number"``), whether it is ``required`` and what it means."""

    name: str
    kind: str
    required: bool
    meaning: str


DECISION_FIELDS: tuple[DecisionField, ...] = (
    DecisionField("timestamp", "timestamp", True, "the bar the decision is for, ISO 8601"),
    DecisionField("symbol", "text", True, "the traded symbol"),
    DecisionField("target_position", "number", True, "the position the agent asks for (signed)"),
    DecisionField("kind", "text", False, "the signal: buy, sell or hold"),
    DecisionField("units", "number", False, "units to trade, signed (+ buy, - sell); 0 when nothing trades"),
    DecisionField("action_raw", "number", False, "the policy's action in [-1, 1]"),
    DecisionField("action_smoothed", "number", False, "the action after the env's smoothing"),
    DecisionField("safeguard_verdict", "text", False, "what the safeguards said (passed, blocked)"),
    DecisionField("safeguard_rule", "text", False, "the safeguard rule that blocked the trade"),
    DecisionField("confidence", "number", False, "the model's confidence in the decision"),
    DecisionField("model_version", "text", False, "the registered model version that decided"),
)
FIELD_NAMES: tuple[str, ...] = tuple(spec.name for spec in DECISION_FIELDS)
# Other spellings of a field (``export.inference.Signal``'s attribute names, nested signal blocks).
FIELD_ALIASES: dict[str, str] = {
    "raw_action": "action_raw",
    "smoothed_action": "action_smoothed",
    "signal_kind": "kind",
    "signal_units": "units",
    "blocked_by": "safeguard_rule",
}
# A served model's log line for a request it refused (``serving.decider``): not a decision.
REFUSED = "refused"
# Problems kept per log: a log rewritten by something else names its first lines, not a million.
MAX_PROBLEMS = 20
# Decisions a reader keeps (the newest): a page open for months does not hold a year of decisions.
KEPT_DECISIONS = 10_000


class DecisionLineError(ValueError):
    """One line of the decision log that is not a decision; the message names file, line and field."""


def _flat(data: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update({f"{key}_{inner}": item for inner, item in value.items()})
        else:
            flat[key] = value
    for alias, name in FIELD_ALIASES.items():
        if alias in flat and name not in flat:
            flat[name] = flat[alias]
    _read_served_signal(flat)
    return flat


def _read_served_signal(flat: dict[str, Any]) -> None:
    """The served model's signal block (``serving.decider``: ``{"action": "BUY" | "SELL" | "HOLD",
    "units": unsigned}``) as ``kind`` and signed ``units``."""
    action = flat.get("signal_action")
    if "kind" in flat or not isinstance(action, str):
        return
    flat["kind"] = action.lower()
    units = flat.get("signal_units")
    if isinstance(units, (int, float)) and not isinstance(units, bool):
        flat["units"] = -abs(units) if flat["kind"] == "sell" else abs(units)


def _checked_value(spec: DecisionField, value: Any) -> Any:
    """``value`` as the field's kind, or ``ValueError`` saying what it is instead."""
    if spec.kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"must be a finite number, got {value!r}")
        return float(value)
    if spec.kind == "timestamp":
        if not isinstance(value, str):
            raise ValueError(f"must be ISO 8601 text, got {value!r}")
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"must be ISO 8601 text, got {value!r}") from None
        return value
    if spec.name == "model_version" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or (spec.required and not value.strip()):
        raise ValueError(f"must be {'non-empty ' if spec.required else ''}text, got {value!r}")
    return value


def parse_decision(line: bytes, number: int, path: Path) -> dict[str, Any] | None:
    """The decision on ``line`` (1-based ``number`` of ``path``) as ``{field: value}`` over
    ``FIELD_NAMES`` (absent optional fields ``None``); ``None`` for a request the served model
    refused (``status: refused``: logged, not a decision); raises :class:`DecisionLineError`."""
    where = f"{path}: line {number}"
    try:
        data = json.loads(line.decode("utf-8"))
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise DecisionLineError(f"{where} is not JSON ({error}); the line is left out") from None
    if not isinstance(data, dict):
        raise DecisionLineError(f"{where} is {type(data).__name__}, not a decision object; the line is left out")
    if data.get("status") == REFUSED:
        return None
    flat = _flat(data)
    decision: dict[str, Any] = {}
    for spec in DECISION_FIELDS:
        value = flat.get(spec.name)
        if value is None:
            if spec.required:
                raise DecisionLineError(f"{where} lacks field '{spec.name}' ({spec.meaning}); the line is left out")
            decision[spec.name] = None
            continue
        try:
            decision[spec.name] = _checked_value(spec, value)
        except ValueError as error:
            raise DecisionLineError(f"{where}: field '{spec.name}' {error}; the line is left out") from None
    return decision


@dataclass
class DecisionsRead:
    """What the log holds now: ``decisions`` (one row per valid line, oldest first: the column
    ``line`` and ``FIELD_NAMES``, plus ``time``, the timestamp parsed as UTC), the ``problems`` of
    the lines left out (at most ``MAX_PROBLEMS``; ``skipped`` counts them all), whether the file
    ``exists``, and ``count``, the valid lines of the whole log (``decisions`` keeps the newest
    ``KEPT_DECISIONS``)."""

    path: Path
    exists: bool
    decisions: pd.DataFrame
    problems: list[str] = field(default_factory=list)
    skipped: int = 0
    count: int = 0


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["line", *FIELD_NAMES])
    frame["time"] = pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601")
    return frame


class DecisionLogReader:
    """Reads the decision log at ``path`` incrementally: each :meth:`read` parses only the complete
    lines appended since the last one (see the module's "Tail reading")."""

    def __init__(self, path: str | Path, keep: int = KEPT_DECISIONS) -> None:
        self.path = Path(path)
        self.keep = keep
        self._reset(None)

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self._identity = identity
        self._offset = 0
        self._lines = 0
        self._rows: deque[dict[str, Any]] = deque(maxlen=self.keep)
        self._problems: list[str] = []
        self._skipped = 0
        self._count = 0
        self._frame: pd.DataFrame | None = None

    def read(self) -> DecisionsRead:
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            self._reset(None)
            return DecisionsRead(self.path, False, _frame([]))
        identity = (status.st_dev, status.st_ino)
        if identity != self._identity or status.st_size < self._offset:
            self._reset(identity)
        if status.st_size > self._offset:
            self._consume()
        if self._frame is None:
            self._frame = _frame(list(self._rows))
        return DecisionsRead(self.path, True, self._frame, list(self._problems), self._skipped, self._count)

    def _consume(self) -> None:
        with open(self.path, "rb") as file:
            file.seek(self._offset)
            for raw in file:  # line by line: a long log's first read does not hold it all at once
                if not raw.endswith(b"\n"):
                    break  # a line still being written: read once its newline is there
                self._offset += len(raw)
                self._lines += 1
                if not raw.strip():
                    continue
                self._frame = None
                try:
                    decision = parse_decision(raw[:-1], self._lines, self.path)
                except DecisionLineError as error:
                    self._skipped += 1
                    if len(self._problems) < MAX_PROBLEMS:
                        self._problems.append(str(error))
                    continue
                if decision is not None:
                    self._rows.append({"line": self._lines, **decision})
                    self._count += 1


def read_decisions(path: str | Path) -> DecisionsRead:
    """The whole decision log at ``path``, read once (the app keeps a :class:`DecisionLogReader`)."""
    return DecisionLogReader(path).read()
