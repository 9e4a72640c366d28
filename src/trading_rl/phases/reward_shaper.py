"""The reward_shaper phase: the source agent's rollouts, the objective-weight network and potential Φ
fitted on them, the source agent continued on the shaped reward, and its report (the shaped agent next
to its source and the baselines, the objective weights' gates and the shaping's share of the reward)
and tearsheet. The shaped agent and the section are ``rewards.shaped_training``.

The one deliberate side effect is the rolling resume checkpoint under ``resume_dir`` (as in
``sac_icm``): a killed continuation must be able to pick up where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from trading_rl.envs.compatibility import check_model_fits_spec, model_signature, set_model_metadata
from trading_rl.evaluation.metrics.report import evaluate_policy, flat_metrics
from trading_rl.evaluation.metrics.rollout import policy_from_sb3
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, env_tearsheet, sb3_rollouts
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.monitoring.collapse import CollapseThresholds
from trading_rl.rewards.shaped_training import (
    RewardShaperParams,
    collect_rollouts,
    continue_training,
    fit_reward_models,
)


def collect_reward_rollouts(sac_icm_model, env_spec, params: RewardShaperParams, seed: int) -> dict:
    """Rollouts of the source agent on the training split with every objective recorded; the first
    node, so a source agent not trained on ``env_spec`` is refused before anything is written."""
    check_model_fits_spec(sac_icm_model, env_spec, model_dataset="sac_icm_model", pipeline="reward_shaper")
    return collect_rollouts(sac_icm_model, env_spec, params, seed)


def fit_reward_shaper(rollouts: dict, sac_icm_model, params: RewardShaperParams, seed: int):
    """Objective-weight network and potential Φ (discounted with the agent's γ), plus their fit report."""
    return fit_reward_models(rollouts, params, float(sac_icm_model.gamma), seed)


def train_shaped_agent(
    sac_icm_model,
    env_spec,
    weight_network,
    potential,
    section: RewardShaperParams,
    seed: int,
    run_metadata: dict[str, Any],
    metrics_callback: Callable[[dict[str, float], int], None] | None = None,
):
    """Continue the source agent on the shaped reward; returns the model and its training record.
    Every evaluation's metrics go to ``metrics_callback`` while it trains (the pipeline streams them
    to MLflow as ``reward_shaper/*``)."""
    outcome, reward_history, adaptation_history = continue_training(
        sac_icm_model,
        env_spec,
        weight_network,
        potential,
        section,
        seed,
        work_dir=f"{section.resume_dir}/{env_spec.symbol}",
        metrics_callback=metrics_callback,
    )
    set_model_metadata(outcome.model, {**run_metadata, **model_signature(env_spec), "source": "sac_icm_model"})
    training = {"history": outcome.history, "reward_history": reward_history, "adaptation_history": adaptation_history}
    return outcome.model, training


def shaping_report(
    shaped_model, source_model, env_spec, fit_report: dict, training: dict, params: RewardShaperParams, seed: int
) -> dict[str, Any]:
    """Validation metrics of the shaped and the source agent next to the baselines, the shaper's
    statistics (components, shares, weights, shaping term, β) and the weight gates."""
    split = params.evaluation_split
    evaluations = {}
    for name, model in (("shaped", shaped_model), ("source", source_model)):
        evaluation, collapse = evaluate_policy(
            name,
            policy_from_sb3(model, deterministic=True),
            policy_from_sb3(model, deterministic=False),
            partial(env_spec.make_env, split),
            env_spec.periods_per_year,
            seed=seed,
            thresholds=CollapseThresholds(),
        )
        evaluations[name] = {
            "metrics": evaluation["metrics"],
            "stochastic_metrics": evaluation["stochastic_metrics"],
            "collapse": collapse,
            "baselines": evaluation["baselines"],
        }
    report = {
        "split": split,
        "shaped_agent": {k: v for k, v in evaluations["shaped"].items() if k != "baselines"},
        "source_agent": {k: v for k, v in evaluations["source"].items() if k != "baselines"},
        "baselines": evaluations["shaped"]["baselines"],
        "objectives": params.objectives.to_dict(),
        **fit_report,
        "training_reward": training["reward_history"],
        "shaping_weight": {
            "initial": float(params.shaping.initial_weight),
            "history": training["adaptation_history"],
        },
        "training_evaluations": training["history"],
        "passed": fit_report["weight_gates_passed"],
    }
    if params.gates.fail_on_gate and not report["passed"]:
        failed = [row["gate"] for row in fit_report["weight_gates"] if not row["passed"]]
        raise ValueError(
            f"reward shaper weight gates failed: {failed} (set reward_shaper.gates.fail_on_gate: false to report only)"
        )
    return report


def report_reward_shaping(
    shaped_model,
    sac_icm_model,
    env_spec,
    fit_report: dict,
    training: dict,
    section: RewardShaperParams,
    seed: int,
) -> tuple[dict[str, Any], dict[str, list[dict]]]:
    """Shaping report and the MLflow metrics of its end (validation metrics as ``final/*`` and weight
    gates at the last training step); the ``reward/*`` and ``eval/*`` histories were streamed while
    training ran, so they are not logged a second time here (``eval/*`` at the last step would be a
    second point at one step, and the final evaluation is another measurement: the whole split)."""
    report = shaping_report(shaped_model, sac_icm_model, env_spec, fit_report, training, section, seed)
    metrics: dict[str, list[dict]] = {}
    evaluation = {"metrics": report["shaped_agent"]["metrics"], "baselines": report["baselines"]}
    final_step = training["reward_history"][-1]["timestep"] if training["reward_history"] else 0
    for key, value in flat_metrics(evaluation, "final").items():
        metrics[key] = [{"step": int(final_step), "value": value}]
    for row in report["weight_gates"]:
        metrics[f"gates/{row['gate']}"] = [{"step": int(final_step), "value": float(row["value"])}]
    return report, metrics


def reward_shaper_tearsheet(
    shaped_model,
    sac_icm_model,
    env_spec,
    params: RewardShaperParams,
    seed: int,
    regime_validation: RegimeValidationParams,
) -> TearsheetInput:
    """The shaped agent and its source (unshaped SAC+ICM) on the evaluation split, with the baselines."""
    split = params.evaluation_split
    make_env = partial(env_spec.make_env, split)
    agents = sb3_rollouts({"reward_shaped": shaped_model, "sac_icm (source)": sac_icm_model}, make_env, seed)
    return env_tearsheet("reward_shaper", agents, env_spec, split, make_env, seed, regime_validation)
