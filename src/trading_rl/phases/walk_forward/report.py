"""The walk-forward phase's plots and tearsheet sections (stitched out-of-sample test windows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from trading_rl.data import by_symbol
from trading_rl.envs import periods_per_year_by_symbol
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.metrics.attribution import env_cost_rate
from trading_rl.evaluation.reporting import plots
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput
from trading_rl.evaluation.reporting.tearsheet_section import TearsheetSection
from trading_rl.evaluation.validation.regimes import RegimeValidationParams, label_regimes

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_walk_forward(folds: pd.DataFrame, stitched: pd.DataFrame) -> tuple[Figure, Figure, Figure]:
    """Out-of-sample equity, fold Sharpe distribution and action histograms (versioned PNGs; the
    MLflow artifact hook logs each saved figure)."""
    return (
        plots.out_of_sample_equity(stitched),
        plots.fold_sharpe_distribution(folds),
        plots.action_histograms(folds),
    )


def walk_forward_tearsheet(
    stitched: pd.DataFrame,
    prices: pd.DataFrame,
    env_construction: EnvConstructionParams,
    regime_validation: RegimeValidationParams,
) -> TearsheetInput:
    """One section per symbol: every agent seed's stitched out-of-sample test steps (the first seed's
    trades and actions drawn) next to the baselines' on the same windows."""
    frames = by_symbol(prices)
    periods_per_year = periods_per_year_by_symbol(env_construction.periods_per_year, frames)
    env_config = env_construction.env
    regimes = regime_validation.regimes
    sections = []
    for symbol, data in stitched.groupby("symbol", sort=False):
        agents = data[data["kind"] == "agent"]
        close = frames[symbol]["close"]
        sections.append(
            TearsheetSection(
                f"walk_forward: {symbol}, stitched out-of-sample test windows",
                symbol,
                periods_per_year[symbol],
                {f"{agent} seed {seed}": rows for (agent, seed), rows in agents.groupby(["agent", "seed"], sort=False)},
                {name: rows for name, rows in data[data["kind"] == "baseline"].groupby("agent", sort=False)},
                close,
                label_regimes(close, regimes),
                notes=[
                    f"{agents['fold'].nunique()} test window(s) per seed, stitched in time order; the first "
                    "seed's trades and actions are drawn"
                ],
                cost_rate=env_cost_rate(env_config),
            )
        )
    return TearsheetInput("walk_forward: out-of-sample", env_config.hold_threshold, sections)
