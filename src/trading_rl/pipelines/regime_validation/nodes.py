"""Thin nodes around ``trading_rl.evaluation.validation.regimes`` and ``plots``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from trading_rl.data import by_symbol
from trading_rl.envs import periods_per_year_by_symbol
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.metrics.attribution import env_cost_rate
from trading_rl.evaluation.reporting import plots
from trading_rl.evaluation.validation.regimes import (
    RegimeValidationParams,
    check_returns_match_prices,
    label_regimes,
    walk_forward_regime_metrics,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def label_market_regimes(prices: pd.DataFrame, returns: pd.DataFrame, params: RegimeValidationParams) -> pd.DataFrame:
    """Long frame (timestamp index, ``symbol``, ``regime``) of causal labels for every symbol; the
    first node, so walk-forward returns made on other prices are refused before a label is written."""
    regimes = params.regimes
    frames = by_symbol(prices)
    check_returns_match_prices(returns, frames)
    return pd.concat(
        [label_regimes(frame["close"], regimes).to_frame().assign(symbol=symbol) for symbol, frame in frames.items()]
    )[["symbol", "regime"]]


def _labels_by_symbol(regime_labels: pd.DataFrame) -> dict[str, pd.Series]:
    return {symbol: rows["regime"] for symbol, rows in regime_labels.groupby("symbol", sort=False)}


def evaluate_regimes(
    returns: pd.DataFrame, regime_labels: pd.DataFrame, prices: pd.DataFrame, env_construction: EnvConstructionParams
) -> pd.DataFrame:
    """Per-regime metrics and return attribution of the walk-forward agents and baselines on their
    out-of-sample test steps, one row per symbol × model × seed × regime (periods per year, hold
    threshold and costs as walk_forward)."""
    periods_per_year = periods_per_year_by_symbol(env_construction.periods_per_year, by_symbol(prices))
    config = env_construction.env
    return walk_forward_regime_metrics(
        returns, _labels_by_symbol(regime_labels), periods_per_year, config.hold_threshold, env_cost_rate(config)
    )


def plot_regimes(prices: pd.DataFrame, regime_labels: pd.DataFrame, returns: pd.DataFrame) -> Figure:
    """Closes over the walk-forward test windows, shaded by regime on the tested bars."""
    frames, labels = by_symbol(prices), _labels_by_symbol(regime_labels)
    panels = {}
    for symbol, steps in returns.groupby("symbol", sort=False):
        tested = pd.DatetimeIndex(steps["timestamp"].unique()).sort_values()
        close = frames[symbol]["close"].loc[tested[0] : tested[-1]]
        panels[symbol] = (close, labels[symbol].reindex(close.index).where(close.index.isin(tested)))
    figure = plots.regime_shaded_panels(panels, "walk-forward test windows by causal regime")
    return figure
