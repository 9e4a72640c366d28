"""Chronological train / validation / test splits with a purge gap between them.

Each later split starts ``gap_bars`` bars after the previous one ends, so no feature of a later
split reaches back into the bars of an earlier one when ``gap_bars >= max_lookback(params)``.
Splits are stored as ISO timestamps (JSON-serialisable) and re-applied to any frame by date.

``params`` for :func:`make_splits`, either by date or by fraction of the bars:

- ``train_end``, ``validation_end``: last timestamp of each split (inclusive; a date without a time
  covers the whole day); the test split is the rest.
- ``train_fraction``, ``validation_fraction``: shares of the bars; the test split is the rest.
- ``gap_bars`` (default 0): bars purged before the validation and before the test split.
- ``min_bars`` (default 1): fewest bars any split may hold.
"""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pandas as pd

SPLIT_NAMES = ("train", "validation", "test")
_DATE_KEYS = ("train_end", "validation_end")
_FRACTION_KEYS = ("train_fraction", "validation_fraction")
_KNOWN_KEYS = (*_DATE_KEYS, *_FRACTION_KEYS, "gap_bars", "min_bars")
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def check_time_index(index: pd.Index, what: str = "index") -> pd.DatetimeIndex:
    """Reject anything but a sorted, duplicate-free DatetimeIndex: every later step relies on it."""
    if not isinstance(index, pd.DatetimeIndex):
        raise ValueError(f"{what} must be a DatetimeIndex, got {type(index).__name__}")
    if not index.is_monotonic_increasing:
        raise ValueError(f"{what} must be sorted in increasing time order")
    if len(index) == 0:
        raise ValueError(f"{what} has no bars")
    if not index.is_unique:
        raise ValueError(f"{what} has duplicate timestamps, e.g. {index[index.duplicated()][0]}")
    return index


def bars_through(index: pd.DatetimeIndex, end, key: str) -> int:
    """Bars with timestamp <= ``end``; a bare date (``"2011-12-31"``) covers its whole day."""
    try:
        stamp = pd.Timestamp(end)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{key}={end!r} is not a timestamp") from error
    if stamp.tzinfo is None and index.tz is not None:
        stamp = stamp.tz_localize(index.tz)
    elif stamp.tzinfo is not None and index.tz is None:
        raise ValueError(f"{key}={end!r} has a time zone but the index has none")
    bare_date = (isinstance(end, dt.date) and not isinstance(end, dt.datetime)) or (
        isinstance(end, str) and _DATE_ONLY.match(end.strip()) is not None
    )
    if bare_date:
        return int(np.searchsorted(index, stamp + pd.Timedelta(days=1), side="left"))
    return int(np.searchsorted(index, stamp, side="right"))


def _int_param(params: dict, key: str, default: int, minimum: int) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_split_params(params: dict) -> None:
    """The split checks that need no bars (known keys; dates or fractions, not both; dates in order;
    fractions in range): ``make_splits`` runs them, and ``feature_extraction`` before it reads a file."""
    unknown = sorted(set(params) - set(_KNOWN_KEYS))
    if unknown:
        raise ValueError(f"unknown split parameter(s) {unknown}; known: {list(_KNOWN_KEYS)}")
    params = {key: value for key, value in params.items() if value is not None}
    by_date = [key for key in _DATE_KEYS if key in params]
    by_fraction = [key for key in _FRACTION_KEYS if key in params]
    if by_date and by_fraction:
        raise ValueError(f"give either {_DATE_KEYS} or {_FRACTION_KEYS}, not {by_date + by_fraction}")
    keys = _DATE_KEYS if by_date else _FRACTION_KEYS
    missing = [key for key in keys if key not in params]
    if missing:
        raise ValueError(f"split params lack {missing} (give {_DATE_KEYS} or {_FRACTION_KEYS})")
    if by_date:
        train_key, validation_key = _DATE_KEYS
        for key in _DATE_KEYS:
            try:
                pd.Timestamp(params[key])
            except (TypeError, ValueError) as error:
                raise ValueError(f"{key}={params[key]!r} is not a timestamp") from error
        if pd.Timestamp(params[train_key]) >= pd.Timestamp(params[validation_key]):
            raise ValueError(
                f"{train_key}={params[train_key]!r} must be before {validation_key}={params[validation_key]!r}"
            )
        return
    for key in _FRACTION_KEYS:
        if isinstance(params[key], bool) or not isinstance(params[key], (int, float)) or not (0 < params[key] < 1):
            raise ValueError(f"{key} must be a number in (0, 1), got {params[key]!r}")
    if params["train_fraction"] + params["validation_fraction"] >= 1:
        raise ValueError(
            f"train_fraction + validation_fraction must be < 1 to leave a test split, "
            f"got {params['train_fraction']} + {params['validation_fraction']}"
        )


def _boundaries(index: pd.DatetimeIndex, params: dict) -> tuple[int, int, tuple[str, str]]:
    """Bar counts through the end of train and of validation, and the keys that set them
    (``params`` passed :func:`check_split_params`). A key set to null counts as absent, so conf/local
    can switch conf/base's dates to fractions."""
    params = {key: value for key, value in params.items() if value is not None}
    if any(key in params for key in _DATE_KEYS):
        train_key, validation_key = _DATE_KEYS
        train_stop = bars_through(index, params[train_key], train_key)
        validation_stop = bars_through(index, params[validation_key], validation_key)
        return train_stop, validation_stop, _DATE_KEYS
    train_fraction, validation_fraction = (params[key] for key in _FRACTION_KEYS)
    n_bars = len(index)
    return (
        int(round(train_fraction * n_bars)),
        int(round((train_fraction + validation_fraction) * n_bars)),
        _FRACTION_KEYS,
    )


def make_splits(index: pd.DatetimeIndex, params: dict) -> dict:
    """Chronological ``train`` / ``validation`` / ``test`` ranges, ``gap_bars`` purged between."""
    check_split_params(params)
    check_time_index(index)
    gap_bars = _int_param(params, "gap_bars", 0, 0)
    min_bars = _int_param(params, "min_bars", 1, 1)
    train_stop, validation_stop, (train_key, validation_key) = _boundaries(index, params)
    ranges = {
        "train": (0, train_stop, train_key),
        "validation": (train_stop + gap_bars, validation_stop, f"{validation_key}/gap_bars"),
        "test": (validation_stop + gap_bars, len(index), f"{validation_key}/gap_bars"),
    }
    splits: dict = {}
    for name, (start, stop, culprit) in ranges.items():
        if stop - start < min_bars:
            raise ValueError(
                f"{name} split would hold {max(stop - start, 0)} bars, fewer than min_bars="
                f"{min_bars}; check {culprit} against the {len(index)} bars from "
                f"{index[0].isoformat()} to {index[-1].isoformat()}"
            )
        splits[name] = {
            "start": index[start].isoformat(),
            "end": index[stop - 1].isoformat(),
            "n_bars": stop - start,
        }
    splits["gap_bars"] = gap_bars
    return splits


def split_frame(df: pd.DataFrame, splits: dict, name: str) -> pd.DataFrame:
    """Rows of ``df`` whose timestamp lies within split ``name`` (bounds inclusive)."""
    if name not in SPLIT_NAMES:
        raise ValueError(f"unknown split {name!r}; known: {list(SPLIT_NAMES)}")
    start, end = pd.Timestamp(splits[name]["start"]), pd.Timestamp(splits[name]["end"])
    return df.loc[(df.index >= start) & (df.index <= end)].copy()
