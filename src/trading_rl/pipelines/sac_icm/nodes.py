"""Thin nodes around ``trading_rl.agents`` and ``trading_rl.evaluation``.

The one deliberate side effect is the rolling resume checkpoint under ``resume_dir``: a killed
training run must be able to continue, which a catalog dataset (written only at node end) cannot do.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from trading_rl.agents import build_agent, train_agent
from trading_rl.agents.identity import sac_icm_configuration
from trading_rl.envs import EnvSpec
from trading_rl.envs.compatibility import model_metadata, model_signature, set_model_metadata
from trading_rl.evaluation.final import CONFIGURATION_METADATA
from trading_rl.evaluation.report import evaluate_policy, flat_metrics
from trading_rl.evaluation.rollout import policy_from_sb3
from trading_rl.monitoring.collapse import enforce
from trading_rl.phases.forward import deployment_metadata
from trading_rl.pipelines.tearsheet import TearsheetInput, env_tearsheet, sb3_rollouts
from trading_rl.pipelines.tracking import stream_to_mlflow


def train_sac_icm(
    env_spec: EnvSpec,
    params: dict[str, Any],
    seed: int,
    run_metadata: dict[str, Any],
    feature_params: dict[str, Any] | None = None,
    env_params: dict[str, Any] | None = None,
    feature_extraction: dict[str, Any] | None = None,
) -> tuple[Any, Any, list[dict]]:
    """Train on random episodes of the training split, evaluating on ``evaluation_split``; every
    evaluation's metrics reach MLflow while training runs (``stream_to_mlflow``). With
    ``feature_params``, the models carry what a forward rerun rebuilds their observations from
    (``phases.forward.deployment_metadata``); with ``env_params`` and ``feature_extraction``, the
    configuration they were trained with (``agents.identity.sac_icm_configuration``), which
    final_evaluation spends the test split on."""
    agent_params = params["agent"]
    eval_split = params["evaluation_split"]
    model = build_agent(env_spec.make_env("train", seed=seed), agent_params, seed=seed, device=params["device"])
    outcome = train_agent(
        model,
        partial(env_spec.make_env, eval_split),
        agent_params,
        work_dir=f"{params['resume_dir']}/{env_spec.symbol}",
        periods_per_year=env_spec.periods_per_year,
        metrics_callback=stream_to_mlflow("sac_icm"),
        progress_bar=params.get("progress_bar", "auto"),
        phase="sac_icm",
        symbol=env_spec.symbol,
        run_parameters={"seed": seed, "evaluation_split": eval_split, "env_spec": env_spec.digest()},
    )
    metadata = {**run_metadata, **model_signature(env_spec), "best_timestep": outcome.best_timestep}
    if env_params is not None and feature_extraction is not None:
        metadata[CONFIGURATION_METADATA] = sac_icm_configuration(params, env_params, feature_extraction, seed)
    if feature_params is not None:
        metadata["deployment"] = deployment_metadata(env_spec, feature_params[env_spec.symbol])
    for trained in (outcome.model, outcome.best_model):
        set_model_metadata(trained, metadata)
    return outcome.model, outcome.best_model, outcome.history


def evaluate_sac_icm(
    model: Any, env_spec: EnvSpec, params: dict[str, Any], seed: int
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict]]:
    """Evaluate the final model next to the baselines; optionally fail the run on collapse."""
    collapse = dict(params["agent"].get("collapse") or {})
    fail_on_collapse = bool(collapse.pop("fail_on_collapse", False))
    thresholds = {k: collapse[k] for k in ("dominance_max", "entropy_min", "trade_rate_min") if k in collapse}
    evaluation, collapse_summary = evaluate_policy(
        "sac_icm",
        policy_from_sb3(model, deterministic=True),
        policy_from_sb3(model, deterministic=False),
        partial(env_spec.make_env, params["evaluation_split"]),
        env_spec.periods_per_year,
        seed=seed,
        thresholds=thresholds,
    )
    evaluation["split"] = params["evaluation_split"]
    evaluation["model_metadata"] = model_metadata(model)
    enforce(collapse_summary["deterministic"], fail_on_collapse)
    metrics = {key: {"value": value, "step": 0} for key, value in flat_metrics(evaluation).items()}
    return evaluation, collapse_summary, metrics


def sac_icm_tearsheet(
    model: Any, env_spec: EnvSpec, params: dict[str, Any], seed: int, regime_params: dict[str, Any]
) -> TearsheetInput:
    """The final model's deterministic run on the evaluation split, next to the baselines."""
    split = params["evaluation_split"]
    make_env = partial(env_spec.make_env, split)
    agents = sb3_rollouts({"sac_icm": model}, make_env, seed)
    return env_tearsheet("sac_icm", agents, env_spec, split, make_env, seed, regime_params)
