"""Price sources: the real daily indexes packaged with ``arch`` and users' own OHLCV files.

Loading only renames and parses; it never sorts, deduplicates or fixes values, so that
``validate_prices`` sees the data exactly as the source holds it.
"""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

import pandas as pd
from pandas.tseries.api import guess_datetime_format

# The one home of the price columns: an env needs the OHLC bars, a price table (and the features) OHLCV.
OHLC_COLUMNS = ("open", "high", "low", "close")
PRICE_COLUMNS = (*OHLC_COLUMNS, "volume")
ADJUSTED_CLOSE = "adj_close"
TIMESTAMP = "timestamp"
RAW_PRICES_DIR = Path("data") / "01_raw" / "prices"

_PACKAGED_MODULES = {"sp500": "arch.data.sp500", "nasdaq": "arch.data.nasdaq"}
PACKAGED_SYMBOLS = tuple(_PACKAGED_MODULES)

# Keys are column names lower-cased with spaces, underscores and hyphens removed.
_COLUMN_ALIASES = {
    "open": "open",
    "high": "high",
    "low": "low",
    "close": "close",
    "volume": "volume",
    "adjclose": ADJUSTED_CLOSE,
    "adjustedclose": ADJUSTED_CLOSE,
}
_TIMESTAMP_NAMES = ("timestamp", "datetime", "date", "time")  # preference order
_FILE_READERS = {".csv": pd.read_csv, ".parquet": pd.read_parquet}
# Epoch magnitudes (in seconds since 1970 these are the years ~2001 onwards) -> unit.
_EPOCH_UNITS = ((1e17, "ns"), (1e14, "us"), (1e11, "ms"), (1e9, "s"))
# A time of day followed by a UTC offset or "Z": "2020-01-02 09:30:00+01:00", "...T14:30Z".
_UTC_OFFSET = r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:Z|[+-]\d{2}:?\d{2})$"


class PriceDataError(ValueError):
    """A price source could not be found, read or interpreted."""


def load_prices(
    symbol: str,
    source: str = "packaged",
    path: str | Path | None = None,
    *,
    root: str | Path | None = None,
) -> pd.DataFrame:
    """Load OHLCV bars for ``symbol`` with lower-case columns and a ``timestamp`` index.

    ``source="packaged"`` reads the daily S&P 500 / NASDAQ Composite shipped with ``arch``;
    ``source="file"`` reads ``path`` (csv or parquet) or, without one,
    ``<root>/data/01_raw/prices/<symbol>.csv|.parquet``. Rows keep the source's order and
    dtypes; ``DataFrame.attrs["source"]`` records where they came from for error messages.
    """
    if source == "packaged":
        if path is not None:
            raise ValueError("path is only used with source='file'")
        frame, source_name = _read_packaged(symbol)
    elif source == "file":
        file = _resolve_file(symbol, path, Path(root) if root is not None else Path())
        frame, source_name = _read_file(file), str(file)
    else:
        raise ValueError(f"unknown price source {source!r}; use 'packaged' or 'file'")
    prices = _standardise(frame, source_name)
    prices.attrs["source"] = source_name
    return prices


def _read_packaged(symbol: str) -> tuple[pd.DataFrame, str]:
    key = symbol.lower()
    if key not in _PACKAGED_MODULES:
        raise PriceDataError(
            f"unknown packaged symbol {symbol!r}; available: {', '.join(PACKAGED_SYMBOLS)} "
            "(use source='file' for your own data)"
        )
    module = _PACKAGED_MODULES[key]
    return importlib.import_module(module).load(), module


def _resolve_file(symbol: str, path: str | Path | None, root: Path) -> Path:
    if path is not None:
        path = Path(path)
        return path if path.is_absolute() else root / path
    directory = root / RAW_PRICES_DIR
    matches = (
        sorted(
            candidate
            for candidate in directory.iterdir()
            if candidate.suffix.lower() in _FILE_READERS and candidate.stem.lower() == symbol.lower()
        )
        if directory.is_dir()
        else []
    )
    if not matches:
        raise PriceDataError(f"no price file for symbol {symbol!r}: expected {directory / symbol}.csv or .parquet")
    if len(matches) > 1:
        raise PriceDataError(
            f"several price files for symbol {symbol!r}: {', '.join(map(str, matches))}; pass path= to choose one"
        )
    return matches[0]


def _read_file(file: Path) -> pd.DataFrame:
    reader = _FILE_READERS.get(file.suffix.lower())
    if reader is None:
        raise PriceDataError(f"unsupported price file type {file}: use .csv or .parquet")
    if not file.is_file():
        raise PriceDataError(f"price file not found: {file}")
    if file.stat().st_size == 0:
        raise PriceDataError(f"price file is empty: {file}")
    try:
        return reader(file)
    except (ValueError, OSError) as exc:  # parser, encoding and arrow errors derive from these
        raise PriceDataError(f"could not read price file {file}: {exc}") from exc


def _standardise(frame: pd.DataFrame, source_name: str) -> pd.DataFrame:
    """Rename recognised columns and move the timestamps into the index, nothing else."""
    by_key: dict[str, list[str]] = {}
    for name in frame.columns:
        by_key.setdefault(re.sub(r"[\s_\-]", "", str(name).lower()), []).append(name)
    for key, names in by_key.items():
        if len(names) > 1 and (key in _COLUMN_ALIASES or key in _TIMESTAMP_NAMES):
            raise PriceDataError(f"{source_name}: columns {names} are the same column in another case")

    timestamps = _timestamp_index(frame, by_key, source_name)
    renames = {by_key[key][0]: column for key, column in _COLUMN_ALIASES.items() if key in by_key}
    order = [column for column in (*PRICE_COLUMNS, ADJUSTED_CLOSE) if column in renames.values()]
    prices = frame[list(renames)].rename(columns=renames)[order]
    prices.index = timestamps
    return prices


