"""The options_her phase: the hierarchical agent trained (warm-started from the sac_icm model), its
reports (option usage against the option-collapse gates, HER's effect and the evaluation next to the
baselines) and its tearsheet. The agent and its section are ``algorithms.options_her.from_spec``.

The section's HER and option sub-sections are ``algorithms.options_her.her.HerParams`` and
``algorithms.options_her.options.OptionParams``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from trading_rl.algorithms.options_her.from_spec import (
    OptionGateParams,
    OptionsHerParams,
    evaluate_from_spec,
    train_from_spec,
)
from trading_rl.algorithms.options_her.her import (
    FastHerReplayBuffer,
    relabelled_fraction,
)
from trading_rl.algorithms.options_her.hierarchical import (
    HierarchicalAgent,
    rollout_agent,
)
from trading_rl.envs.compatibility import check_model_fits_spec
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, env_tearsheet
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.training.device import resolve_device


def train_options_her(
    env_spec,
    sac_icm_model,
    params: OptionsHerParams,
    seed: int,
    metrics_callback: Callable[[dict[str, float], int], None] | None = None,
):
    """Train the hierarchical agent; returns the model and, for the report, the monitoring history
    and the option statistics of the whole training run. The monitoring rows and every finished
    episode's reward go to ``metrics_callback`` while training runs (the pipeline streams them to
    MLflow as ``options_her/train/*``). The warm start copies weights by input position, so a source
    model trained on another observation layout is refused first."""
    check_model_fits_spec(sac_icm_model, env_spec, model_dataset="sac_icm_model", pipeline="options_her")
    agent, history, training_stats = train_from_spec(
        env_spec,
        sac_icm_model,
        params,
        seed,
        device=resolve_device(params.device),
        metrics_callback=metrics_callback,
    )
    return agent, {"history": history, "option_stats": training_stats}


def evaluate_and_report(
    agent: HierarchicalAgent, env_spec, training: dict[str, Any], params: OptionsHerParams, seed: int
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The phase's reports: option usage (training and evaluation, with the option gates of
    docs/options_her.md), HER (its settings and goal achievement) and the validation evaluation next
    to the baselines. ``training``: ``{"history", "option_stats"}`` of the training run.
    ``gates.fail_on_gate`` fails the run on a gate."""
    evaluation = evaluate_from_spec(agent, env_spec, params, seed)
    gates = params.gates
    usage_report: dict[str, Any] = {"options_enabled": agent.uses_options}
    if agent.uses_options:
        training_gates = option_gates(training["option_stats"], gates)
        usage_report.update(
            training=training["option_stats"],
            training_gates=training_gates,
            passed=all(row["passed"] for row in training_gates),
            evaluation=evaluation["option_stats"],
            evaluation_option_share=evaluation["option_share"],
            final_controller={
                key: value
                for key, value in (training["history"][-1] if training["history"] else {}).items()
                if key.startswith("controller_") or key == "temperature"
            },
        )
        if gates.fail_on_gate and not usage_report["passed"]:
            failed = [row["gate"] for row in training_gates if not row["passed"]]
            raise ValueError(
                f"option gates failed: {failed} (set options_her.gates.fail_on_gate: false to report only)"
            )
    her = params.her
    her_report = {
        "enabled": agent.her is not None,
        "replay_buffer": (
            f"{FastHerReplayBuffer.__module__}.{FastHerReplayBuffer.__qualname__} (SB3 HerReplayBuffer)"
            if agent.her is not None
            else "SB3 ReplayBuffer"
        ),
        "goal_selection_strategy": her.goal_selection_strategy,
        "n_sampled_goal": her.n_sampled_goal,
        "relabelled_fraction": relabelled_fraction(her.n_sampled_goal),
        "goal_range": [her.goal_low, her.goal_high],
        "tolerance": her.tolerance,
        "reward_distance": her.reward_distance,
        "goal_unit": her.goal_unit,
        "reward": f"{her.pnl_weight} x P&L x reward_scale {agent.reward_scale} + {her.goal_weight} x goal reward",
        **evaluation["goals"],
    }
    evaluation_report = {
        "split": evaluation["split"],
        "agent": evaluation["metrics"],
        "baselines": evaluation["baselines"],
    }
    return usage_report, her_report, evaluation_report


def option_gates(stats: dict[str, Any], gates: OptionGateParams) -> list[dict[str, Any]]:
    """The option-collapse gates (docs/options_her.md, "Gates") on usage statistics (``OptionVecEnv.stats``).

    Usable options (offered at least once by their initiation set) must each exceed ``min_usage``;
    no option may exceed ``max_usage``; the run-weighted average duration must exceed
    ``min_avg_duration``; an option whose average duration is below ``instant_fraction`` × its
    minimum duration is an instant-termination alarm.
    """
    g = gates
    options = stats["options"]
    rows: list[dict[str, Any]] = []
    for name, option in options.items():
        if option["available_at_selection"] > 0:
            passed = option["usage"] > g.min_usage
            row = {
                "gate": f"usage_{name}",
                "value": option["usage"],
                "threshold": f"> {g.min_usage}",
                "passed": passed,
            }
            if not passed:
                row["cause"] = _starvation_cause(option)
            rows.append(row)
    busiest = max(options, key=lambda name: options[name]["usage"])
    max_usage = options[busiest]["usage"]
    rows.append(
        {
            "gate": "max_usage",
            "value": max_usage,
            "threshold": f"<= {g.max_usage}",
            "passed": max_usage <= g.max_usage,
            "option": busiest,
        }
    )
    finished = [option for option in options.values() if option["runs"]]
    runs = sum(option["runs"] for option in finished)
    avg = sum(option["avg_duration"] * option["runs"] for option in finished) / runs if runs else 0.0
    rows.append(
        {
            "gate": "avg_duration",
            "value": avg,
            "threshold": f"> {g.min_avg_duration}",
            "passed": avg > g.min_avg_duration,
        }
    )
    for name, option in options.items():
        if option["avg_duration"] is not None:
            limit = g.instant_fraction * option["min_duration_config"]
            rows.append(
                {
                    "gate": f"no_instant_termination_{name}",
                    "value": option["avg_duration"],
                    "threshold": f">= {limit}",
                    "passed": option["avg_duration"] >= limit,
                }
            )
    return rows


def _starvation_cause(option: dict[str, Any]) -> str:
    """Why an option is under its usage floor: its initiation set rarely held (the signals), or it
    was offered and the controller passed it over (the learner), or its runs are short."""
    offered_share = option.get("available_share")
    offered = option["available_at_selection"]
    if offered_share is not None and offered_share < 0.5:
        return f"initiation set held at only {offered_share:.0%} of option selections"
    started = option["runs"] + option.get("truncated_runs", 0)
    if started < 0.1 * offered:
        return f"offered at {offered} selections, chosen {started} times by the controller"
    return f"chosen {started} times but its runs average {option['avg_duration']} steps"


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
