"""Thin nodes around ``trading_rl.evaluation.ledger.final``."""

from __future__ import annotations

from functools import partial
from typing import Any

import pandas as pd

from trading_rl.envs.compatibility import check_model_fits_spec
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.ledger.final import (
    SPLIT,
    FinalEvaluationParams,
    check_test_split,
    evaluate_on_test,
    evaluated_configuration,
)
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, env_tearsheet, sb3_rollouts
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.training.identity import sac_icm_configuration
from trading_rl.training.params import SacIcmParams


def check_final_evaluation(
    prior_trial_ledger: pd.DataFrame,
    model: Any,
    env_spec: Any,
    params: FinalEvaluationParams,
    sac_icm: SacIcmParams,
    env_construction: EnvConstructionParams,
    feature_extraction: FeatureExtractionParams,
    seed: int,
) -> dict[str, Any]:
    """The evaluation's identity (the model's recorded configuration and weights' digest), saved as
    the test-split claim (``final_evaluation_claim``, exclusive per artefact and configuration). Fails
    before anything is evaluated when the model does not fit ``env_spec``, when this run's parameters
    disagree with the model's configuration, or when its test split was already spent and
    ``final_evaluation.allow_repeat`` is false."""
    check_model_fits_spec(model, env_spec, model_dataset="sac_icm_model", pipeline="final_evaluation")
    run_configuration = sac_icm_configuration(sac_icm.agent, env_construction, feature_extraction, seed)
    configuration = evaluated_configuration(model, run_configuration, "sac_icm_model")
    return check_test_split(prior_trial_ledger, configuration, params.allow_repeat)


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
    model: Any, env_spec: Any, identity: dict[str, Any], seed: int, regime_validation: RegimeValidationParams
) -> TearsheetInput:
    """The test-split run behind ``final_evaluation_report`` (same env and seed), with the baselines.
    Takes the identity so it runs only once the test split was found unspent (or a repeat allowed)."""
    make_env = partial(env_spec.make_env, SPLIT)
    agents = sb3_rollouts({identity["configuration"]["agent"]: model}, make_env, seed)
    return env_tearsheet("final_evaluation", agents, env_spec, SPLIT, make_env, seed, regime_validation)
