"""Causal, scale-free features from OHLCV bars.

Every feature at row ``t`` uses bars ``<= t`` only, and every recursion (EMA, Wilder smoothing,
GARCH) starts at a fixed point (the first bar), so no value depends on how many bars follow it:
``compute_features(prices.iloc[:t + 1])`` equals ``compute_features(prices).iloc[:t + 1]``.
Features are returns, ratios to price, oscillators or z-scores, so one scaler serves every symbol.

The *look-back* of a feature is the number of bars before ``t`` it reaches (EMA and Wilder averages
are counted by their window). A feature is NaN on its first look-back rows; every feature is
defined from row ``max_lookback(params)`` on, which is also the purge gap between splits.

``params`` is a ``FeatureParams``, the ``feature_extraction.features`` section, resolved where the
section is read (a node, or the loader of a stored ``feature_params`` entry); its keys, all optional
in the YAML (defaults: ``FeatureParams``' fields; unknown keys are errors):

- ``return_horizons`` [1, 5, 20]: ``ret_h`` simple and ``logret_h`` log return over ``h`` bars.
- ``sma_windows`` [10, 50]: ``sma_ratio_n`` = close / SMA(n) - 1.
- ``ema_windows`` [12, 26]: ``ema_ratio_n`` = close / EMA(n) - 1 (EMA with ``alpha = 2 / (n + 1)``).
- ``rsi_window`` 14: ``rsi_n``, Wilder's RSI in [0, 100].
- ``macd`` {fast: 12, slow: 26, signal: 9}: ``macd``, ``macd_signal``, ``macd_hist``, each / close.
- ``bollinger`` {window: 20, num_std: 2.0}: ``bb_percent_b`` and ``bb_bandwidth`` (band width over
  SMA), with the population standard deviation.
- ``atr_window`` 14: ``atr_ratio_n`` = Wilder's average true range / close.
- ``vol_windows`` [20, 60]: ``realized_vol_n`` = sample std of 1-bar log returns (per bar).
- ``volume_z_window`` 20: ``volume_z_n`` = (volume - rolling mean) / rolling std (0 when flat).
- ``drawdown_window`` 60: ``drawdown_n`` = close / rolling max close - 1.
- ``garch`` {params: None, fit_end: None, fit_bars: 1000}: ``garch_vol``, the GARCH(1,1) one-step
  forecast made at ``t`` (see ``garch.py``). Its parameters are ``params`` when given (a dict from
  ``fit_garch``), else fitted on the bars up to ``fit_end``, else on the first ``fit_bars`` bars:
  fit on the training split only. ``garch: null`` leaves the feature out.
- ``calendar`` true: ``dow_sin``/``dow_cos`` for daily or finer bars, ``hour_sin``/``hour_cos`` for
  intraday bars (decided by the median bar spacing); nothing for weekly or coarser bars.
- ``stale_opens`` {mask: true, rtol: 1e-9}: with ``mask``, ``co_return`` is 0 (no intraday move) on
  bars whose open equals the previous close within ``rtol`` (``trading_rl.data.stale_open_mask``):
  such feeds wrote the previous close for a missing open, so close / open - 1 would be the whole
  day's return. Bar ``t`` is judged from bars ``t - 1`` and ``t``, so ``co_return`` then has a
  look-back of 1.

Always present: ``hl_range`` = (high - low) / close and ``co_return`` = close / open - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api.typing import Rolling

from trading_rl.config import ConfigError, Section, setting
from trading_rl.data.quality import STALE_OPEN_RTOL, stale_open_mask
from trading_rl.data.sources import PRICE_COLUMNS
from trading_rl.features.garch import (
    GARCH_PARAM_NAMES,
    MIN_FIT_OBSERVATIONS,
    fit_garch,
    garch_volatility,
)
from trading_rl.features.splits import bars_through, check_time_index


def _windows_problem(minimum: int):
    def problem(windows: list[int]) -> str | None:
        if any(window < minimum for window in windows) or len(set(windows)) != len(windows):
            return f"a list of distinct integers >= {minimum}"
        return None

    return problem


@dataclass(frozen=True, kw_only=True)
class MacdParams(Section):
    fast: int = setting(12, interval="[2, inf)")
    slow: int = setting(26, interval="[2, inf)")
    signal: int = setting(9, interval="[2, inf)")

    def validate(self, prefix: str) -> None:
        if self.fast >= self.slow:
            raise ConfigError(f"parameter '{prefix}.fast' ({self.fast}) must be < '{prefix}.slow' ({self.slow})")


@dataclass(frozen=True, kw_only=True)
class BollingerParams(Section):
    window: int = setting(20, interval="[2, inf)")
    num_std: float = setting(2.0, interval="(0, inf)")


@dataclass(frozen=True, kw_only=True)
class GarchParams(Section):
    params: dict[str, float] | None = setting(
        None,
        check=lambda given: (
            None if set(GARCH_PARAM_NAMES) <= set(given) else f"a mapping with keys {list(GARCH_PARAM_NAMES)}"
        ),
    )
    fit_end: str | None = None
    fit_bars: int = setting(1000, interval="[100, inf)")


@dataclass(frozen=True, kw_only=True)
class StaleOpenParams(Section):
    mask: bool = True
    rtol: float = setting(STALE_OPEN_RTOL, interval="[0, 1)")


@dataclass(frozen=True, kw_only=True)
class FeatureParams(Section):
    """``feature_extraction.features`` (all keys optional; see the module docstring)."""

    return_horizons: list[int] = setting([1, 5, 20], check=_windows_problem(1))
    sma_windows: list[int] = setting([10, 50], check=_windows_problem(2))
    ema_windows: list[int] = setting([12, 26], check=_windows_problem(2))
    rsi_window: int = setting(14, interval="[2, inf)")
    macd: MacdParams = setting(MacdParams())
    bollinger: BollingerParams = setting(BollingerParams())
    atr_window: int = setting(14, interval="[2, inf)")
    vol_windows: list[int] = setting([20, 60], check=_windows_problem(2))
    volume_z_window: int = setting(20, interval="[2, inf)")
    drawdown_window: int = setting(60, interval="[2, inf)")
    garch: GarchParams | None = setting(GarchParams())  # null leaves the feature out
    calendar: bool = True
    stale_opens: StaleOpenParams = setting(StaleOpenParams())


def _lookbacks(p: FeatureParams) -> dict[str, int]:
    """Feature name -> look-back in bars, in output column order (calendar columns excluded)."""
    lookbacks: dict[str, int] = {}
    for horizon in p.return_horizons:
        lookbacks[f"ret_{horizon}"] = horizon
        lookbacks[f"logret_{horizon}"] = horizon
    for window in p.sma_windows:
        lookbacks[f"sma_ratio_{window}"] = window - 1
    for window in p.ema_windows:
        lookbacks[f"ema_ratio_{window}"] = window - 1
    lookbacks[f"rsi_{p.rsi_window}"] = p.rsi_window
    lookbacks["macd"] = p.macd.slow - 1
    lookbacks["macd_signal"] = p.macd.slow - 1 + p.macd.signal - 1
    lookbacks["macd_hist"] = lookbacks["macd_signal"]
    lookbacks["bb_percent_b"] = p.bollinger.window - 1
    lookbacks["bb_bandwidth"] = p.bollinger.window - 1
    lookbacks[f"atr_ratio_{p.atr_window}"] = p.atr_window
    for window in p.vol_windows:
        lookbacks[f"realized_vol_{window}"] = window
    lookbacks[f"volume_z_{p.volume_z_window}"] = p.volume_z_window - 1
    lookbacks[f"drawdown_{p.drawdown_window}"] = p.drawdown_window - 1
    lookbacks["hl_range"] = 0
    lookbacks["co_return"] = 1 if p.stale_opens.mask else 0
    if p.garch is not None:
        lookbacks["garch_vol"] = 1
    return lookbacks


def max_lookback(params: FeatureParams) -> int:
    """Longest look-back (bars before ``t``) of any configured feature: warm-up and purge gap."""
    return max(_lookbacks(params).values())


def _shifted(values: np.ndarray, periods: int) -> np.ndarray:
    """``values`` moved ``periods`` rows later, NaN in front (``Series.shift``)."""
    shifted = np.full(len(values), np.nan)
    if periods < len(values):
        shifted[periods:] = values[: len(values) - periods]
    return shifted


def _rolling(values: np.ndarray, window: int) -> Rolling:
    """pandas' rolling window over ``values``: its running sums are what the pipeline's features
    were computed with, so every caller gets the same floats, bit for bit."""
    return pd.Series(values, copy=False).rolling(window)


def ema(values: np.ndarray, window: int) -> np.ndarray:
    """EMA with ``alpha = 2 / (window + 1)`` seeded with the first value (prefix-invariant)."""
    return pd.Series(values, copy=False).ewm(span=window, adjust=False).mean().to_numpy()


def wilder_average(values: np.ndarray, window: int) -> np.ndarray:
    """Wilder's smoothing: seeded with the mean of the first ``window`` values, then
    ``avg_t = avg_{t-1} + (x_t - avg_{t-1}) / window``. NaN before the seed."""
    valid = np.flatnonzero(~np.isnan(values))
    seeded = np.full(len(values), np.nan)
    if valid.size < window:
        return seeded
    seed_row = int(valid[0]) + window - 1
    seeded[seed_row] = pd.Series(values[valid[0] : seed_row + 1]).mean()
    seeded[seed_row + 1 :] = values[seed_row + 1 :]
    return pd.Series(seeded, copy=False).ewm(alpha=1.0 / window, adjust=False).mean().to_numpy()


def _at_least_zero(values: np.ndarray) -> np.ndarray:
    """``Series.clip(lower=0.0)``: negatives to 0, NaN and ``-0.0`` kept."""
    return np.where(np.isnan(values) | (values >= 0.0), values, 0.0)


def _over(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` where the denominator is > 0, NaN elsewhere."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return numerator / np.where(denominator > 0, denominator, np.nan)


def rsi(close: np.ndarray, window: int) -> np.ndarray:
    """Wilder's RSI in [0, 100]: 100 * avg gain / (avg gain + avg loss); 50 when flat."""
    change = close - _shifted(close, 1)
    average_gain = wilder_average(_at_least_zero(change), window)
    average_loss = wilder_average(_at_least_zero(-change), window)
    total = average_gain + average_loss
    return np.where(total == 0, 50.0, _over(100.0 * average_gain, total))


