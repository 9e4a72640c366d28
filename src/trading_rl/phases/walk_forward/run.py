"""The walk-forward phase as its pipeline runs it: the run on the ``runtime.engine`` executor (each
chain's record handed to the injected ``log_history``), its trial-ledger rows and its summary."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pandas as pd

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.algorithms.saved import load_agent
from trading_rl.data import by_symbol
from trading_rl.envs import periods_per_year_by_symbol
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.ledger.ledger import Period, trials_for
from trading_rl.evaluation.metrics.attribution import env_cost_rate
from trading_rl.evaluation.validation.folds import stitch_out_of_sample, summarise
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases.walk_forward.chains import chain_histories
from trading_rl.phases.walk_forward.execution import run_walk_forward
from trading_rl.phases.walk_forward.ledger import trial_rows
from trading_rl.phases.walk_forward.params import WalkForwardJob, WalkForwardParams
from trading_rl.phases.walk_forward.population import make_executor
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
    *,
    log_history: Callable[[str, list[dict]], None],
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Per-fold metrics table, every test step, for every symbol × fold × agent × seed, run on the
    ``runtime.engine`` executor (same numbers either way), and each chain's final agent
    (``phases.walk_forward.chains``). Each chain's record (training episode reward and test metrics per
    fold, at the env steps trained so far) goes to MLflow as ``walk_forward/<chain>/...`` once the
    chains return: they ran in worker processes, which have no MLflow run to stream to. ``log_history``:
    the pipeline binds ``pipelines.tracking.log_history``."""
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
