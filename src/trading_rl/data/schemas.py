"""Pandera schemas for prices and feature tables, and validators with readable errors.

The schemas validate *records*: the ``timestamp`` index moved into a column. That way every
failure pandera collects carries the row position, which maps back to the exact timestamp and
source values even when timestamps are duplicated or time-zone aware.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaError, SchemaErrorReason, SchemaErrors
from pandera.typing import Series

from trading_rl.data.sources import TIMESTAMP

_FAILING_ROWS_SHOWN = 5
_NOT_A_FEATURE = r"^(?!timestamp$)"


class PriceValidationError(ValueError):
    """Prices broke the price schema; the message names symbol, source, column, check and rows."""


class FeatureValidationError(ValueError):
    """A feature table broke the feature schema; the message names table, column, check and rows."""


class TimestampedRecords(pa.DataFrameModel):
    """Rows keyed by unique, increasing timestamps (naive or time-zone aware).

    Subclasses see inherited checks under their method names (pandera drops ``name=`` on
    inheritance), so the method names are the check names.
    """

    timestamp: Series[Any] = pa.Field(unique=True)

    @pa.check(TIMESTAMP)
    def datetime_dtype(cls, timestamps: pd.Series) -> bool:
        return pd.api.types.is_datetime64_any_dtype(timestamps)  # naive or any time zone

    @pa.check(TIMESTAMP)
    def timestamps_increasing(cls, timestamps: pd.Series) -> pd.Series:
        return ~timestamps.diff().lt(pd.Timedelta(0))

    @pa.dataframe_check()  # called: pandera types only the called form as making a classmethod
    def non_empty(cls, records: pd.DataFrame) -> bool:
        return len(records) > 0


class PriceSchema(TimestampedRecords):
    """OHLCV bars: finite positive prices, a bar range that contains open and close, volume >= 0."""

    open: Series[float] = pa.Field(gt=0, coerce=True)
    high: Series[float] = pa.Field(gt=0, coerce=True)
    low: Series[float] = pa.Field(gt=0, coerce=True)
    close: Series[float] = pa.Field(gt=0, coerce=True)
    volume: Series[float] = pa.Field(ge=0, coerce=True)
    adj_close: Series[float] | None = pa.Field(gt=0, coerce=True)

    @pa.check("open", "high", "low", "close", "volume", "adj_close", name="finite")
    def _finite(cls, values: pd.Series) -> pd.Series:
        return pd.Series(np.isfinite(values), index=values.index)

    # Compared as numbers, with missing or non-numeric cells left to the checks that report them,
    # so a text cell in one column does not hide broken bars elsewhere.
    @pa.dataframe_check(name="high >= max(open, close)", column="high", compared=("open", "close"))
    def _high_is_bar_maximum(cls, records: pd.DataFrame, *, column: str, compared: tuple) -> pd.Series:
        values = _as_numbers(records, column, compared)
        return ~(values[column] < values[list(compared)].max(axis=1))

    @pa.dataframe_check(name="low <= min(open, close)", column="low", compared=("open", "close"))
    def _low_is_bar_minimum(cls, records: pd.DataFrame, *, column: str, compared: tuple) -> pd.Series:
        values = _as_numbers(records, column, compared)
        return ~(values[column] > values[list(compared)].min(axis=1))


class FeatureSchema(TimestampedRecords):
    """Model inputs: at least one column, every value a finite float."""

    features: Series[float] = pa.Field(alias=_NOT_A_FEATURE, regex=True, coerce=True, required=False)

    @pa.dataframe_check(name="at least one feature column")
    def _has_features(cls, records: pd.DataFrame) -> bool:
        return records.columns.drop(TIMESTAMP, errors="ignore").size > 0

    @pa.check(_NOT_A_FEATURE, regex=True, name="finite")
    def _finite(cls, values: pd.Series) -> pd.Series:
        return pd.Series(np.isfinite(values), index=values.index)


def validate_prices(
    prices: pd.DataFrame,
    symbol: str,
    min_rows: int = 50,
    *,
    source_name: str | None = None,
) -> pd.DataFrame:
    """Return ``prices`` with float64 columns, or raise ``PriceValidationError`` listing every failure.

    ``source_name`` defaults to ``prices.attrs["source"]``, which ``load_prices`` sets.
    """
    source_name = source_name or prices.attrs.get("source")
    subject = f"prices for symbol '{symbol}'" + (f" (from {source_name})" if source_name else "")
    schema = copy.deepcopy(PriceSchema.to_schema())  # pandera caches the model's schema
    schema.checks = [
        *schema.checks,
        pa.Check(_has_min_rows, name=f"at least {min_rows} rows", min_rows=min_rows),
    ]
    return _validate(schema, prices, subject, PriceValidationError)


def validate_features(features: pd.DataFrame, name: str) -> pd.DataFrame:
    """Return ``features`` as float64, or raise ``FeatureValidationError`` listing every failure."""
    return _validate(FeatureSchema.to_schema(), features, f"features '{name}'", FeatureValidationError)


def _has_min_rows(records: pd.DataFrame, *, min_rows: int) -> bool:
    return len(records) >= min_rows


def _as_numbers(records: pd.DataFrame, column: str, compared: tuple) -> pd.DataFrame:
    return records[[column, *compared]].apply(pd.to_numeric, errors="coerce")


def _validate(
    schema: pa.DataFrameSchema, frame: pd.DataFrame, subject: str, error_type: type[ValueError]
) -> pd.DataFrame:
    if frame.index.name != TIMESTAMP or TIMESTAMP in frame.columns:
        raise error_type(
            f"{subject} failed validation: the timestamps must be the index, named '{TIMESTAMP}' "
            f"(index name {frame.index.name!r}, columns {list(frame.columns)})"
        )
    try:
        with warnings.catch_warnings():  # pandera's own failure-case concatenation warns on pandas 2.x
            warnings.filterwarnings("ignore", category=FutureWarning, module="pandera")
            records = schema.validate(frame.reset_index(), lazy=True)
    except SchemaErrors as errors:
        failures = "; ".join(_describe_failures(errors.schema_errors, frame))
        raise error_type(f"{subject} failed validation: {failures}") from errors
    validated = records.set_index(TIMESTAMP)
    validated.attrs = dict(frame.attrs)
    return validated


def _describe_failures(errors: Iterable[SchemaError], frame: pd.DataFrame) -> list[str]:
    """One sentence per (column, check); checks that crashed on already-reported bad input are dropped."""
    errors = list(errors)
    reported = [e for e in errors if e.reason_code != SchemaErrorReason.CHECK_ERROR] or errors
    sentences: dict[tuple, str] = {}
    for error in reported:
        column, check = _column_and_check(error)
        if (column, check) not in sentences:
            sentences[column, check] = _describe_failure(error, column, check, frame)
    return list(sentences.values())


def _column_and_check(error: SchemaError) -> tuple[str | None, str]:
    reason = error.reason_code
    if reason == SchemaErrorReason.COLUMN_NOT_IN_DATAFRAME:
        return str(error.failure_cases), "column present"
    column = error.schema.name if isinstance(error.schema, pa.Column) else None
    if reason in (SchemaErrorReason.DATATYPE_COERCION, SchemaErrorReason.WRONG_DATATYPE):
        dtype = str(error.schema.dtype)
        return column, "numeric" if dtype.startswith("float") else f"dtype {dtype}"
    if reason == SchemaErrorReason.SERIES_CONTAINS_NULLS:
        return column, "no missing values (NaN/NaT)"
    if reason == SchemaErrorReason.SERIES_CONTAINS_DUPLICATES:
        return column, "unique"
    check = error.check
    statistics = getattr(check, "statistics", None) or {}
    # Built-in checks carry their bound in ``error`` ("greater_than(0)"), custom ones in ``name``.
    name = getattr(check, "error", None) or getattr(check, "name", None) or str(check)
    return column or statistics.get("column"), name


def _describe_failure(error: SchemaError, column: str | None, check: str, frame: pd.DataFrame) -> str:
    named = f"column '{column}' check '{check}'" if column else f"check '{check}'"
    cases = error.failure_cases
    if error.reason_code == SchemaErrorReason.COLUMN_NOT_IN_DATAFRAME:
        return f"{named} failed: the column is missing (columns: {list(frame.columns)})"
    positions = _failing_positions(cases)
    if not positions:
        if error.reason_code == SchemaErrorReason.CHECK_ERROR:
            return f"{named} could not run: {cases}"
        return f"{named} failed for the table as a whole ({_describe_table(frame, column)})"
    statistics = getattr(error.check, "statistics", None) or {}
    shown = [c for c in (column, *statistics.get("compared", ())) if c in frame.columns]
    rows = ", ".join(_describe_row(frame, position, shown) for position in positions[:_FAILING_ROWS_SHOWN])
    problem = " (non-numeric values)" if check == "numeric" else ""
    return f"{named} failed on {len(positions)} rows{problem}; first failing rows: {rows}"


def _describe_table(frame: pd.DataFrame, column: str | None) -> str:
    if column == TIMESTAMP:
        return f"{len(frame)} rows, index dtype {frame.index.dtype}"
    if column in frame.columns:
        return f"{len(frame)} rows, dtype {frame[column].dtype}"
    return f"{len(frame)} rows, columns {list(frame.columns)}"


def _failing_positions(cases: object) -> list[int]:
    if not isinstance(cases, pd.DataFrame) or "index" not in cases:
        return []
    return [int(position) for position in pd.unique(cases["index"].dropna())]


def _describe_row(frame: pd.DataFrame, position: int, columns: list[str]) -> str:
    timestamp = frame.index[position]
    values = ", ".join(f"{c}={_format_value(frame[c].iloc[position])}" for c in columns)
    return f"{format_timestamp(timestamp)} (row {position}{': ' + values if values else ''})"


def format_timestamp(timestamp: pd.Timestamp) -> str:
    if pd.isna(timestamp):
        return "NaT"
    if timestamp.tzinfo is None and timestamp == timestamp.normalize():
        return str(timestamp.date())
    return str(timestamp)


def _format_value(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)
