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

Regimes are measured on the walk-forward's out-of-sample test steps (``walk_forward_regime_metrics``),
the same agents and windows the validation report is about; the test split stays untouched. One row
per symbol × agent × seed × regime, from that seed's stitched test steps (all folds, each step once):
a fold's test window alone holds too few steps per regime for a Sharpe or a drawdown, and stitching
per seed keeps the seeds apart so that summaries take medians over seeds, never the best one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.config import Section, setting
from trading_rl.envs.compatibility import ModelCompatibilityError
from trading_rl.evaluation.metrics.attribution import attribution_metrics, return_attribution
from trading_rl.evaluation.metrics.baselines import MARKET
from trading_rl.evaluation.metrics.metrics import json_ready, return_metrics
from trading_rl.monitoring.actions import action_histogram, histogram_entropy

REGIMES: tuple[str, ...] = ("bull", "bear", "sideways", "high_volatility")
UNLABELLED = "unlabelled"


@dataclass(frozen=True, kw_only=True)
class RegimeParams(Section):
    trend_window: int = setting(50, interval="[2, inf)")  # bars of the trend statistic
    # |trend / (vol x sqrt(window))| above this: bull / bear
    trend_threshold: float = setting(0.5, interval="[0, inf)")
    vol_window: int = setting(20, interval="[2, inf)")  # realised volatility window
    # high_volatility: vol above its vol_quantile over this many bars
    vol_lookback: int = setting(252, interval="[2, inf)")
    vol_quantile: float = setting(0.8, interval="(0, 1)")


@dataclass(frozen=True, kw_only=True)
class RegimeValidationParams(Section):
    """``regime_validation`` holds ``regimes`` only; ``split`` is refused with the reason."""

    REFUSED = {
        "split": "regimes are measured on the walk-forward test windows, and the test split is reserved "
        "for the final_evaluation pipeline"
    }

    regimes: RegimeParams = setting(RegimeParams())


_NO_REGIME = np.array(None, dtype=object)  # the label during warm-up


def label_regimes(close: pd.Series, params: RegimeParams) -> pd.Series:
    """Regime label per bar (``REGIMES`` or ``None`` during warm-up), from closes up to each bar."""
    log_close = np.log(close.astype(np.float64))
    volatility = log_close.diff().rolling(params.vol_window).std()
    volatility_bar = volatility.rolling(params.vol_lookback).quantile(float(params.vol_quantile))
    trend = log_close.diff(params.trend_window) / (volatility * math.sqrt(params.trend_window))
    threshold = float(params.trend_threshold)
    labels = np.select(
        [volatility > volatility_bar, trend > threshold, trend < -threshold, trend.notna()],
        ["high_volatility", "bull", "bear", "sideways"],
        default=_NO_REGIME,
    )
    defined = volatility_bar.notna() & trend.notna()
    return pd.Series(np.where(defined, labels, _NO_REGIME), index=close.index, name="regime", dtype=object)


def bar_regimes(close_history, positions, params: RegimeParams) -> np.ndarray:
    """Causal label (``REGIMES`` or ``None``) of the bars at ``positions`` of ``close_history``: a
    trading env's ``close_history`` and ``history_positions`` give its own bars' labels."""
    labels = label_regimes(pd.Series(np.asarray(close_history, dtype=np.float64)), params)
    return labels.to_numpy(dtype=object)[np.asarray(positions)]


def step_regimes(timestamps, labels: pd.Series) -> np.ndarray:
    """Regime in force when each step's action was decided.

    A rollout row's ``timestamp`` is the bar its return is marked at; the decision was taken at the
    close of the bar before, so that bar's label is the one the agent could have known.
    """
    decided = labels.shift(1)
    values = decided.reindex(pd.DatetimeIndex(pd.to_datetime(timestamps))).to_numpy(dtype=object)
    return np.array([UNLABELLED if value is None or value != value else value for value in values], dtype=object)


