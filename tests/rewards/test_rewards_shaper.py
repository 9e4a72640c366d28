"""The shaper and its gym wrapper: reward composition, batching, frozen networks, reward hacking."""

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

from trading_rl.algorithms.sac_icm.icm import IntrinsicCuriosityModule
from trading_rl.envs import ContinuousTradingEnv, EnvConfig
from trading_rl.rewards import (
    OBJECTIVES,
    ObjectiveParams,
    ObjectiveWeightNetwork,
    PotentialNetwork,
    RewardShaper,
    ShapedRewardVecEnv,
    ShapedRewardWrapper,
    context_indices,
)
from trading_rl.rewards.frozen import FrozenMLP
from trading_rl.rewards.shaper import ShapingParams

FEATURES = ["ret_20", "realized_vol_20", "noise"]


# Default shaping, daily bars, the env's hold threshold.
DAILY = {"adaptation": ShapingParams(), "periods_per_year": 252.0, "hold_threshold": 0.1}


def objectives(params) -> ObjectiveParams:
    return ObjectiveParams.from_mapping(params, "reward_shaper.objectives")


def _env(close, seed=0, **config):
    index = pd.date_range("2020-01-01", periods=len(close), freq="D")
    prices = pd.DataFrame({"open": close, "close": close}, index=index)
    features = pd.DataFrame(
        np.random.default_rng(seed).normal(size=(len(close), len(FEATURES))), index=index, columns=FEATURES
    )
    return ContinuousTradingEnv(
        prices, features, EnvConfig.from_mapping({"window_size": 3, "smoothing_window": 1, **config})
    )


def _random_walk(n, seed=0):
    return 100.0 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0, 0.01, n)))


def _networks(dim):
    torch.manual_seed(0)
    weights, potential = ObjectiveWeightNetwork(dim, 16), PotentialNetwork(dim, 16)
    with torch.no_grad():
        for parameter in [*weights.body.parameters(), *potential.body.parameters()]:
            parameter.add_(0.3 * torch.randn_like(parameter))
        weights.component_scale.copy_(torch.tensor([0.5, 2.0, 0.1, 1.0, 0.3]))
        potential.target_mean.fill_(0.2)
        potential.target_std.fill_(3.0)
    return weights.eval(), potential.eval()


def test_frozen_mlp_matches_torch():
    module = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4), torch.nn.Tanh())
    x = np.random.default_rng(0).normal(size=(6, 5))
    np.testing.assert_allclose(
        FrozenMLP(module)(x), module(torch.as_tensor(x, dtype=torch.float32)).detach().numpy(), atol=1e-6
    )


def test_wrapper_reward_is_weighted_objectives_plus_beta_times_potential_term():
    env = _env(_random_walk(200), episode_length=60)
    weights, potential = _networks(len(context_indices(env.layout)))
    icm = IntrinsicCuriosityModule(env.layout.dim, 1)
    shaper = RewardShaper(
        env.layout,
        1,
        ObjectiveParams(),
        weight_network=weights,
        potential=potential,
        icm=icm,
        gamma=0.9,
        adaptation=ShapingParams(initial_weight=0.4),
        periods_per_year=252.0,
        hold_threshold=0.1,
    )
    wrapped = ShapedRewardWrapper(env, shaper)
    gym.utils.env_checker.check_env(wrapped, skip_render_check=True)
    index = context_indices(env.layout)
    obs, info = wrapped.reset(seed=3)
    equity = info["equity"]
    rng = np.random.default_rng(1)
    for _ in range(80):
        action = rng.uniform(-1, 1, 1).astype(np.float32)
        next_obs, reward, terminated, truncated, info = wrapped.step(action)
        with torch.no_grad():
            w = weights(torch.as_tensor(obs[index][None], dtype=torch.float32)).numpy()[0]
            phi = potential(torch.as_tensor(np.stack([obs[index], next_obs[index]]), dtype=torch.float32)).numpy()
        expected_shaping = 0.9 * phi[1] * (not terminated) - phi[0]
        scaled = info["reward_components"] / weights.component_scale.numpy()
        assert info["objective_weights"] == pytest.approx(w, abs=1e-6)
        assert info["shaping_term"] == pytest.approx(expected_shaping, abs=1e-4)
        assert reward == pytest.approx(float(w @ scaled) + 0.4 * expected_shaping, abs=1e-4)
        assert info["base_reward"] == pytest.approx(np.log(info["equity"] / equity))
        obs, equity = next_obs, info["equity"]
        if terminated or truncated:
            obs, info = wrapped.reset()
            equity = info["equity"]
    stats = shaper.pop_stats()
    assert sum(stats[f"reward/{name}_share"] for name in OBJECTIVES) == pytest.approx(1.0)
    assert stats["reward/shaping_weight"] == 0.4