def _timestamp_index(frame: pd.DataFrame, by_key: dict[str, list[str]], source_name: str) -> pd.DatetimeIndex:
    found = [name for name in _TIMESTAMP_NAMES if name in by_key]
    if not found:
        if isinstance(frame.index, pd.DatetimeIndex):
            return frame.index.rename(TIMESTAMP)
        index_key = re.sub(r"[\s_\-]", "", str(frame.index.name).lower())
        if index_key in _TIMESTAMP_NAMES:
            return _parse_timestamps(frame.index.to_series(), source_name, str(frame.index.name))
        raise PriceDataError(
            f"{source_name}: no timestamp column (looked for {', '.join(_TIMESTAMP_NAMES)}, "
            f"any case) and the index is not datetime; columns: {list(frame.columns)}"
        )
    column = by_key[found[0]][0]
    values = frame[column]
    if found[0] == "date" and "time" in by_key:  # separate date and time-of-day columns
        time_column = by_key["time"][0]
        values = values.astype(str) + " " + frame[time_column].astype(str)
        column = f"{column} + {time_column}"
    return _parse_timestamps(values, source_name, column)


def _parse_timestamps(values: pd.Series, source_name: str, column: str) -> pd.DatetimeIndex:
    """Parse a timestamp column; mixed UTC offsets (DST in local-time exports) become UTC."""
    values = values.reset_index(drop=True)
    if pd.api.types.is_datetime64_any_dtype(values):
        return pd.DatetimeIndex(values, name=TIMESTAMP)
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return _parse_numeric_timestamps(values, source_name, column)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "In a future version of pandas, parsing datetimes with mixed")
            parsed = pd.to_datetime(values)
        if not pd.api.types.is_datetime64_any_dtype(parsed):
            parsed = pd.to_datetime(values, utc=True)
    except (ValueError, TypeError, OverflowError) as exc:
        raise PriceDataError(f"{source_name}: column {column!r} {_why_unparsed(values)}") from exc
    return pd.DatetimeIndex(parsed, name=TIMESTAMP)


def _examples(rows: pd.Series) -> str:
    return ", ".join(f"row {row}: {value!r}" for row, value in rows.head(3).items())


def _follows(text: pd.Series, fmt: str | None) -> pd.Series:
    if fmt is None:
        return pd.Series(False, index=text.index)
    return pd.to_datetime(text, format=fmt, errors="coerce").notna()


def _why_unparsed(values: pd.Series) -> str:
    """Example rows and the likely cause when pandas cannot read a column as one timestamp format.

    Each value may be a valid timestamp on its own: the usual culprits are a file mixing timestamps
    with and without a UTC offset, and day-first dates that only fail on the 13th of a month.
    """
    text = values.dropna().astype(str).str.strip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas warns about the very mixtures diagnosed here
        with_offset = text.str.contains(_UTC_OFFSET)
        if with_offset.any() and not with_offset.all():
            return (
                f"mixes time zones: {int(with_offset.sum())} value(s) carry a UTC offset "
                f"({_examples(text[with_offset])}) and {int((~with_offset).sum())} do not "
                f"({_examples(text[~with_offset])}); write every timestamp with its offset, or all in UTC"
            )
        unreadable = text[pd.to_datetime(text, errors="coerce", format="mixed").isna()]
        if len(unreadable):
            return f"has values that are not timestamps ({_examples(unreadable)})"
        first = text.iloc[0]
        month_first, day_first = guess_datetime_format(first), guess_datetime_format(first, dayfirst=True)
        if day_first not in (None, month_first) and _follows(text, day_first).all():
            off = text[~_follows(text, month_first)]
            return (
                f"holds day-first dates ({day_first}): read month-first from its first row {first!r}, "
                f"they fail at {_examples(off)}; write the dates as ISO yyyy-mm-dd"
            )
        off = text[~_follows(text, month_first)]
    return (
        f"mixes timestamp formats: row {text.index[0]} {first!r} reads as {month_first}, but not "
        f"{_examples(off)}; write every timestamp in one format (ISO yyyy-mm-dd[ HH:MM:SS])"
    )


def _parse_numeric_timestamps(values: pd.Series, source_name: str, column: str) -> pd.DatetimeIndex:
    """Numbers are either yyyymmdd dates or Unix epochs, told apart by their magnitude."""
    magnitude = values.abs().median()
    if 1e7 <= magnitude < 1e8:
        digits = values.astype("float64").map("{:.0f}".format)
        parsed = pd.to_datetime(digits, format="%Y%m%d", errors="coerce")
    else:
        unit = next((unit for threshold, unit in _EPOCH_UNITS if magnitude >= threshold), None)
        if unit is None:
            raise PriceDataError(f"{source_name}: numeric column {column!r} is neither yyyymmdd dates nor a Unix epoch")
        parsed = pd.to_datetime(values, unit=unit, utc=True, errors="coerce")
    unparsed = values[parsed.isna() & values.notna()]
    if len(unparsed):
        examples = ", ".join(f"row {row}: {value!r}" for row, value in unparsed.head(5).items())
        raise PriceDataError(f"{source_name}: column {column!r} has values that are not timestamps ({examples})")
    return pd.DatetimeIndex(parsed, name=TIMESTAMP)
