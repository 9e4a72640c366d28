"""The sac_icm phase: SAC+ICM trained on an env spec's training split and evaluated next to the
baselines on its evaluation split, with what later phases read stored in the models, and its tearsheet.

The one deliberate side effect is the rolling resume checkpoint under ``resume_dir``: a killed
training run must be able to continue, which a catalog dataset (written only at node end) cannot do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.envs import EnvSpec
from trading_rl.envs.compatibility import model_metadata, model_signature, set_model_metadata
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.envs.deployment import deployment_metadata
from trading_rl.evaluation.ledger.final import CONFIGURATION_METADATA
from trading_rl.evaluation.metrics.report import evaluate_policy, flat_metrics
from trading_rl.evaluation.metrics.rollout import policy_from_sb3
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, env_tearsheet, sb3_rollouts
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.monitoring.collapse import enforce
from trading_rl.training.identity import sac_icm_configuration
from trading_rl.training.loop import train_agent
from trading_rl.training.params import SacIcmParams


def train_sac_icm(
    env_spec: EnvSpec,
    params: SacIcmParams,
    seed: int,
    run_metadata: Mapping[str, Any],
    feature_params: Mapping[str, Any] | None = None,
    env_construction: EnvConstructionParams | None = None,
    feature_extraction: FeatureExtractionParams | None = None,
    metrics_callback: Callable[[dict[str, float], int], None] | None = None,
) -> tuple[Any, Any, list[dict]]:
    """Train on random episodes of the training split, evaluating on ``evaluation_split`` (each
    evaluation's metrics to ``metrics_callback``: the pipeline streams them to MLflow while training
    runs); the final model, the best model and the training history. With ``feature_params`` (by symbol), the models
    carry what a forward rerun rebuilds their observations from (``phases.forward.
    deployment_metadata``); with ``env_construction`` and ``feature_extraction``, the configuration they
    were trained with (``training.identity.sac_icm_configuration``), which final_evaluation spends
    the test split on."""
    agent_params = params.agent
    eval_split = params.evaluation_split
    model = build_agent(env_spec.make_env("train", seed=seed), agent_params, seed=seed, device=params.device)
    outcome = train_agent(
        model,
        partial(env_spec.make_env, eval_split),
        agent_params,
        work_dir=f"{params.resume_dir}/{env_spec.symbol}",
        periods_per_year=env_spec.periods_per_year,
        metrics_callback=metrics_callback,
        progress_bar=params.progress_bar,
        phase="sac_icm",
        symbol=env_spec.symbol,
        run_parameters={"seed": seed, "evaluation_split": eval_split, "env_spec": env_spec.digest()},
    )
    metadata = {**run_metadata, **model_signature(env_spec), "best_timestep": outcome.best_timestep}
    if env_construction is not None and feature_extraction is not None:
        metadata[CONFIGURATION_METADATA] = sac_icm_configuration(
            agent_params, env_construction, feature_extraction, seed
        )
    if feature_params is not None:
        metadata["deployment"] = deployment_metadata(env_spec, feature_params[env_spec.symbol])
    for trained in (outcome.model, outcome.best_model):
        set_model_metadata(trained, metadata)
    return outcome.model, outcome.best_model, outcome.history


def evaluate_sac_icm(
    model: Any, env_spec: EnvSpec, params: SacIcmParams, seed: int
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict]]:
    """The final model next to the baselines on the evaluation split, its collapse summary and its
    metrics (MLflow's ``{"value", "step"}`` form); fails on collapse when ``collapse.fail_on_collapse``."""
    collapse = params.agent.collapse
    evaluation, collapse_summary = evaluate_policy(
        "sac_icm",
        policy_from_sb3(model, deterministic=True),
        policy_from_sb3(model, deterministic=False),
        partial(env_spec.make_env, params.evaluation_split),
        env_spec.periods_per_year,
        seed=seed,
        thresholds=collapse,
    )
    evaluation["split"] = params.evaluation_split
    evaluation["model_metadata"] = model_metadata(model)
    enforce(collapse_summary["deterministic"], collapse.fail_on_collapse)
    metrics = {key: {"value": value, "step": 0} for key, value in flat_metrics(evaluation).items()}
    return evaluation, collapse_summary, metrics


def sac_icm_tearsheet(
    model: Any, env_spec: EnvSpec, params: SacIcmParams, seed: int, regime_validation: RegimeValidationParams
) -> TearsheetInput:
    """The final model's deterministic run on the evaluation split, next to the baselines."""
    split = params.evaluation_split
    make_env = partial(env_spec.make_env, split)
    agents = sb3_rollouts({"sac_icm": model}, make_env, seed)
    return env_tearsheet("sac_icm", agents, env_spec, split, make_env, seed, regime_validation)
