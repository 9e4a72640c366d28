"""The reward_shaper phase's report: the shaped agent next to its source and the baselines, the
objective weights' gates and the shaping's share of the reward. The shaped agent and the section are
``rewards.shaped_training``."""

from __future__ import annotations

from functools import partial
from typing import Any

from trading_rl.evaluation.metrics.report import evaluate_policy
from trading_rl.evaluation.metrics.rollout import policy_from_sb3
from trading_rl.monitoring.collapse import CollapseThresholds
from trading_rl.rewards.shaped_training import (
    RewardShaperParams,
)


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
