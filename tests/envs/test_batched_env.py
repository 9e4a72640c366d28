"""``BatchedTradingEnv`` is N single ``ContinuousTradingEnv`` run side by side: driven with the same
actions, every member's observations, rewards, terminations, fills, equity and ``info`` equal those
of its own single env (stepped with SAME_STEP autoreset, SB3's ``DummyVecEnv`` convention), episode
resets, random starts, skips, a wiped-out short and the portfolio-cap and cash limits included."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from trading_rl.envs import ContinuousTradingEnv, EnvConfig
from trading_rl.envs.batched import BatchedTradingEnv

STEPS = 400


def _frames(n: int, seed: int, crash_at: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A random walk of ``n`` bars (some stale opens); ``crash_at``: the price jumps tenfold there,
    which wipes out a full-size short."""
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0, 0.02, n)))
    if crash_at is not None:
        close[crash_at:] *= 10.0
    open_ = close * np.exp(rng.normal(0, 0.004, n))
    stale = np.flatnonzero(rng.random(n - 1) < 0.1) + 1
    open_[stale] = close[stale - 1]
    index = pd.date_range("2020-01-01", periods=n, freq="B")
    prices = pd.DataFrame({"open": open_, "close": close}, index=index)
    features = pd.DataFrame(rng.normal(size=(n, 3)), index=index, columns=["a", "b", "c"])
    return prices, features


# Members with their own bars (lengths differ), settings and random starts: long-only and short,
# a tiny account (minimum-trade skips), no smoothing, a risk-averse reward, closing fills, whole-split
# evaluation episodes, and a short wiped out by a tenfold jump (equity <= 0: terminated).
MEMBERS = [
    ({"n": 120, "seed": 1}, {"episode_length": 30}),
    ({"n": 90, "seed": 2}, {"episode_length": 25, "allow_short": True, "max_position_pct": 0.5}),
    ({"n": 150, "seed": 3}, {"episode_length": 40, "initial_cash": 300.0, "min_trade_value": 25.0}),
    ({"n": 80, "seed": 4}, {"episode_length": 20, "smoothing_window": 1, "risk_aversion": 2.0, "hold_threshold": 0.0}),
    ({"n": 60, "seed": 5}, {"fill": "close", "evaluation": True, "allow_short": True}),
    (
        {"n": 70, "seed": 6, "crash_at": 40},
        {"episode_length": 60, "allow_short": True, "max_position_pct": 1.0, "random_start": False},
    ),
]


def _members(action_mode: str) -> list[ContinuousTradingEnv]:
    envs = []
    for i, (data, config) in enumerate(MEMBERS):
        env = ContinuousTradingEnv(*_frames(**data), EnvConfig(window_size=5, action_mode=action_mode, **config))
        env.reset(seed=100 + i)
        envs.append(env)
    return envs


def _actions(seed: int) -> np.ndarray:
    """Raw actions beyond [-1, 1] (clipped) and a strong short bias on the crashing member."""
    actions = np.random.default_rng(seed).uniform(-1.3, 1.3, size=(STEPS, len(MEMBERS), 1)).astype(np.float32)
    actions[:, 5] = -1.0
    return actions


def _single_steps(env: ContinuousTradingEnv, actions: np.ndarray) -> list[tuple]:
    """The single env driven with SAME_STEP autoreset: per step (obs, reward, terminated, truncated,
    info, final obs or None, final info or None)."""
    records = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        final_obs = final_info = None
        if terminated or truncated:
            final_obs, final_info = obs, info
            obs, info = env.reset()
        records.append((obs, reward, terminated, truncated, info, final_obs, final_info))
    return records


def _assert_same_info(batched: dict, single: dict, where: str) -> None:
    assert batched.keys() == single.keys(), where
    for key, value in single.items():
        assert batched[key] == value, f"{where}: info[{key!r}] {batched[key]!r} != {value!r}"
        assert type(batched[key]) is type(value) or isinstance(value, float | int), f"{where}: {key}"


