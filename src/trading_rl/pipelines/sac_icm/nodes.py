"""Thin nodes around ``trading_rl.phases.sac_icm``.

The one deliberate side effect is the rolling resume checkpoint under ``resume_dir``: a killed
training run must be able to continue, which a catalog dataset (written only at node end) cannot do.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from trading_rl.envs import EnvSpec
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, env_tearsheet, sb3_rollouts
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases import sac_icm
from trading_rl.pipelines.tracking import stream_to_mlflow
from trading_rl.training.params import SacIcmParams


def train_sac_icm_node(
    env_spec: EnvSpec,
    params: SacIcmParams,
    seed: int,
    run_metadata: dict[str, Any],
    feature_params: dict[str, Any] | None = None,
    env_construction: EnvConstructionParams | None = None,
    feature_extraction: FeatureExtractionParams | None = None,
) -> tuple[Any, Any, list[dict]]:
    """``phases.sac_icm.train_sac_icm``; every evaluation's metrics reach MLflow while training
    runs (``stream_to_mlflow``)."""
    outcome = sac_icm.train_sac_icm(
        env_spec,
        params,
        seed,
        run_metadata,
        feature_params,
        env_construction,
        feature_extraction,
        stream_to_mlflow("sac_icm"),
    )
    return outcome.model, outcome.best_model, outcome.history


def sac_icm_tearsheet(
    model: Any, env_spec: EnvSpec, params: SacIcmParams, seed: int, regime_validation: RegimeValidationParams
) -> TearsheetInput:
    """The final model's deterministic run on the evaluation split, next to the baselines."""
    split = params.evaluation_split
    make_env = partial(env_spec.make_env, split)
    agents = sb3_rollouts({"sac_icm": model}, make_env, seed)
    return env_tearsheet("sac_icm", agents, env_spec, split, make_env, seed, regime_validation)
