"""Causal market-regime labels and per-regime performance.

An agent that only works in a bull market is a leveraged bet on the trend. Splitting a backtest by
regime shows where its returns come from. Labels must be causal — the label at bar ``t`` uses closes
up to ``t`` only — or the split itself would leak the future (a "bear" label that knows the fall is
coming). Rules, in order:

1. ``high_volatility``: realised volatility (std of log returns over ``vol_window`` bars) above its
   own ``vol_quantile`` over the last ``vol_lookback`` bars;
2. otherwise the trend statistic ``log(close_t / close_{t-trend_window}) / (vol_t · sqrt(trend_window))``
   (the trend in units of its own noise, so one threshold serves any instrument and bar size):
   ``bull`` above ``trend_threshold``, ``bear`` below ``-trend_threshold``, ``sideways`` in between.

Bars before every statistic exists carry no label (``None``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.evaluation.actions import action_histogram, histogram_entropy
from trading_rl.evaluation.metrics import json_ready, return_metrics

REGIMES: tuple[str, ...] = ("bull", "bear", "sideways", "high_volatility")
UNLABELLED = "unlabelled"
PARAMS_PREFIX = "regime_validation.regimes"

DEFAULT_REGIME_PARAMS: dict[str, Any] = {
    "trend_window": 50,
    "trend_threshold": 0.5,
    "vol_window": 20,
    "vol_lookback": 252,
    "vol_quantile": 0.8,
}


def resolve_regime_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults overlaid with ``params``; unknown or out-of-range keys raise ``ValueError`` naming them."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(DEFAULT_REGIME_PARAMS))
    if unknown:
        raise ValueError(f"unknown parameter '{PARAMS_PREFIX}.{unknown[0]}'; known: {sorted(DEFAULT_REGIME_PARAMS)}")
    resolved = {**DEFAULT_REGIME_PARAMS, **params}
    for key in ("trend_window", "vol_window", "vol_lookback"):
        value = resolved[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
            raise ValueError(f"parameter '{PARAMS_PREFIX}.{key}' must be an integer >= 2, got {value!r}")
    if not 0.0 < float(resolved["vol_quantile"]) < 1.0:
        raise ValueError(f"parameter '{PARAMS_PREFIX}.vol_quantile' must lie in (0, 1), got {resolved['vol_quantile']!r}")
    if float(resolved["trend_threshold"]) < 0.0:
        raise ValueError(f"parameter '{PARAMS_PREFIX}.trend_threshold' must be >= 0, got {resolved['trend_threshold']!r}")
    return resolved


def label_regimes(close: pd.Series, params: Mapping[str, Any] | None = None) -> pd.Series:
    """Regime label per bar (``REGIMES`` or ``None`` during warm-up), from closes up to each bar."""
    p = resolve_regime_params(params)
    log_close = np.log(close.astype(np.float64))
    volatility = log_close.diff().rolling(p["vol_window"]).std()
    volatility_bar = volatility.rolling(p["vol_lookback"]).quantile(float(p["vol_quantile"]))
    trend = log_close.diff(p["trend_window"]) / (volatility * math.sqrt(p["trend_window"]))
    threshold = float(p["trend_threshold"])
    labels = np.select(
        [volatility > volatility_bar, trend > threshold, trend < -threshold, trend.notna()],
        ["high_volatility", "bull", "bear", "sideways"],
        default=None,
    )
    defined = volatility_bar.notna() & trend.notna()
    return pd.Series(np.where(defined, labels, None), index=close.index, name="regime", dtype=object)


def step_regimes(timestamps, labels: pd.Series) -> np.ndarray:
    """Regime in force when each step's action was decided.

    A rollout row's ``timestamp`` is the bar its return is marked at; the decision was taken at the
    close of the bar before, so that bar's label is the one the agent could have known.
    """
    decided = labels.shift(1)
    values = decided.reindex(pd.DatetimeIndex(pd.to_datetime(timestamps))).to_numpy(dtype=object)
    return np.array([UNLABELLED if value is None or value != value else value for value in values], dtype=object)


def regime_metrics(
    rollout: pd.DataFrame, labels: pd.Series, periods_per_year: float, hold_threshold: float = 0.1
) -> pd.DataFrame:
    """Metrics per regime from the steps decided in that regime, plus an ``all`` row.

    ``log_return`` is the sum of ``log(1 + r)`` over a regime's steps, so the regimes' log returns
    add up to the whole episode's. Sharpe, drawdown and the rest treat a regime's steps as one series
    (they are not contiguous in time; read drawdown as "worst run of losses within the regime").
    """
    regimes = step_regimes(rollout["timestamp"], labels)
    returns = rollout["return"].to_numpy(dtype=np.float64)
    actions = rollout["action_raw"].to_numpy(dtype=np.float64) if "action_raw" in rollout else None
    traded = rollout["trade_value"].to_numpy(dtype=np.float64) != 0 if "trade_value" in rollout else None
    present = [regime for regime in (*REGIMES, UNLABELLED) if (regimes == regime).any()]
    rows = []
    for regime in (*present, "all"):
        mask = np.ones(len(returns), bool) if regime == "all" else regimes == regime
        row: dict[str, Any] = {"regime": regime, "n_steps": int(mask.sum()), "share_of_steps": float(mask.mean())}
        row["log_return"] = float(np.log1p(returns[mask]).sum())
        row.update(json_ready(return_metrics(returns[mask], periods_per_year)))
        if actions is not None and not np.isnan(actions[mask]).all():
            shares = action_histogram(actions[mask], hold_threshold=hold_threshold)
            row.update(hold_share=shares["hold"], action_entropy=histogram_entropy(shares))
        if traded is not None:
            row["n_trades"] = int(traded[mask].sum())
        rows.append(row)
    return pd.DataFrame(rows)
