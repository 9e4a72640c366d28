"""One decision request of the served model, checked field by field before anything is computed.

A request is plain JSON (what the scoring server hands the model, ``{"inputs": [request]}``)::

    {
      "symbol": "sp500",
      "bars": {"timestamp": [...], "open": [...], "high": [...], "low": [...], "close": [...], "volume": [...]},
      "portfolio": {"cash": 100000.0, "position": 0.0, "entry_price": 0.0, "time_in_position": 0,
                    "last_action": null},
      "reference_price": null
    }

``bars`` is column-oriented, oldest bar first, the latest closed bar last; ``portfolio`` is
``export.PortfolioState`` by field (only ``cash`` is required); ``reference_price`` (optional) is the
price sizes are estimated at (the expected fill: the next open; default the latest close).

:func:`parse_request` turns it into a :class:`DecisionRequest` or raises :class:`RequestError`
naming the first field that is wrong (``bars.close``, ``portfolio.cash`` ...) and why. Nothing from
the request is evaluated: numbers must be JSON numbers, timestamps ISO 8601 strings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.export.inference import BAR_COLUMNS, PortfolioState

TIMESTAMP_FIELD = "timestamp"
BAR_FIELDS = (TIMESTAMP_FIELD, *BAR_COLUMNS)
REQUEST_FIELDS = ("symbol", "bars", "portfolio", "reference_price")
PORTFOLIO_FIELDS = tuple(PortfolioState.__dataclass_fields__)
# A JSON number as the parsed request holds it (``bool`` is a subclass of ``int``, not a number here).
NUMBER_TYPES = frozenset({int, float})
# The longest JSON text of a float (``-2.2250738585072014e-308``) and the comma after it.
FLOAT_JSON_BYTES = 25
# The request's bar spacing (median) may differ from the model's by this factor either way.
BAR_INTERVAL_TOLERANCE = 1.5


class RequestError(ValueError):
    """A request the model refuses: ``field`` is the dotted field (``bars.close``), ``reason`` why."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class RequestLimits:
    """What the model accepts: its symbol, bar spacing and time zone, the bars its observation
    needs, whether it may hold a short position, and the largest request (compact JSON bytes)."""

    symbol: str
    min_bars: int
    bar_interval: pd.Timedelta
    timezone: str | None
    allow_short: bool
    max_request_bytes: int


@dataclass(frozen=True)
class DecisionRequest:
    """A checked request: what ``SignalEngine.checked_signal`` takes, as it takes it."""

    index: pd.DatetimeIndex  # the bars' timestamps in the model's time zone, strictly increasing
    ohlcv: np.ndarray  # float64 rows of BAR_COLUMNS, finite, prices > 0, volume >= 0
    portfolio: PortfolioState
    reference_price: float | None


def _shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: a message quotes at most the start of what it refuses."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def request_size(raw: Any) -> int:
    """Bytes of ``raw`` as compact JSON: the size the limit applies to (the body the scoring server
    parsed, without its whitespace and the ``{"inputs": [...]}`` wrapper)."""
    return len(json.dumps(raw, separators=(",", ":"), default=str).encode())


def _size_bound(raw: Any) -> int | None:
    """At least :func:`request_size` of ``raw``, without writing its floats as text (most of the
    cost): the bar columns that hold only floats counted at ``FLOAT_JSON_BYTES`` a value, the rest
    written out. ``None`` for a request without a ``bars`` object of lists."""
    bars = raw.get("bars") if isinstance(raw, Mapping) else None
    if not isinstance(bars, Mapping) or not all(isinstance(values, list) for values in bars.values()):
        return None
    floats = [name for name in BAR_COLUMNS if name in bars and set(map(type, bars[name])) <= {float}]
    rest = {**raw, "bars": {name: [] if name in floats else values for name, values in bars.items()}}
    return request_size(rest) + sum(FLOAT_JSON_BYTES * len(bars[name]) for name in floats)


def _mapping(raw: Any, field: str, known: tuple[str, ...]) -> Mapping[str, Any]:
    """``raw`` as the JSON object ``field`` (``""``: the request itself) with no key outside ``known``."""
    if not isinstance(raw, Mapping):
        got = type(raw).__name__
        raise RequestError(field or "inputs", f"must be a JSON object with keys {list(known)}, got {got}")
    unknown = [key for key in raw if key not in known]
    if unknown:
        key = str(unknown[0])[:80]
        name = f"{field}.{key}" if field else key
        raise RequestError(name, f"unknown key; known: {list(known)}")
    return raw


