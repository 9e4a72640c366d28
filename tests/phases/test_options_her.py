"""The options_her phase's option-collapse gates."""

from trading_rl.algorithms.options_her.from_spec import OptionGateParams
from trading_rl.algorithms.options_her.options import OPTION_NAMES
from trading_rl.phases.options_her import option_gates


def test_option_gates():
    def option(usage, runs, avg, available=1, min_config=5):
        return {
            "usage": usage,
            "steps": int(usage * 100),
            "runs": runs,
            "avg_duration": avg,
            "min_duration": None,
            "available_at_selection": available,
            "min_duration_config": min_config,
        }

    healthy = {"options": {name: option(1 / 6, 3, 6.0) for name in OPTION_NAMES}}
    assert all(row["passed"] for row in option_gates(healthy, OptionGateParams()))
    collapsed = {"options": {name: option(0.0, 0, None) for name in OPTION_NAMES}}
    collapsed["options"]["wait"] = option(1.0, 50, 2.0)
    collapsed["options"]["open_short"] = option(0.0, 0, None, available=0)  # not usable: no gate
    failed = {row["gate"] for row in option_gates(collapsed, OptionGateParams()) if not row["passed"]}
    assert failed == {
        "usage_open_long",
        "usage_close_position",
        "usage_trend_follow",
        "usage_scalp",
        "max_usage",
        "avg_duration",
        "no_instant_termination_wait",
    }


def test_failed_usage_gates_name_the_cause():
    def option(usage, runs, available, available_share, truncated=0):
        return {
            "usage": usage,
            "steps": int(usage * 100),
            "runs": runs,
            "avg_duration": 6.0 if runs else None,
            "min_duration": None,
            "truncated_runs": truncated,
            "available_at_selection": available,
            "available_share": available_share,
            "min_duration_config": 5,
        }

    stats = {"options": {name: option(0.2, 10, 50, 1.0) for name in OPTION_NAMES}}
    stats["options"]["open_short"] = option(0.01, 1, 4, 0.08)  # the signal rarely allows it
    stats["options"]["trend_follow"] = option(0.01, 1, 40, 0.8)  # allowed, rarely chosen
    rows = {row["gate"]: row for row in option_gates(stats, OptionGateParams())}
    assert rows["usage_open_short"]["cause"] == "initiation set held at only 8% of option selections"
    assert rows["usage_trend_follow"]["cause"] == "offered at 40 selections, chosen 1 times by the controller"
    assert "cause" not in rows["usage_wait"]
    assert rows["max_usage"]["option"] in OPTION_NAMES


def test_the_neutral_setting_trains_nothing_and_reports_the_source_unchanged():
    """``training.total_timesteps: 0`` (base since 2026-12-06): the phase's agent is the warm-started
    hierarchy, so its validation metrics are the source model's on the same env, and the report runs."""
    import dataclasses

    import torch
    from helpers.options_her_env import small_source_model, small_spec

    from trading_rl.algorithms.options_her.from_spec import OptionsHerParams, OptionsHerTrainingParams
    from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
    from trading_rl.phases.options_her import evaluate_and_report, train_options_her

    torch.set_num_threads(1)
    spec = small_spec()
    source = small_source_model(spec)
    params = OptionsHerParams()
    params = dataclasses.replace(
        params,
        training=OptionsHerTrainingParams(total_timesteps=0),
        evaluation=dataclasses.replace(params.evaluation, goal_episodes=2),
    )
    agent, training = train_options_her(spec, source, params, seed=0)
    usage, _, evaluation = evaluate_and_report(agent, spec, training, params, seed=0)
    flat = run_episode(
        spec.make_env("validation", evaluation=True, **params.env_overrides), policy_from_sb3(source), seed=0
    )
    hierarchy = agent.rollout(spec, "validation", seed=0)
    assert hierarchy["equity"].tolist() == flat["equity"].tolist()
    assert usage["evaluation_option_share"]["scalp"] == 1.0
    assert evaluation["split"] == "validation"
