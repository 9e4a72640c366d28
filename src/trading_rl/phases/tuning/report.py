"""The tuning report (the chosen configuration's PSR and Deflated Sharpe against every trial on the
ledger, how to apply it) and the tuning run's MLflow metrics."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import pandas as pd

from trading_rl.evaluation.ledger.ledger import Period, deflated_sharpe, trials_for
from trading_rl.evaluation.metrics.metrics import MOMENT_KEYS, json_ready, psr_from_moments
from trading_rl.phases.tuning.params import DATA_END, OBJECTIVE, params_argument

logger = logging.getLogger(__name__)


def tuning_report(
    trials: pd.DataFrame, ledger: pd.DataFrame, parameters: Mapping[str, Any], run: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The study (trial counts, table), the chosen configuration with its ``--params`` string, and
    per symbol its PSR and Deflated Sharpe on the trials' out-of-sample windows. DSR counts every
    configuration in ``ledger`` for the symbol (``ledger.trials_for``: this study's trials and
    every earlier one, of any source); ``n_trials`` says how many."""
    per_trial = trials.drop_duplicates("trial")
    chosen = trials[trials["chosen"]]
    selection = {}
    for row in chosen.itertuples(index=False):
        # A pruned row of the same configuration (a duplicate sample) holds only its rung's seeds.
        rows = ledger[
            (ledger["config_hash"] == row.config_hash) & (ledger["split"] != "test") & (ledger["state"] != "pruned")
        ]
        if rows.empty:
            raise ValueError(
                f"dataset 'trial_ledger' has no row for the chosen configuration {row.config_hash} "
                f"of {row.symbol}: the tuning rows were not appended"
            )
        moments = rows.iloc[-1][list(MOMENT_KEYS)].to_dict()
        period = Period.of(rows.iloc[-1]["period_start"], rows.iloc[-1]["period_end"])
        trials_counted = trials_for(ledger, row.symbol, period)
        selection[row.symbol] = {
            "config_hash": row.config_hash,
            **json_ready(
                {
                    "sharpe_median": row.symbol_sharpe_median,
                    "sharpe_annualised": rows.iloc[-1]["sharpe_annualised"],
                    "psr": psr_from_moments(moments),
                    "dsr": deflated_sharpe(moments, trials_counted),
                    "n_trials": trials_counted.n,
                    "trials_variance": trials_counted.variance,
                }
            ),
            "trials_period": {"start": period.start, "end": period.end},
            "trials_by_source": trials_counted.by_source,
        }
    best = chosen.iloc[0]
    table = per_trial.drop(columns=["symbol", "symbol_sharpe_median", "config_hash"])
    return {
        "objective": OBJECTIVE,
        "data_end": DATA_END,
        "out_of_sample": {
            row.symbol: {"start": row.period_start, "end": row.period_end}
            for row in ledger[ledger["config_hash"].isin(chosen["config_hash"])].itertuples()
        },
        "n_study_trials": int(len(per_trial)),
        "n_failed": int((per_trial["state"] == "fail").sum()),
        "n_pruned": int((per_trial["state"] == "pruned").sum()),
        "chosen": {
            "trial": int(best["trial"]),
            "objective": float(best["objective"]),
            "parameters": dict(parameters),
            "params_argument": params_argument(parameters),
        },
        "selection": selection,
        "trials": json.loads(table.to_json(orient="records")),  # NaN as null
        "run": dict(run or {}),
    }


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