def test_frozen_icm_term_equals_the_live_icm_reward():
    env = _env(_random_walk(120))
    icm = IntrinsicCuriosityModule(env.layout.dim, 1)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, env.layout.dim)).astype(np.float32)
    next_obs = rng.normal(size=(64, env.layout.dim)).astype(np.float32)
    actions = rng.uniform(-1, 1, (64, 1)).astype(np.float32)
    # The same batch twice: the moving statistics are then exactly this batch's.
    icm.intrinsic_reward(*map(torch.as_tensor, (obs, actions, next_obs)))
    live = icm.intrinsic_reward(*map(torch.as_tensor, (obs, actions, next_obs)))
    raw = icm.raw_intrinsic_reward(*map(torch.as_tensor, (obs, actions, next_obs))).double().numpy()
    shaper = RewardShaper(env.layout, 1, ObjectiveParams(), icm=icm, **DAILY)
    frozen = shaper._icm
    ours = frozen.reward(frozen.encoder(obs), actions.astype(np.float64), frozen.encoder(next_obs))
    compressed = np.log1p(raw / np.sort(raw)[(raw.size - 1) // 2])
    np.testing.assert_allclose(ours, np.minimum(compressed / compressed.std(), 5), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours, live.double().numpy(), rtol=1e-4, atol=1e-4)


def test_batched_shaper_equals_one_shaper_per_env():
    envs = [_env(_random_walk(150, seed), seed=seed, episode_length=50) for seed in range(3)]
    weights, potential = _networks(len(context_indices(envs[0].layout)))
    params = objectives({"exploration": {"decay_rate": 1.0}})
    batched = RewardShaper(envs[0].layout, 3, params, weights, potential, **DAILY)
    singles = [RewardShaper(env.layout, 1, params, weights, potential, **DAILY) for env in envs]
    first = [env.reset(seed=i) for i, env in enumerate(envs)]
    batched.reset(np.arange(3), np.stack([o for o, _ in first]), [i["equity"] for _, i in first])
    for shaper, (o, i) in zip(singles, first):
        shaper.reset([0], o[None], i["equity"])
    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = rng.uniform(-1, 1, (3, 1))
        steps = [env.step(a) for env, a in zip(envs, actions)]
        out = batched.step(np.stack([s[0] for s in steps]), actions, [s[4] for s in steps], [s[2] for s in steps])
        for row, (shaper, s) in enumerate(zip(singles, steps)):
            single = shaper.step(s[0][None], actions[row : row + 1], [s[4]], [s[2]])
            # novelty counts are shared by the batch's envs, so exploration differs by design
            np.testing.assert_allclose(out["components"][row, :4], single["components"][0, :4], rtol=1e-12)
            np.testing.assert_allclose(out["shaping"][row], single["shaping"][0], rtol=1e-5, atol=1e-5)


def _short_episode_env(seed):
    return _env(_random_walk(150, seed), seed=seed, episode_length=25)


def test_vec_env_shapes_like_one_wrapper_per_env_across_episode_ends():
    """One batched call per step of three envs = three one-env wrappers, through SB3's auto-reset
    (terminal observation scored, then the shaper restarts the env). Novelty counts and the
    adaptive weight pool the batch by design, so both are held fixed here."""
    layout = _short_episode_env(0).layout
    weights, potential = _networks(len(context_indices(layout)))
    icm = IntrinsicCuriosityModule(layout.dim, 1)
    params = objectives({"exploration": {"novelty_weight": 0.0}})
    adaptation = ShapingParams(initial_weight=0.4, adapt_every=10**9)

    def shaper(n):
        return RewardShaper(
            layout,
            n,
            params,
            weights,
            potential,
            icm=icm,
            gamma=0.9,
            adaptation=adaptation,
            periods_per_year=252.0,
            hold_threshold=0.1,
        )

    venv = ShapedRewardVecEnv(DummyVecEnv([lambda s=s: _short_episode_env(s) for s in range(3)]), shaper(3))
    venv.seed(10)
    venv.reset()
    wrappers = [ShapedRewardWrapper(_short_episode_env(s), shaper(1)) for s in range(3)]
    for i, wrapped in enumerate(wrappers):
        wrapped.reset(seed=10 + i)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(80):
        actions = rng.uniform(-1, 1, (3, 1)).astype(np.float32)
        _, rewards, dones, infos = venv.step(actions)
        for i, wrapped in enumerate(wrappers):
            _, reward, terminated, truncated, info = wrapped.step(actions[i])
            assert rewards[i] == pytest.approx(reward, rel=1e-5, abs=1e-5)
            assert infos[i]["base_reward"] == pytest.approx(info["base_reward"], rel=1e-6)  # float32 in SB3
            assert dones[i] == (terminated or truncated)
            if dones[i]:
                wrapped.reset()
                ended += 1
    assert ended >= 6  # every env crossed at least two episode ends
    with pytest.raises(ValueError, match="for 3 envs"):
        ShapedRewardVecEnv(DummyVecEnv([lambda s=s: _short_episode_env(s) for s in range(3)]), shaper(2))


class _NoEquityOnReset(gym.Wrapper):
    def reset(self, **kwargs):
        return self.env.reset(**kwargs)[0], {}


def test_vec_env_reads_reset_equity_through_vector_env_wrappers():
    layout = _short_episode_env(0).layout

    def shaped(wrap):
        venv = ShapedRewardVecEnv(
            wrap(DummyVecEnv([lambda s=s: _short_episode_env(s) for s in range(2)])),
            RewardShaper(layout, 2, ObjectiveParams(), **DAILY),
        )
        venv.seed(3)
        venv.reset()
        return venv

    # VecMonitor keeps empty reset infos of its own; the shaper reads the inner DummyVecEnv's
    plain, monitored = shaped(lambda v: v), shaped(VecMonitor)
    actions = np.random.default_rng(0).uniform(-1, 1, (60, 2, 1)).astype(np.float32)
    for batch in actions:
        np.testing.assert_array_equal(plain.step(batch)[1], monitored.step(batch)[1])
    with pytest.raises(ValueError, match=r"env\(s\) \[0, 1\] has no 'equity'"):
        ShapedRewardVecEnv(
            DummyVecEnv([lambda s=s: _NoEquityOnReset(_short_episode_env(s)) for s in range(2)]),
            RewardShaper(layout, 2, ObjectiveParams(), **DAILY),
        ).reset()


# ---- reward hacking -----------------------------------------------------------------------------
# Flat prices: every round trip loses exactly its costs, so churning is pure loss after costs.


def _shaped_return(policy, steps=400):
    env = _env(np.full(steps + 3, 100.0), episode_length=steps, random_start=False)
    wrapped = ShapedRewardWrapper(env, RewardShaper(env.layout, 1, ObjectiveParams(), **DAILY))
    wrapped.reset(seed=0)
    shaped = 0.0
    for t in range(steps):
        _, reward, terminated, truncated, info = wrapped.step(np.array([policy(t)], dtype=np.float32))
        shaped += reward
        if terminated or truncated:
            break
    return shaped, info["equity"]


def _round_trips(period):
    """Buy at the start of every ``2·period`` steps, sell everything ``period`` steps later."""
    return lambda t: 1.0 if t % (2 * period) == 0 else (-1.0 if t % (2 * period) == period else 0.0)


def test_churning_that_loses_money_after_costs_lowers_the_shaped_return():
    hold_shaped, hold_equity = _shaped_return(lambda t: 1.0 if t == 0 else 0.0)
    half_shaped, half_equity = _shaped_return(lambda t: 1.0 if t == 0 else (-1.0 if t == 200 else 0.0))
    results = {period: _shaped_return(_round_trips(period)) for period in (1, 2, 3, 4)}
    for period, (shaped, equity) in results.items():
        assert equity < half_equity < 100_000.0, "precondition: the churning round trips lose money after costs"
        # same 50% exposure as one round trip over the episode, only more loss-making trades
        assert shaped < half_shaped, period
    # the more churning, the lower the shaped return
    ordered = [results[period][0] for period in (1, 2, 3, 4)]
    assert ordered == sorted(ordered)
    # trading on every step never beats simply holding
    assert results[1][0] < hold_shaped and results[2][0] < hold_shaped
