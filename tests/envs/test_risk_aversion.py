"""``env.risk_aversion``: the training reward is the step's log growth minus a variance penalty,
evaluation envs keep the plain log growth, and the key at its default leaves a configuration's
identity unchanged."""

import math

import numpy as np
import pytest
from test_portfolio import scripted_env

from trading_rl.envs.continuous import EnvConfig


def rewards_and_growth(**overrides) -> tuple[list[float], list[float]]:
    env = scripted_env(action_mode="target", **overrides)
    _, info = env.reset()
    equity, rewards, growth = info["equity"], [], []
    for signal in (1.0, 1.0, -1.0, 0.5):
        _, reward, terminated, truncated, info = env.step(np.array([signal], dtype=np.float32))
        rewards.append(reward)
        growth.append(math.log(info["equity"] / equity))
        equity = info["equity"]
        if terminated or truncated:
            break
    return rewards, growth


def test_training_reward_is_the_mean_variance_utility_of_the_step_log_growth():
    rewards, growth = rewards_and_growth(evaluation=False, random_start=False, risk_aversion=50.0)
    assert any(g != 0.0 for g in growth)
    assert rewards == pytest.approx([g - 25.0 * g * g for g in growth], abs=1e-15)


def test_evaluation_envs_and_the_default_give_the_plain_log_growth():
    for overrides in ({"evaluation": True, "risk_aversion": 50.0}, {"evaluation": False, "random_start": False}):
        rewards, growth = rewards_and_growth(**overrides)
        assert rewards == pytest.approx(growth, abs=1e-15)


def test_risk_aversion_at_its_default_is_not_part_of_the_identity():
    plain = {"window_size": 1, "action_mode": "target"}
    assert EnvConfig.identity_view({**plain, "risk_aversion": 0.0}) == EnvConfig.identity_view(plain)
    assert EnvConfig.identity_view({**plain, "risk_aversion": 5.0})["risk_aversion"] == 5.0
    with pytest.raises(ValueError, match="env.risk_aversion"):
        EnvConfig.from_mapping({"risk_aversion": -1.0})