def _unparsed(values: list[str]) -> str:
    """Why ``values`` are not one column of ISO 8601 timestamps: the first that is none, or a mix of
    values with and without a UTC offset."""
    offsets = set()
    for row, value in enumerate(values):
        try:
            stamp = pd.Timestamp(value)
        except (ValueError, TypeError, OverflowError):
            return f"row {row} is {_shown(value)}, not an ISO 8601 timestamp"
        offsets.add(stamp.tzinfo is not None)
        if len(offsets) > 1:
            return f"row {row} ({_shown(value)}) and the rows before it mix timestamps with and without a UTC offset"
    return "not ISO 8601 timestamps of one kind"


def _timestamps(values: list[Any], limits: RequestLimits) -> pd.DatetimeIndex:
    field = f"bars.{TIMESTAMP_FIELD}"
    if set(map(type, values)) != {str}:
        row, value = next((row, value) for row, value in enumerate(values) if not isinstance(value, str))
        raise RequestError(field, f"row {row} is {_shown(value)}, not an ISO 8601 string")
    try:
        parsed = pd.DatetimeIndex(pd.to_datetime(values, format="ISO8601"))
    except (ValueError, TypeError, OverflowError):
        raise RequestError(field, _unparsed(values)) from None
    if parsed.tz is None and limits.timezone is not None:
        raise RequestError(field, f"timestamps carry no UTC offset, the model's bars are in {limits.timezone}")
    if parsed.tz is not None:
        if limits.timezone is None:
            raise RequestError(
                field, "timestamps carry a UTC offset, the model's bars do not: send them as the training file has them"
            )
        parsed = parsed.tz_convert(limits.timezone)
    steps = np.diff(parsed.asi8)
    if (steps == 0).any():
        row = int(np.flatnonzero(steps == 0)[0]) + 1
        raise RequestError(field, f"duplicate timestamp {parsed[row].isoformat()} (rows {row - 1} and {row})")
    if (steps < 0).any():
        row = int(np.flatnonzero(steps < 0)[0]) + 1
        raise RequestError(
            field,
            f"not in time order: row {row} ({parsed[row].isoformat()}) comes before row {row - 1} "
            f"({parsed[row - 1].isoformat()}); send the oldest bar first",
        )
    spacing = pd.Timedelta(int(np.median(steps)), unit="ns")
    ratio = spacing / limits.bar_interval
    if not 1.0 / BAR_INTERVAL_TOLERANCE <= ratio <= BAR_INTERVAL_TOLERANCE:
        raise RequestError(
            field,
            f"bars are {spacing} apart (median), the model ({limits.symbol}) was trained on bars "
            f"{limits.bar_interval} apart: wrong bar frequency",
        )
    return parsed.rename(TIMESTAMP_FIELD)


def _prices(bars: Mapping[str, list[Any]], index: pd.DatetimeIndex) -> np.ndarray:
    columns: dict[str, np.ndarray] = {}
    for name in BAR_COLUMNS:
        field = f"bars.{name}"
        values = bars[name]
        if not set(map(type, values)) <= NUMBER_TYPES:  # the one scan of every value; rows only when one is not
            row, value = next((row, value) for row, value in enumerate(values) if not _is_number(value))
            raise RequestError(field, f"row {row} ({index[row].isoformat()}) is {_shown(value)}, not a number")
        array = np.asarray(values, dtype=np.float64)
        bad = ~np.isfinite(array)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise RequestError(field, f"row {row} ({index[row].isoformat()}) is {_shown(array[row])}: NaN/inf")
        bad = array < 0.0 if name == "volume" else array <= 0.0
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            rule = "volume must be >= 0" if name == "volume" else "prices must be > 0"
            raise RequestError(field, f"row {row} ({index[row].isoformat()}) is {_shown(array[row])}: {rule}")
        columns[name] = array
    body = np.maximum(columns["open"], columns["close"]), np.minimum(columns["open"], columns["close"])
    for name, bad in (("high", columns["high"] < body[0]), ("low", columns["low"] > body[1])):
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            side = "below max(open, close)" if name == "high" else "above min(open, close)"
            raise RequestError(
                f"bars.{name}", f"row {row} ({index[row].isoformat()}) is {_shown(columns[name][row])}, {side}"
            )
    return np.column_stack([columns[name] for name in BAR_COLUMNS])


