"""Thin nodes around ``trading_rl.evaluation.ledger.final``."""

from __future__ import annotations

from functools import partial
from typing import Any

import pandas as pd

from trading_rl.envs.compatibility import check_model_fits_spec
from trading_rl.evaluation.ledger.final import (
    PARAMS_PREFIX,
    SPLIT,
    FinalEvaluationParams,
    check_test_split,
    evaluate_on_test,
    evaluated_configuration,
)
from trading_rl.pipelines.tearsheet import TearsheetInput, env_tearsheet, sb3_rollouts
from trading_rl.training.identity import sac_icm_configuration
from trading_rl.training.params import AgentParams


def check_final_evaluation(
    prior_trial_ledger: pd.DataFrame,
    model: Any,
    env_spec: Any,
    params: dict[str, Any],
    sac_icm_params: dict[str, Any],
    env_params: dict[str, Any],
    feature_params: dict[str, Any],
    seed: int,
) -> dict[str, Any]:
    """The evaluation's identity (the model's recorded configuration and weights' digest), saved as
    the test-split claim (``final_evaluation_claim``, exclusive per artefact and configuration). Fails
    before anything is evaluated when the model does not fit ``env_spec``, when this run's parameters
    disagree with the model's configuration, or when its test split was already spent and
    ``final_evaluation.allow_repeat`` is false."""
    resolved = FinalEvaluationParams.from_mapping(params, PARAMS_PREFIX)
    check_model_fits_spec(model, env_spec, model_dataset="sac_icm_model", pipeline="final_evaluation")
    agent = AgentParams.from_mapping(sac_icm_params["agent"], "sac_icm.agent")
    run_configuration = sac_icm_configuration(agent, env_params, feature_params, seed)
    configuration = evaluated_configuration(model, run_configuration, "sac_icm_model")
    return check_test_split(prior_trial_ledger, configuration, resolved.allow_repeat)


def evaluate_final(
    model: Any,
    env_spec: Any,
    identity: dict[str, Any],
    prior_trial_ledger: pd.DataFrame,
    seed: int,
    run_metadata: dict[str, Any],
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The test-split report (agent + baselines, PSR, DSR) and the ledger row to append."""
    return evaluate_on_test(model, env_spec, identity, prior_trial_ledger, seed, run_metadata)


def final_evaluation_tearsheet(
    model: Any, env_spec: Any, identity: dict[str, Any], seed: int, regime_params: dict[str, Any]
) -> TearsheetInput:
    """The test-split run behind ``final_evaluation_report`` (same env and seed), with the baselines.
    Takes the identity so it runs only once the test split was found unspent (or a repeat allowed)."""
    make_env = partial(env_spec.make_env, SPLIT)
    agents = sb3_rollouts({identity["configuration"]["agent"]: model}, make_env, seed)
    return env_tearsheet("final_evaluation", agents, env_spec, SPLIT, make_env, seed, regime_params)