def true_range(high: np.ndarray, low: np.ndarray, close: np.ndarray) -> np.ndarray:
    """Largest of high-low and the gaps to the previous close; NaN on the first bar."""
    previous_close = _shifted(close, 1)
    return np.maximum(np.maximum(high - low, np.abs(high - previous_close)), np.abs(low - previous_close))


def macd(close: np.ndarray, fast_ema: np.ndarray, slow_ema: np.ndarray, signal: int) -> dict[str, np.ndarray]:
    """MACD line (the fast minus the slow EMA of close), signal and histogram divided by close
    (scale-free)."""
    line = fast_ema - slow_ema
    signal_line = ema(line, signal)
    return {"macd": line / close, "macd_signal": signal_line / close, "macd_hist": (line - signal_line) / close}


def bollinger(close: np.ndarray, window: int, num_std: float) -> dict[str, np.ndarray]:
    """%B (position of close inside the bands; 0.5 when the bands collapse) and bandwidth."""
    rolling = _rolling(close, window)
    middle = rolling.mean().to_numpy()
    width = 2.0 * num_std * rolling.std(ddof=0).to_numpy()
    lower = middle - width / 2.0
    percent_b = np.where(width == 0, 0.5, _over(close - lower, width))
    return {"bb_percent_b": percent_b, "bb_bandwidth": width / middle}