def _bars(raw: Any, limits: RequestLimits) -> tuple[pd.DatetimeIndex, np.ndarray]:
    bars = _mapping(raw, "bars", BAR_FIELDS)
    for name in BAR_FIELDS:
        if name not in bars:
            raise RequestError(f"bars.{name}", f"missing; bars need {list(BAR_FIELDS)} as lists, oldest first")
        if not isinstance(bars[name], list):
            raise RequestError(f"bars.{name}", f"must be a list (one value per bar), got {type(bars[name]).__name__}")
    lengths = {name: len(bars[name]) for name in BAR_FIELDS}
    n_bars = lengths[TIMESTAMP_FIELD]
    for name, length in lengths.items():
        if length != n_bars:
            raise RequestError(f"bars.{name}", f"has {length} values, bars.timestamp has {n_bars}")
    if n_bars < limits.min_bars:
        raise RequestError(
            "bars", f"too few bars: {n_bars} given, the model needs at least {limits.min_bars} (oldest first)"
        )
    index = _timestamps(bars[TIMESTAMP_FIELD], limits)
    return index, _prices(bars, index)


def _portfolio(raw: Any, limits: RequestLimits) -> PortfolioState:
    portfolio = _mapping(raw, "portfolio", PORTFOLIO_FIELDS)
    if "cash" not in portfolio:
        raise RequestError("portfolio.cash", "missing (the account's cash)")
    values: dict[str, Any] = {}
    for name in ("cash", "position", "entry_price"):
        if name in portfolio:
            value = portfolio[name]
            if not _is_number(value) or not math.isfinite(value):
                raise RequestError(f"portfolio.{name}", f"must be a finite number, got {_shown(value)}")
            values[name] = float(value)
    position = values.get("position", 0.0)
    if position != 0.0 and values.get("entry_price", 0.0) <= 0.0:
        raise RequestError("portfolio.entry_price", "must be > 0 while a position is open")
    if position < 0.0 and not limits.allow_short:
        raise RequestError(
            "portfolio.position", f"is {_shown(position)}: the model trades long only (allow_short false)"
        )
    if "time_in_position" in portfolio:
        value = portfolio["time_in_position"]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RequestError("portfolio.time_in_position", f"must be an integer >= 0, got {_shown(value)}")
        values["time_in_position"] = value
    if portfolio.get("last_action") is not None:
        value = portfolio["last_action"]
        if not _is_number(value) or not -1.0 <= value <= 1.0:
            raise RequestError(
                "portfolio.last_action", f"must be a number in [-1, 1] or null (first decision), got {_shown(value)}"
            )
        values["last_action"] = float(value)
    return PortfolioState(**values)


def parse_request(raw: Any, limits: RequestLimits) -> DecisionRequest:
    """``raw`` (one request, plain JSON) checked against ``limits``; ``RequestError`` naming the
    first wrong field. The checks' order: size, keys, symbol, bars (columns, count, timestamps,
    numbers), portfolio, reference price."""
    bound = _size_bound(raw)
    if bound is None or bound > limits.max_request_bytes:  # near or over the limit: measured exactly
        size = request_size(raw)
        if size > limits.max_request_bytes:
            raise RequestError("body", f"{size} bytes as compact JSON, over the limit of {limits.max_request_bytes}")
    request = _mapping(raw, "", REQUEST_FIELDS)
    for name in ("symbol", "bars", "portfolio"):
        if name not in request:
            raise RequestError(name, f"missing; a request has {list(REQUEST_FIELDS)} (reference_price optional)")
    if request["symbol"] != limits.symbol:
        raise RequestError("symbol", f"the model trades {limits.symbol!r}, got {_shown(request['symbol'])}")
    index, ohlcv = _bars(request["bars"], limits)
    portfolio = _portfolio(request["portfolio"], limits)
    reference = request.get("reference_price")
    if reference is not None and not (_is_number(reference) and math.isfinite(reference) and reference > 0.0):
        raise RequestError(
            "reference_price", f"must be a finite number > 0 or null (latest close), got {_shown(reference)}"
        )
    return DecisionRequest(index, ohlcv, portfolio, None if reference is None else float(reference))
