"""Bar-frequency inference and data-quality facts (gaps, zero volume, jumps, stale closes and opens).

Validation rejects data that is wrong; this module describes data that is valid but may still
mislead a backtest, so a person can judge it before training on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

EQUITY_DAYS_PER_YEAR = 252
CALENDAR_DAYS_PER_YEAR = 365
_DAYS_PER_YEAR = 365.25
_INTRADAY_BELOW = pd.Timedelta(hours=20)
_DAILY_BELOW = pd.Timedelta(days=2)
# Equities and FX never open on Saturdays; 24/7 markets have a bar on every seventh date.
_SATURDAY_SHARE_24_7 = 0.05
_GAP_SPACINGS = 3
_LONGEST_MARKET_CLOSURE = pd.Timedelta(days=4)  # Thursday close -> Monday open after a holiday
_LISTED = 5
# Default relative tolerance of a stale open: equal to the previous close up to float round-off.
STALE_OPEN_RTOL = 1e-9


@dataclass(frozen=True)
class _BarSpacing:
    median: pd.Timedelta
    trades_weekends: bool
    bars_per_day: float

    @property
    def intraday(self) -> bool:
        return self.median < _INTRADAY_BELOW

    @property
    def trading_days_per_year(self) -> int:
        return CALENDAR_DAYS_PER_YEAR if self.trades_weekends else EQUITY_DAYS_PER_YEAR


def _bar_spacing(index: pd.Index) -> _BarSpacing:
    timestamps = pd.DatetimeIndex(index).dropna().unique().sort_values()
    if len(timestamps) < 2:
        raise ValueError(f"need at least two distinct timestamps to infer the bar spacing, got {len(timestamps)}")
    dates = timestamps.normalize()
    distinct_dates = dates.unique()
    return _BarSpacing(
        median=pd.Timedelta(np.median(np.diff(timestamps.asi8)), unit="ns"),
        trades_weekends=bool(np.mean(distinct_dates.dayofweek == 5) > _SATURDAY_SHARE_24_7),
        bars_per_day=float(pd.Series(dates).value_counts().median()),
    )


def infer_periods_per_year(index: pd.Index) -> float:
    """Bars per year for annualising: 252 trading days, or 365 when bars appear on weekends.

    Intraday: median bars per calendar date × those days (390 one-minute bars -> 390 × 252).
    Bars longer than a day (weekly, monthly): calendar year / median spacing, rounded.
    """
    spacing = _bar_spacing(index)
    if spacing.intraday:
        return float(spacing.bars_per_day * spacing.trading_days_per_year)
    if spacing.median < _DAILY_BELOW:
        return float(spacing.trading_days_per_year)
    return float(round(_DAYS_PER_YEAR / (spacing.median / pd.Timedelta(days=1))))


def stale_open_mask(open_prices: Any, close_prices: Any, rtol: float = STALE_OPEN_RTOL) -> np.ndarray:
    """Bars whose open equals the previous close within ``rtol`` (relative to that close).

    Some feeds (the packaged S&P 500 before 2006) did not record the open and wrote the previous
    close instead: a "next-open" fill there is really a fill at the decision bar's close. Bar ``t``
    is judged from ``close[t-1]`` and ``open[t]`` only; the first bar is never stale.
    """
    opens = np.asarray(open_prices, dtype=np.float64)
    closes = np.asarray(close_prices, dtype=np.float64)
    if opens.shape != closes.shape or opens.ndim != 1:
        raise ValueError(f"open and close must be 1-d and of equal length, got {opens.shape} and {closes.shape}")
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float, np.integer, np.floating)) or not 0 <= rtol < 1:
        raise ValueError(f"stale-open tolerance must be a number in [0, 1), got {rtol!r}")
    previous = closes[:-1]
    stale = np.abs(opens[1:] - previous) <= rtol * np.abs(previous)
    return np.concatenate([[False], stale])


def quality_report(
    prices: pd.DataFrame,
    symbol: str,
    *,
    splits: Mapping[str, Any] | None = None,
    sigma_threshold: float = 5.0,
    volatility_window: int = 20,
    jump_threshold: float = 0.10,
    stale_open_rtol: float = STALE_OPEN_RTOL,
) -> dict:
    """JSON-ready facts about validated ``prices``: span, frequency, gaps, zero volume, extreme moves,
    stale closes and stale opens (overall and, given ``splits``, per split).

    A move is extreme when ``|log return|`` exceeds ``jump_threshold`` or ``sigma_threshold``
    times the standard deviation of the previous ``volatility_window`` returns. ``splits`` maps
    split names to ``{"start": iso, "end": iso}`` (inclusive, as ``make_splits`` writes them);
    other entries are ignored.
    """
    index = pd.DatetimeIndex(prices.index)
    spacing = _bar_spacing(index)
    return {
        "symbol": symbol,
        "n_rows": int(len(prices)),
        "start": _iso(index[0]),
        "end": _iso(index[-1]),
        "bar_frequency": to_offset(spacing.median).freqstr,
        "median_bar_seconds": spacing.median.total_seconds(),
        "trades_weekends": spacing.trades_weekends,
        "periods_per_year": infer_periods_per_year(index),
        "gaps": _gaps(index, spacing),
        "zero_volume": _zero_volume(prices["volume"]),
        "extreme_moves": _extreme_moves(prices["close"], sigma_threshold, volatility_window, jump_threshold),
        "repeated_closes": _repeated_closes(prices["close"]),
        "stale_opens": _stale_opens(prices, splits, stale_open_rtol),
    }


def _gaps(index: pd.DatetimeIndex, spacing: _BarSpacing) -> dict:
    """Steps longer than 3 median spacings; on markets that close, nights/weekends/holidays are not gaps."""
    threshold = _GAP_SPACINGS * spacing.median
    steps = np.diff(index.asi8)
    if spacing.trades_weekends:
        rule = f"steps longer than {_GAP_SPACINGS} median bar spacings ({threshold})"
        limits = np.full(len(steps), threshold.value)
    else:
        closure = max(_LONGEST_MARKET_CLOSURE, threshold)
        rule = f"steps between trading days longer than {closure}"
        if spacing.intraday:
            rule += f"; steps within a day longer than {_GAP_SPACINGS} median bar spacings ({threshold})"
        next_day = index[1:].normalize() != index[:-1].normalize()
        limits = np.where(next_day, closure.value, threshold.value)
    gap_ends = np.flatnonzero(steps > limits) + 1
    largest = gap_ends[np.argsort(-steps[gap_ends - 1], kind="stable")][:_LISTED]
    return {
        "rule": rule,
        "count": int(len(gap_ends)),
        "largest": [
            {
                "from": _iso(index[end - 1]),
                "to": _iso(index[end]),
                "days": round(float(steps[end - 1]) / pd.Timedelta(days=1).value, 4),
            }
            for end in largest
        ],
    }


def _zero_volume(volume: pd.Series) -> dict:
    zero = volume.to_numpy() == 0
    return {
        "count": int(zero.sum()),
        "share": float(zero.mean()) if len(zero) else 0.0,
        "first": [_iso(timestamp) for timestamp in volume.index[zero][:_LISTED]],
    }


def _extreme_moves(close: pd.Series, sigma_threshold: float, window: int, jump_threshold: float) -> dict:
    log_returns = np.log(close.astype(float)).diff()
    prior_volatility = log_returns.rolling(window).std().shift(1)  # bars before the move only
    sigmas = log_returns.abs() / prior_volatility
    extreme = (log_returns.abs() > jump_threshold) | (sigmas > sigma_threshold)
    largest = log_returns[extreme].abs().sort_values(ascending=False).head(_LISTED).index
    return {
        "rule": (f"|log return| > {jump_threshold} or > {sigma_threshold} x std of the previous {window} returns"),
        "count": int(extreme.sum()),
        "largest": [
            {
                "timestamp": _iso(timestamp),
                "log_return": float(log_returns[timestamp]),
                "sigmas": None if np.isnan(sigmas[timestamp]) else float(sigmas[timestamp]),
            }
            for timestamp in largest
        ],
    }


def _repeated_closes(close: pd.Series) -> dict:
    """Runs of identical consecutive closes: a stale feed looks like valid but frozen prices."""
    values = close.to_numpy()
    repeated = np.concatenate([[False], values[1:] == values[:-1]])
    run_ids = np.cumsum(~repeated)
    run_lengths = np.bincount(run_ids)
    longest = int(run_lengths.argmax())
    run = np.flatnonzero(run_ids == longest)
    return {
        "count": int(repeated.sum()),
        "longest_run": {
            "bars": int(run_lengths[longest]),
            "start": _iso(close.index[run[0]]),
            "end": _iso(close.index[run[-1]]),
        }
        if run_lengths[longest] > 1
        else None,
    }


def _stale_opens(prices: pd.DataFrame, splits: Mapping[str, Any] | None, rtol: float) -> dict:
    """Where the open is the previous close: next-open fills and close-open features are fake there."""
    stale = stale_open_mask(prices["open"], prices["close"], rtol)
    index = pd.DatetimeIndex(prices.index)
    report = {"rule": f"|open - previous close| <= {rtol} x previous close", **_flag_summary(stale, index)}
    if splits is not None:
        report["by_split"] = {}
        for name, bounds in splits.items():
            if isinstance(bounds, Mapping) and "start" in bounds and "end" in bounds:
                inside = (index >= pd.Timestamp(bounds["start"])) & (index <= pd.Timestamp(bounds["end"]))
                report["by_split"][name] = _flag_summary(stale[inside], index[inside])
    return report


def _flag_summary(flags: np.ndarray, index: pd.DatetimeIndex) -> dict:
    """Count, share, first/last flagged bar and the longest run of consecutive flagged bars."""
    flagged = np.flatnonzero(flags)
    summary: dict[str, Any] = {
        "n_bars": int(len(flags)),
        "count": int(len(flagged)),
        "share": float(flags.mean()) if len(flags) else 0.0,
        "first": _iso(index[flagged[0]]) if len(flagged) else None,
        "last": _iso(index[flagged[-1]]) if len(flagged) else None,
        "longest_run": None,
    }
    if len(flagged):
        # Runs start where a flagged bar does not follow a flagged bar.
        starts = flagged[np.r_[True, np.diff(flagged) > 1]]
        ends = flagged[np.r_[np.diff(flagged) > 1, True]]
        longest = int(np.argmax(ends - starts))
        summary["longest_run"] = {
            "bars": int(ends[longest] - starts[longest] + 1),
            "start": _iso(index[starts[longest]]),
            "end": _iso(index[ends[longest]]),
        }
    return summary


def _iso(timestamp: pd.Timestamp) -> str:
    return pd.Timestamp(timestamp).isoformat()