def rolling_zscore(values: np.ndarray, window: int) -> np.ndarray:
    """(x - rolling mean) / rolling population std, 0 where the window is flat."""
    rolling = _rolling(values, window)
    spread = rolling.std(ddof=0).to_numpy()
    return np.where(spread == 0, 0.0, _over(values - rolling.mean().to_numpy(), spread))


def calendar_features(index: pd.DatetimeIndex) -> dict[str, np.ndarray]:
    """Cyclical time-of-week (and time-of-day for intraday bars) encodings."""
    spacing = pd.Timedelta(np.median(np.diff(index.asi8))) if len(index) > 1 else pd.Timedelta(days=1)
    columns: dict[str, np.ndarray] = {}
    if spacing < pd.Timedelta(days=7):
        day_angle = 2.0 * np.pi * index.dayofweek.to_numpy() / 7.0
        columns["dow_sin"], columns["dow_cos"] = np.sin(day_angle), np.cos(day_angle)
    if spacing < pd.Timedelta(days=1):
        hours = index.hour.to_numpy() + index.minute.to_numpy() / 60.0
        hour_angle = 2.0 * np.pi * hours / 24.0
        columns["hour_sin"], columns["hour_cos"] = np.sin(hour_angle), np.cos(hour_angle)
    return {name: values.astype(np.float64) for name, values in columns.items()}


