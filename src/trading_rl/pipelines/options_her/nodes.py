"""Thin nodes around ``trading_rl.phases.options_her``."""

from __future__ import annotations

from functools import partial
from typing import Any

from trading_rl.algorithms.options_her.hierarchical import HierarchicalAgent, rollout_agent
from trading_rl.envs.compatibility import check_model_fits_spec
from trading_rl.phases.options_her import PARAMS_PREFIX, OptionsHerParams, evaluate_and_report, train_from_spec
from trading_rl.pipelines.tearsheet import TearsheetInput, env_tearsheet
from trading_rl.pipelines.tracking import stream_to_mlflow
from trading_rl.training.device import resolve_device


def train_options_her(env_spec, sac_icm_model, params: dict[str, Any], seed: int):
    """Train the hierarchical agent; returns the model and, for the report, the monitoring history
    and the option statistics of the whole training run. The monitoring rows and every finished
    episode's reward reach MLflow while training runs (``options_her/train/*``, ``stream_to_mlflow``).
    The warm start copies weights by input position, so a source model trained on another
    observation layout is refused first."""
    check_model_fits_spec(sac_icm_model, env_spec, model_dataset="sac_icm_model", pipeline="options_her")
    section = OptionsHerParams.from_mapping(params, PARAMS_PREFIX)
    agent, history, training_stats = train_from_spec(
        env_spec,
        sac_icm_model,
        section,
        seed,
        device=resolve_device(section.device),
        metrics_callback=stream_to_mlflow("options_her"),
    )
    return agent, {"history": history, "option_stats": training_stats}


def evaluate_options_her(
    agent: HierarchicalAgent, env_spec, training: dict[str, Any], params: dict[str, Any], seed: int
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``phases.options_her.evaluate_and_report``: option-usage, HER and evaluation reports."""
    return evaluate_and_report(agent, env_spec, training, OptionsHerParams.from_mapping(params, PARAMS_PREFIX), seed)


def options_her_tearsheet(
    agent: HierarchicalAgent, env_spec, params: dict[str, Any], seed: int, regime_params: dict[str, Any]
) -> TearsheetInput:
    """The hierarchical agent's deterministic run on the evaluation split (aiming at the middle of
    the goal range, as its evaluation report does), next to the baselines on the same env."""
    section = OptionsHerParams.from_mapping(params, PARAMS_PREFIX)
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
        regime_params,
        section.env_overrides,
    )