@pytest.mark.parametrize("action_mode", ["trade", "target"])
def test_batched_env_equals_each_single_env_step_for_step(action_mode):
    actions = _actions(seed=7)
    reference = [_single_steps(env, actions[:, i]) for i, env in enumerate(_members(action_mode))]
    batched = BatchedTradingEnv(_members(action_mode))
    assert batched.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    seen = {"final": 0, "terminated": 0, "fills": 0, "skips": set()}
    for step, action in enumerate(actions):
        obs, rewards, terminated, truncated, infos = batched.step(action)
        assert obs.shape == (len(MEMBERS), batched.single_observation_space.shape[0]) and obs.dtype == np.float32
        for i, records in enumerate(reference):
            single_obs, reward, single_terminated, single_truncated, info, final_obs, final_info = records[step]
            where = f"step {step}, member {i}"
            np.testing.assert_array_equal(obs[i], single_obs, err_msg=where)
            assert rewards[i] == reward, where
            assert (terminated[i], truncated[i]) == (single_terminated, single_truncated), where
            _assert_same_info(batched.member_info(infos, i), info, where)
            has_final = "final_obs" in infos and infos["_final_obs"][i]
            assert has_final == (final_obs is not None), where
            if has_final:
                np.testing.assert_array_equal(infos["final_obs"][i], final_obs, err_msg=where)
                _assert_same_info(batched.member_info(infos["final_info"], i), final_info, where)
                seen["final"] += 1
                seen["terminated"] += int(single_terminated)
                info = final_info
            seen["fills"] += int(info["trade_units"] != 0.0)
            seen["skips"].add(info["skipped"])
    # The test saw what it claims to check: many resets, a wiped-out short, fills and every skip kind.
    assert seen["final"] > 40 and seen["terminated"] >= 1 and seen["fills"] > 100
    assert {None, "min_trade_value", "position_cap"} <= seen["skips"]


def test_batched_reset_seeds_members_and_hands_state_back():
    """``reset(seed=s)`` seeds member i with ``s + i`` as the single env's ``reset(seed=...)`` does;
    after ``store_members`` each single env steps on exactly as the batched env would."""
    actions = _actions(seed=8)
    singles = _members("trade")
    starts = [env.reset(seed=50 + i) for i, env in enumerate(singles)]
    batched = BatchedTradingEnv(_members("trade"))
    obs, infos = batched.reset(seed=50)
    for i, (single_obs, info) in enumerate(starts):
        np.testing.assert_array_equal(obs[i], single_obs)
        _assert_same_info(batched.member_info(infos, i), info, f"reset, member {i}")
    half = STEPS // 2
    for i, env in enumerate(singles):
        _single_steps(env, actions[:half, i])
    for action in actions[:half]:
        batched.step(action)
    batched.store_members()
    for i, env in enumerate(singles):
        np.testing.assert_equal(
            _single_steps(batched.members[i], actions[half:, i]), _single_steps(env, actions[half:, i])
        )


def test_batched_env_refuses_what_it_cannot_batch():
    prices, features = _frames(60, 1)
    env = ContinuousTradingEnv(prices, features, EnvConfig(window_size=5, action_mode="trade"))
    with pytest.raises(ValueError, match="member 1 is a TimeLimit"):
        BatchedTradingEnv([env, gym.wrappers.TimeLimit(env, 10)])
    target = ContinuousTradingEnv(prices, features, EnvConfig(window_size=5, action_mode="target"))
    with pytest.raises(ValueError, match="action_mode"):
        BatchedTradingEnv([env, target])
    batched = BatchedTradingEnv([ContinuousTradingEnv(prices, features, EnvConfig(window_size=5))])
    with pytest.raises(RuntimeError, match="reset"):
        batched.step(np.zeros((1, 1)))
    batched.reset(seed=0)
    with pytest.raises(ValueError, match="NaN for member"):
        batched.step(np.full((1, 1), np.nan))
