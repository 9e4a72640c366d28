"""Thin nodes around ``trading_rl.evaluation.walk_forward`` and ``plots``."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from trading_rl.data import infer_periods_per_year
from trading_rl.evaluation import plots
from trading_rl.evaluation.walk_forward import run_walk_forward, stitch_out_of_sample, summarise
from trading_rl.pipelines.feature_extraction.nodes import by_symbol
from trading_rl.runtime import make_executor


def walk_forward(
    prices: pd.DataFrame,
    params: dict[str, Any],
    feature_params: dict[str, Any],
    env_params: dict[str, Any],
    sac_icm_agent_params: dict[str, Any],
    seed: int,
    runtime_params: dict[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-fold metrics table and every test step, for every symbol × fold × agent × seed, run on
    the ``runtime.engine`` executor (same numbers either way)."""
    frames = by_symbol(prices)
    periods_per_year = {
        symbol: float(env_params.get("periods_per_year") or infer_periods_per_year(frame.index))
        for symbol, frame in frames.items()
    }
    result = run_walk_forward(
        frames,
        params,
        feature_params,
        dict(env_params.get("env") or {}),
        periods_per_year,
        {"sac_icm": sac_icm_agent_params},
        seed,
        make_executor(runtime_params),
    )
    return result.folds, result.returns


def summarise_walk_forward(
    folds: pd.DataFrame, returns: pd.DataFrame
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Median/IQR summary with PSR and DSR, and the stitched out-of-sample equity curves."""
    return summarise(folds, returns), stitch_out_of_sample(returns)


def plot_walk_forward(
    folds: pd.DataFrame, stitched: pd.DataFrame
) -> tuple[Figure, Figure, Figure, Figure, Figure, Figure]:
    """Each figure twice: once for the versioned image, once for the MLflow artifact."""
    equity = plots.out_of_sample_equity(stitched)
    sharpe = plots.fold_sharpe_distribution(folds)
    actions = plots.action_histograms(folds)
    return equity, sharpe, actions, equity, sharpe, actions
