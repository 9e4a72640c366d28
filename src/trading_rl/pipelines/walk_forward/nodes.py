"""Thin nodes around ``trading_rl.phases.walk_forward`` and ``plots``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.algorithms.saved import load_agent
from trading_rl.data import by_symbol
from trading_rl.envs import periods_per_year_by_symbol
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.ledger.ledger import Period, trials_for
from trading_rl.evaluation.metrics.attribution import env_cost_rate
from trading_rl.evaluation.reporting import plots
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput
from trading_rl.evaluation.reporting.tearsheet_section import TearsheetSection
from trading_rl.evaluation.validation.folds import stitch_out_of_sample, summarise
from trading_rl.evaluation.validation.regimes import RegimeValidationParams, label_regimes
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases.walk_forward import (
    WalkForwardJob,
    WalkForwardParams,
    chain_histories,
    run_walk_forward,
    trial_rows,
)
from trading_rl.phases.walk_forward.population import make_executor
from trading_rl.pipelines.tracking import log_history
from trading_rl.runtime import RuntimeParams
from trading_rl.training.params import SacIcmParams

logger = logging.getLogger(__name__)


def walk_forward(
    prices: pd.DataFrame,
    params: WalkForwardParams,
    feature_extraction: FeatureExtractionParams,
    env_construction: EnvConstructionParams,
    sac_icm: SacIcmParams,
    seed: int,
    runtime: RuntimeParams,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Per-fold metrics table, every test step, for every symbol × fold × agent × seed, run on the
    ``runtime.engine`` executor (same numbers either way), and each chain's final agent
    (``phases.walk_forward.chains``). Each chain's record (training episode reward and test metrics per
    fold, at the env steps trained so far) goes to MLflow as ``walk_forward/<chain>/...`` once the
    chains return: they ran in worker processes, which have no MLflow run to stream to."""
    frames = by_symbol(prices)
    result = run_walk_forward(
        frames,
        params,
        WalkForwardJob.of(frames, feature_extraction, env_construction, sac_icm, seed),
        make_executor(runtime),
    )
    for name, history in chain_histories(result.chains, result.folds).items():
        log_history(f"walk_forward/{name}", history)
    models = {}
    for chain in result.chains:
        if chain.agent is None:
            logger.info("walk_forward: %s agents have no saved form; %s is not kept", chain.agent_name, chain.name)
        else:
            models[f"{chain.name}.zip"] = load_agent(chain.agent, SACWithICM)
    return result.folds, result.returns, models


def record_walk_forward_trials(
    returns: pd.DataFrame,
    prices: pd.DataFrame,
    params: WalkForwardParams,
    feature_extraction: FeatureExtractionParams,
    env_construction: EnvConstructionParams,
    sac_icm: SacIcmParams,
    seed: int,
    run_metadata: dict[str, Any],
) -> pd.DataFrame:
    """The trial-ledger rows of this run: one per symbol × agent configuration evaluated."""
    job = WalkForwardJob.of(by_symbol(prices), feature_extraction, env_construction, sac_icm, seed)
    return trial_rows(returns, params, job, run_metadata)


def summarise_walk_forward(
    folds: pd.DataFrame,
    returns: pd.DataFrame,
    trial_ledger: pd.DataFrame,
    prices: pd.DataFrame,
    env_construction: EnvConstructionParams,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Median/IQR summary with PSR and DSR (trials counted from the whole ledger, this run's rows
    included, on this run's out-of-sample period), the stitched curves' return attribution at the
    env's costs, and the stitched out-of-sample equity curves."""
    agents = returns[returns["kind"] == "agent"]
    trials = {
        symbol: trials_for(trial_ledger, symbol, Period.of(steps["timestamp"].min(), steps["timestamp"].max()))
        for symbol, steps in agents.groupby("symbol", sort=False)
    }
    summary = summarise(
        folds,
        returns,
        trials,
        periods_per_year=periods_per_year_by_symbol(env_construction.periods_per_year, by_symbol(prices)),
        cost_rate=env_cost_rate(env_construction.env),
    )
    return summary, stitch_out_of_sample(returns)


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
