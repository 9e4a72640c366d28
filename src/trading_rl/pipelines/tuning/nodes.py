"""Thin nodes around ``trading_rl.phases.tuning``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from trading_rl.data import by_symbol
from trading_rl.envs import EnvConstructionParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases.tuning import TuningParams, run_tuning, tuning_report
from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams
from trading_rl.phases.walk_forward.population import make_executor
from trading_rl.runtime import RuntimeParams
from trading_rl.training.params import SacIcmParams

logger = logging.getLogger(__name__)


def tune(
    prices: pd.DataFrame,
    params: TuningParams,
    walk_forward: WalkForwardParams,
    feature_extraction: FeatureExtractionParams,
    env_construction: EnvConstructionParams,
    sac_icm: SacIcmParams,
    seed: int,
    runtime: RuntimeParams,
    run_metadata: dict[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The trials table, their trial-ledger rows (appended to the ledger) and the chosen
    parameters; each batch of ``tuning.trials_per_population`` trials runs as one walk-forward
    execution on the ``runtime.engine`` executor."""
    frames = by_symbol(prices)
    result = run_tuning(
        frames,
        params,
        walk_forward,
        WalkForwardJob.of(frames, feature_extraction, env_construction, sac_icm, seed),
        make_executor(runtime),
        run_metadata,
    )
    return result.trials, result.ledger_rows, result.parameters


def report_tuning(
    trials: pd.DataFrame, trial_ledger: pd.DataFrame, tuned_parameters: dict[str, Any], run_metadata: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tuning report: DSR of the chosen configuration against the whole ledger (this run's
    trials included) with the trial count, and how to apply it (logged too); and the MLflow
    metrics: each trial's objective at its trial number, the chosen trial's, and the trial counts."""
    report = tuning_report(trials, trial_ledger, tuned_parameters, run_metadata)
    counts = ", ".join(
        f"{symbol}: DSR {'undefined' if entry['dsr'] is None else format(entry['dsr'], '.3f')} over "
        f"{entry['n_trials']} trials"
        for symbol, entry in report["selection"].items()
    )
    logger.info(
        "tuning chose trial %d (%s); apply it as a config env: copy tuned_parameters.yml of version %s "
        "(under 06_models/tuned_parameters.yml/ of this env's data root) to conf/tuned/parameters_tuned.yml "
        "and run with --env tuned (or to conf/local/ for every plain run); the --params string is the "
        "report's chosen.params_argument",
        report["chosen"]["trial"],
        counts,
        run_metadata.get("save_version"),
    )
    return report, tuning_metrics(trials, report)


def tuning_metrics(trials: pd.DataFrame, report: dict[str, Any]) -> dict[str, Any]:
    per_trial = trials.drop_duplicates("trial")
    metrics: dict[str, Any] = {
        "trial/objective": [
            {"value": float(row.objective), "step": int(row.trial)} for row in per_trial.itertuples(index=False)
        ],
        "chosen/objective": {"value": report["chosen"]["objective"], "step": report["chosen"]["trial"]},
    }
    for state, count in per_trial["state"].value_counts().items():
        metrics[f"trials/{state}"] = {"value": int(count), "step": 0}
    return metrics
