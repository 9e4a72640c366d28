import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.vec_env import DummyVecEnv

from trading_rl.monitoring.collapse import (
    CollapseError,
    CollapseMonitorCallback,
    CollapseThresholds,
    action_stats,
    collapse_report,
    enforce,
)


def _gate(report: dict, name: str) -> dict:
    return next(g for g in report["gates"] if g["gate"] == name)


def test_constant_small_action_fails_every_gate_and_enforce_names_them():
    stats = action_stats(np.full(500, 0.05), hold_threshold=0.1)
    assert stats["dominance"] == 1.0 and stats["entropy"] == 0.0 and stats["trade_rate"] == 0.0
    assert stats["hold_share"] == 1.0 and stats["longest_run"] == 500
    report = collapse_report(stats, CollapseThresholds())
    assert report["collapsed"]
    assert _gate(report, "dominance") == {
        "gate": "dominance",
        "value": 1.0,
        "threshold": 0.6,
        "comparison": "<=",
        "passed": False,
    }
    with pytest.raises(CollapseError, match=r"dominance 1 \(needs <= 0.6\).*entropy.*trade_rate"):
        enforce(report, fail_on_collapse=True)
    enforce(report, fail_on_collapse=False)  # configured not to fail: no error


def test_uniform_random_policy_passes_and_matches_hand_entropy():
    actions = np.random.default_rng(0).uniform(-1, 1, 20_000)
    stats = action_stats(actions, hold_threshold=0.1)
    # Bucket widths 0.5, 0.4, 0.2, 0.4, 0.5 over a range of 2 -> shares .25 .2 .1 .2 .25.
    by_hand = -(2 * 0.25 * math.log(0.25) + 2 * 0.2 * math.log(0.2) + 0.1 * math.log(0.1))
    assert stats["entropy"] == pytest.approx(by_hand, abs=0.01)
    assert stats["dominance"] == pytest.approx(0.25, abs=0.01)
    assert stats["trade_rate"] == pytest.approx(0.9, abs=0.01)
    report = collapse_report(stats, CollapseThresholds())
    assert not report["collapsed"] and _gate(report, "dominance")["passed"]


def test_small_sample_statistics_by_hand():
    stats = action_stats([-0.9, -0.3, 0.0, 0.3, 0.9, 0.9], hold_threshold=0.1)
    assert stats["entropy"] == pytest.approx(4 / 6 * math.log(6) + 1 / 3 * math.log(3))
    assert stats["dominance"] == pytest.approx(2 / 6)
    assert stats["share_strong_buy"] == pytest.approx(2 / 6)
    assert stats["longest_run"] == 2
    assert stats["trade_rate"] == pytest.approx(5 / 6)


def test_trade_flags_and_labels_override_the_threshold():
    actions = [0.5, 0.5, -0.5, 0.0]
    assert action_stats(actions, [True, False, False, False], hold_threshold=0.1)["trade_rate"] == 0.25
    assert action_stats(actions, ["buy", "hold", "HOLD", "sell"], hold_threshold=0.1)["trade_rate"] == 0.5
    with pytest.raises(ValueError, match="3 entries for 4 actions"):
        action_stats(actions, [True, False, True], hold_threshold=0.1)


def test_thresholds_come_from_config_and_unknown_ones_are_rejected():
    stats = {"dominance": 0.5, "entropy": 1.0, "trade_rate": 0.2}
    assert not collapse_report(stats, CollapseThresholds())["collapsed"]
    assert collapse_report(stats, CollapseThresholds(dominance_max=0.4))["collapsed"]
    assert collapse_report({**stats, "entropy": math.nan}, CollapseThresholds())["collapsed"]
    with pytest.raises(ValueError, match="dominance_maximum"):
        CollapseThresholds.from_mapping({"dominance_maximum": 0.4}, "sac_icm.agent.collapse")


class _FlatEnv(gym.Env):
    """Constant observation, never ends; reports no fills so trades come from ``info``."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {"trade_value": 0.0}


def test_callback_logs_window_statistics_of_the_stochastic_training_actions():
    torch.set_num_threads(1)
    model = SAC("MlpPolicy", _FlatEnv(), learning_starts=10_000, policy_kwargs={"net_arch": [8]}, seed=0)
    callback = CollapseMonitorCallback(hold_threshold=0.1, window=50, check_freq=40, thresholds=CollapseThresholds())
    model.learn(120, callback=callback)

    assert [entry["timestep"] for entry in callback.history] == [40, 80, 120]
    taken = model.replay_buffer.actions[:120, 0, 0]
    expected = action_stats(taken[70:120], np.zeros(50, dtype=bool), hold_threshold=0.1)
    last = callback.history[-1]
    for key, value in expected.items():
        assert last[key] == pytest.approx(value), key
    assert last["trade_rate"] == 0.0 and last["collapsed"]  # no fills reported by the env
    assert model.logger.name_to_value["collapse/dominance"] == pytest.approx(expected["dominance"])
    assert callback.current_stats()["longest_run"] == expected["longest_run"]


def test_callback_checks_every_check_freq_transitions_with_several_envs():
    torch.set_num_threads(1)
    model = SAC(
        "MlpPolicy", DummyVecEnv([_FlatEnv] * 3), learning_starts=10_000, policy_kwargs={"net_arch": [8]}, seed=0
    )
    callback = CollapseMonitorCallback(hold_threshold=0.1, window=30, check_freq=40, thresholds=CollapseThresholds())
    model.learn(120, callback=callback)
    # 3 transitions per step: the 40th, 80th and 120th transitions fall in steps 14, 27 and 40
    assert [entry["timestep"] for entry in callback.history] == [42, 81, 120]
    taken = model.replay_buffer.actions[:40, :, 0].reshape(-1)  # step-major, env order within a step
    expected = action_stats(taken[-30:], np.zeros(30, dtype=bool), hold_threshold=0.1)
    for key, value in expected.items():
        assert callback.history[-1][key] == pytest.approx(value), key


def test_trading_verdict_needs_fills_on_two_percent_of_steps_and_no_collapse():
    from trading_rl.monitoring.collapse import trading_verdict

    rng = np.random.default_rng(0)
    varied = rng.uniform(-1.0, 1.0, 200)
    every_tenth = np.where(np.arange(200) % 10 == 0, 1000.0, 0.0)
    assert trading_verdict(varied, every_tenth, 0.1, CollapseThresholds()) == {
        "fill_rate": 0.1,
        "collapsed": False,
        "trades": True,
    }
    # Varied actions but fills on 1.5% of steps (3 of 200): not trading.
    rare = np.zeros(200)
    rare[[5, 50, 150]] = 10.0
    assert trading_verdict(varied, rare, 0.1, CollapseThresholds())["trades"] is False
    # Plenty of fills from one repeated action: collapsed, so not trading either.
    constant = trading_verdict(np.full(200, 0.9), every_tenth, 0.1, CollapseThresholds())
    assert constant["collapsed"] and not constant["trades"]


def test_trading_flags_read_bools_and_csv_text_alike():
    from trading_rl.monitoring.collapse import trading_flags

    np.testing.assert_array_equal(
        trading_flags([True, False, "True", "False", "true", np.nan]), [True, False, True, False, True, False]
    )
