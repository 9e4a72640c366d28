"""Spending the test split once: the final evaluation of one named configuration.

A configuration is identified by ``provenance.config_hash`` of what defines its trained agent
(``final_configuration``). Before anything is evaluated or written, the trial ledger is checked: a
``final_evaluation`` row on the ``test`` split with the same hash means the test split was already
spent on it, and the evaluation is refused unless ``final_evaluation.allow_repeat`` is true (the
repeat is then recorded in the ledger row). The report holds the agent's and the baselines' test
metrics with PSR, and the agent's DSR against the configurations the ledger counts for the symbol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd

from trading_rl.config import Section, setting
from trading_rl.envs.compatibility import check_model_fits_spec, check_spec_symbol, model_metadata
from trading_rl.evaluation.ledger import Trials, deflated_sharpe, earlier_evaluations, trial_row, trials_for
from trading_rl.evaluation.metrics import json_ready
from trading_rl.evaluation.report import evaluate_policy
from trading_rl.evaluation.rollout import policy_from_sb3
from trading_rl.provenance import config_hash

PARAMS_PREFIX = "final_evaluation"
SOURCE = "final_evaluation"
SPLIT = "test"
SUPPORTED_AGENTS = ("sac_icm",)  # catalog model: <agent>_model


@dataclass(frozen=True, kw_only=True)
class FinalEvaluationParams(Section):
    agent: str = setting("sac_icm", choices=SUPPORTED_AGENTS)
    allow_repeat: bool = False


class SpentTestSplitError(RuntimeError):
    """The configuration was already evaluated on the test split."""


def resolve_final_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults overlaid with ``params``, validated; errors name the parameter."""
    return FinalEvaluationParams.from_mapping(params, PARAMS_PREFIX).to_dict()


def final_configuration(
    agent: str,
    agent_params: Mapping[str, Any],
    env_params: Mapping[str, Any],
    feature_params: Mapping[str, Any],
    seed: int,
) -> dict[str, Any]:
    """What defines the trained agent: the agent and its parameters, the symbol, the env config and
    periods per year, the features, scaler and split dates, and the seed. (The feature symbol list,
    budgets of other phases and run-time settings such as the device are not part of it.)"""
    return {
        "agent": agent,
        "agent_params": dict(agent_params),
        "symbol": env_params["symbol"],
        "env": dict(env_params.get("env") or {}),
        "periods_per_year": env_params.get("periods_per_year"),
        "features": {key: feature_params.get(key) for key in ("features", "scaler", "splits")},
        "seed": seed,
    }


def check_test_split(ledger: pd.DataFrame, configuration: Mapping[str, Any], allow_repeat: bool) -> dict[str, Any]:
    """The configuration's identity (hash, repeat flag), or ``SpentTestSplitError`` when the ledger
    already holds its test-split evaluation and ``allow_repeat`` is false."""
    identity = config_hash(dict(configuration))
    earlier = earlier_evaluations(ledger, identity, SOURCE, SPLIT)
    if not earlier.empty and not allow_repeat:
        first = earlier.iloc[0]
        raise SpentTestSplitError(
            f"the test split was already spent on configuration {identity} (agent {configuration['agent']!r}, "
            f"symbol {configuration['symbol']!r}): final evaluation recorded at {first['timestamp']} "
            f"(save version {first['save_version']}) in the trial ledger ({len(earlier)} evaluation(s)). "
            f"Refusing to evaluate it again; to do so deliberately, run with "
            f"--params {PARAMS_PREFIX}.allow_repeat=true (the ledger row records repeat: true)."
        )
    return {"configuration": dict(configuration), "config_hash": identity, "repeat": not earlier.empty}


def evaluate_on_test(
    model: Any,
    env_spec: Any,
    identity: Mapping[str, Any],
    ledger: pd.DataFrame,
    seed: int,
    run: Mapping[str, Any] | None = None,
    model_dataset: str = "sac_icm_model",
) -> tuple[dict[str, Any], pd.DataFrame]:
    """``(report, ledger rows)`` of the model (SB3 ``predict``) on ``env_spec``'s test split."""
    configuration = identity["configuration"]
    symbol = configuration["symbol"]
    check_spec_symbol(env_spec, symbol, pipeline="final_evaluation")
    check_model_fits_spec(model, env_spec, model_dataset=model_dataset, pipeline="final_evaluation")
    metadata = model_metadata(model)
    evaluation, collapse = evaluate_policy(
        configuration["agent"],
        policy_from_sb3(model, deterministic=True),
        policy_from_sb3(model, deterministic=False),
        partial(env_spec.make_env, SPLIT),
        env_spec.periods_per_year,
        seed=seed,
    )
    trials: Trials = trials_for(ledger, symbol)
    report = {
        "agent": configuration["agent"],
        "symbol": symbol,
        "split": SPLIT,
        "config_hash": identity["config_hash"],
        "configuration": configuration,
        "repeat": identity["repeat"],
        **evaluation,
        "dsr": json_ready({"dsr": deflated_sharpe(evaluation["return_moments"], trials)})["dsr"],
        "trials": {
            "n_trials": trials.n,
            "by_source": trials.by_source,
            "from": "trial_ledger: one per configuration hash tried for the symbol, test-split rows excluded",
        },
        "collapse": collapse,
        "model_metadata": metadata,
        "run": dict(run or {}),
    }
    row = trial_row(
        source=SOURCE,
        symbol=symbol,
        split=SPLIT,
        period_start=evaluation["start"],
        period_end=evaluation["end"],
        agent=configuration["agent"],
        configuration=configuration,
        moments=evaluation["return_moments"],
        n_runs=1,
        periods_per_year=env_spec.periods_per_year,
        run=run,
        repeat=identity["repeat"],
    )
    return report, pd.DataFrame([row])