def _check_prices(prices: pd.DataFrame) -> pd.DataFrame:
    missing = [column for column in PRICE_COLUMNS if column not in prices.columns]
    if missing:
        raise ValueError(f"prices lack column(s) {missing}; need {list(PRICE_COLUMNS)}")
    check_time_index(prices.index, "prices index")
    ohlcv = prices[list(PRICE_COLUMNS)].astype(np.float64)
    values = ohlcv.to_numpy()
    for problem, bad in (
        ("is not finite", ~np.isfinite(values)),
        ("must be > 0 (returns are logs of price ratios)", values[:, :4] <= 0),
    ):
        if bad.any():
            row, column = np.argwhere(bad)[0]
            raise ValueError(f"prices column {PRICE_COLUMNS[column]} {problem} at {prices.index[row]}")
    return ohlcv


def _garch_params(log_returns: pd.Series, garch: GarchParams, symbol: str | None) -> dict[str, float]:
    """GARCH parameters as configured: given, fitted through ``fit_end`` or on ``fit_bars`` bars
    (``symbol`` names the series in a refusal or a fallback's warning)."""
    if garch.params is not None:
        return garch.params
    if garch.fit_end is not None:
        fit_rows = bars_through(log_returns.index, garch.fit_end, "garch.fit_end")
        if fit_rows <= MIN_FIT_OBSERVATIONS:
            raise ValueError(
                f"garch.fit_end={garch.fit_end!r} leaves {fit_rows} bars to fit GARCH on; "
                f"need more than {MIN_FIT_OBSERVATIONS}"
            )
    else:
        fit_rows = garch.fit_bars
        if len(log_returns) < fit_rows:
            raise ValueError(
                f"prices hold {len(log_returns)} bars, fewer than garch.fit_bars={fit_rows}; "
                "pass garch.params or garch.fit_end so the fit stays on past bars"
            )
    return fit_garch(log_returns.iloc[:fit_rows], symbol)


