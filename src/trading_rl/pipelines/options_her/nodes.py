"""Thin nodes around ``trading_rl.phases.options_her``."""

from __future__ import annotations

from functools import partial

from trading_rl.algorithms.options_her.from_spec import OptionsHerParams, train_from_spec
from trading_rl.algorithms.options_her.hierarchical import HierarchicalAgent, rollout_agent
from trading_rl.envs.compatibility import check_model_fits_spec
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, env_tearsheet
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.pipelines.tracking import stream_to_mlflow
from trading_rl.training.device import resolve_device


def train_options_her(env_spec, sac_icm_model, params: OptionsHerParams, seed: int):
    """Train the hierarchical agent; returns the model and, for the report, the monitoring history
    and the option statistics of the whole training run. The monitoring rows and every finished
    episode's reward reach MLflow while training runs (``options_her/train/*``, ``stream_to_mlflow``).
    The warm start copies weights by input position, so a source model trained on another
    observation layout is refused first."""
    check_model_fits_spec(sac_icm_model, env_spec, model_dataset="sac_icm_model", pipeline="options_her")
    agent, history, training_stats = train_from_spec(
        env_spec,
        sac_icm_model,
        params,
        seed,
        device=resolve_device(params.device),
        metrics_callback=stream_to_mlflow("options_her"),
    )
    return agent, {"history": history, "option_stats": training_stats}


def options_her_tearsheet(
    agent: HierarchicalAgent,
    env_spec,
    params: OptionsHerParams,
    seed: int,
    regime_validation: RegimeValidationParams,
) -> TearsheetInput:
    """The hierarchical agent's deterministic run on the evaluation split (aiming at the middle of
    the goal range, as its evaluation report does), next to the baselines on the same env."""
    section = params
    split = section.evaluation.split
    make_env = partial(env_spec.make_env, split, evaluation=True, **section.env_overrides)
    rollout, _ = rollout_agent(agent, make_env, seed, desired_goal=section.goal_middle())
    return env_tearsheet(
        "options_her",
        {"options_her": rollout},
        env_spec,
        split,
        make_env,
        seed,
        regime_validation,
        section.env_overrides,
    )