def regime_metrics(
    rollout: pd.DataFrame,
    labels: pd.Series,
    periods_per_year: float,
    hold_threshold: float,
    cost_rate: float | None = None,
) -> pd.DataFrame:
    """Metrics per regime from the steps decided in that regime, plus an ``all`` row.

    ``log_return`` is the sum of ``log(1 + r)`` over a regime's steps, so the regimes' log returns
    add up to the whole episode's. Sharpe, drawdown and the rest treat a regime's steps as one series
    (they are not contiguous in time; read drawdown as "worst run of losses within the regime").
    With ``cost_rate`` given and ``exposure`` and ``market`` columns in ``rollout`` (walk-forward
    steps), each row adds the return attribution of its steps (``attribution.attribution_metrics``;
    the timing correlation pairs consecutive steps of the regime).
    """
    attributed = cost_rate is not None and {"exposure", "market"} <= set(rollout.columns)
    regimes = step_regimes(rollout["timestamp"], labels)
    returns = rollout["return"].to_numpy(dtype=np.float64)
    actions = rollout["action_raw"].to_numpy(dtype=np.float64) if "action_raw" in rollout else None
    trade_value = rollout["trade_value"].to_numpy(dtype=np.float64) if "trade_value" in rollout else None
    traded = None if trade_value is None or np.isnan(trade_value).all() else trade_value != 0
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
        if attributed and cost_rate is not None:
            attribution = return_attribution(
                returns[mask],
                rollout["exposure"].to_numpy(dtype=np.float64)[mask],
                rollout["market"].to_numpy(dtype=np.float64)[mask],
                periods_per_year=periods_per_year,
                cost_rate=cost_rate,
            )
            row.update(attribution_metrics(attribution))
        rows.append(row)
    return pd.DataFrame(rows)


def walk_forward_regime_metrics(
    returns: pd.DataFrame,
    labels: Mapping[str, pd.Series],
    periods_per_year: Mapping[str, float],
    hold_threshold: float,
    cost_rate: float | None = None,
) -> pd.DataFrame:
    """``regime_metrics`` of every symbol × agent × seed's stitched out-of-sample test steps.

    ``returns``: ``walk_forward_returns`` (symbol, fold, kind, agent, seed, timestamp, return,
    action_raw, trade_value, exposure, market); ``labels``: causal regime labels per symbol. With
    ``cost_rate`` (the env's commission + slippage) every agent and baseline but the market line
    gets its return attribution per regime. Columns: symbol, model (the agent or baseline), kind,
    seed (-1 for baselines), regime, then the metrics.
    """
    from trading_rl.evaluation.validation.folds import stitch_out_of_sample

    required = ("trade_value", "action_raw", *(("exposure", "market") if cost_rate is not None else ()))
    missing = [column for column in required if column not in returns]
    if missing:
        raise ValueError(f"walk_forward_returns lacks column(s) {missing}; rerun the walk_forward pipeline")
    frames = []
    keys = ["symbol", "kind", "agent", "seed"]
    for (symbol, kind, agent, seed), steps in stitch_out_of_sample(returns).groupby(keys, sort=False):
        table = regime_metrics(
            steps, labels[symbol], periods_per_year[symbol], hold_threshold, None if agent == MARKET else cost_rate
        )
        frames.append(table.assign(symbol=symbol, model=agent, kind=kind, seed=seed))
    table = pd.DataFrame([row for frame in frames for row in frame.to_dict("records")])
    leading = ["symbol", "model", "kind", "seed", "regime"]
    return table[leading + [column for column in table.columns if column not in leading]]


def check_returns_match_prices(returns: pd.DataFrame, prices: Mapping[str, pd.DataFrame]) -> None:
    """Refuse walk-forward returns computed on other prices than the ones regimes are labelled on.

    ``regime_validation`` run on its own pairs the latest ``walk_forward_returns`` with the latest
    ``prices``; when these come from different data (another symbol set, other dates) every
    per-regime number would be misaligned, so it stops before any label is written.
    """
    fix = (
        "Nothing was written. Fix: load versions that belong together, e.g. `kedro run --pipelines "
        "regime_validation --load-versions walk_forward_returns:<version>,prices:<version>`, or rerun "
        "`kedro run --pipelines validation` on the current prices."
    )
    unknown = sorted(set(returns["symbol"].astype(str)) - set(prices))
    if unknown:
        raise ModelCompatibilityError(
            f"dataset 'walk_forward_returns' holds symbol(s) {unknown} that dataset 'prices' does not "
            f"have (prices hold {sorted(prices)}). {fix}"
        )
    for symbol, steps in returns.groupby("symbol", sort=False):
        bars = prices[str(symbol)].index
        tested = pd.DatetimeIndex(pd.to_datetime(steps["timestamp"]).unique())
        missing = tested.difference(bars)
        if len(missing):
            raise ModelCompatibilityError(
                f"dataset 'walk_forward_returns' tested {len(missing)} bar(s) of {symbol!r} that dataset "
                f"'prices' does not have (first {missing[0]}; returns cover {tested.min()} .. {tested.max()}, "
                f"prices cover {bars.min()} .. {bars.max()}). {fix}"
            )