def without_masked_entries(features: pd.DataFrame, prices: pd.DataFrame, params: FeatureParams) -> pd.DataFrame:
    """``features`` with the entries the stale-open mask set to 0 made NaN, for ``fit_scaler``
    (which skips NaN): on the packaged S&P 500 over half the training bars are stale, and that many
    zeros would shrink the robust scale of ``co_return`` to nearly nothing and clip every real value.

    When every entry is masked (a walk-forward window inside sp500's 2004 run) they stay: the zeros
    give centre 0 and unit scale, so the column stays near 0 rather than failing the fit.
    ``prices`` must hold every bar of ``features``' index and the bar before its first row.
    """
    stale_opens = params.stale_opens
    if not stale_opens.mask or "co_return" not in features.columns:
        return features
    stale = pd.Series(stale_open_mask(prices["open"], prices["close"], stale_opens.rtol), index=prices.index).loc[
        features.index
    ]
    unmasked = features["co_return"].mask(stale.to_numpy())
    return features.assign(co_return=unmasked) if unmasked.notna().any() else features


def feature_values(
    index: pd.DatetimeIndex, ohlcv: np.ndarray, params: FeatureParams, symbol: str | None = None
) -> dict[str, np.ndarray]:
    """Every feature column (in ``compute_features``' order) of bars already checked: ``ohlcv`` the
    float64 open, high, low, close and volume columns of ``index``'s bars, finite, prices > 0.
    NumPy, with pandas' own rolling and EWM loops: the same floats as ``compute_features``, without
    a DataFrame per step (the served model computes these on every request)."""
    open_, high, low, close, volume = (ohlcv[:, column] for column in range(len(PRICE_COLUMNS)))
    log_close = np.log(close)
    log_return = log_close - _shifted(log_close, 1)

    columns: dict[str, np.ndarray] = {}
    for horizon in params.return_horizons:
        columns[f"ret_{horizon}"] = close / _shifted(close, horizon) - 1
        columns[f"logret_{horizon}"] = log_close - _shifted(log_close, horizon)
    for window in params.sma_windows:
        columns[f"sma_ratio_{window}"] = close / _rolling(close, window).mean().to_numpy() - 1.0
    emas = {window: ema(close, window) for window in {*params.ema_windows, params.macd.fast, params.macd.slow}}
    for window in params.ema_windows:
        columns[f"ema_ratio_{window}"] = close / emas[window] - 1.0
    columns[f"rsi_{params.rsi_window}"] = rsi(close, params.rsi_window)
    columns.update(macd(close, emas[params.macd.fast], emas[params.macd.slow], params.macd.signal))
    columns.update(bollinger(close, params.bollinger.window, params.bollinger.num_std))
    columns[f"atr_ratio_{params.atr_window}"] = wilder_average(true_range(high, low, close), params.atr_window) / close
    for window in params.vol_windows:
        columns[f"realized_vol_{window}"] = _rolling(log_return, window).std().to_numpy()
    columns[f"volume_z_{params.volume_z_window}"] = rolling_zscore(volume, params.volume_z_window)
    drawdown_window = params.drawdown_window
    columns[f"drawdown_{drawdown_window}"] = close / _rolling(close, drawdown_window).max().to_numpy() - 1.0
    columns["hl_range"] = (high - low) / close
    columns["co_return"] = close / open_ - 1.0
    if params.stale_opens.mask:
        stale = stale_open_mask(open_, close, params.stale_opens.rtol)
        columns["co_return"] = np.where(stale, 0.0, columns["co_return"])
    if params.garch is not None:
        returns = pd.Series(log_return, index=index)
        columns["garch_vol"] = garch_volatility(returns, _garch_params(returns, params.garch, symbol)).to_numpy()

    features = {}
    for name, lookback in _lookbacks(params).items():
        values = np.array(columns[name], dtype=np.float64)
        values[:lookback] = np.nan
        features[name] = values
    if params.calendar:
        features.update(calendar_features(index))
    return features


def compute_features(prices: pd.DataFrame, params: FeatureParams, symbol: str | None = None) -> pd.DataFrame:
    """Causal feature matrix on ``prices``' index; NaN on each feature's warm-up rows. ``symbol``
    only names the series in the GARCH fit's messages."""
    ohlcv = _check_prices(prices)
    return pd.DataFrame(feature_values(prices.index, ohlcv.to_numpy(), params, symbol), index=prices.index)
