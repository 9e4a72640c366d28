"""The population's batched env loop is SB3's ``learn`` loop for every member: on trading envs (one
``BatchedTradingEnv`` for all members) each member's replay buffer, episode statistics, step count
and env state equal those of the same agent run alone by SB3, and an SB3 ``learn`` after the
population continues its episodes as if SB3 had run all along. The batched action selection is each
member's own policy; the stacked replay samples each member's own transitions; and a member's
training does not depend on the other members of its population."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch as th
from gymnasium import spaces
from helpers.synthetic_prices import random_walk_prices
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer

from trading_rl.algorithms.population import collection
from trading_rl.algorithms.population.membership import PopulationError
from trading_rl.algorithms.population.population_sac import PopulationSAC
from trading_rl.algorithms.population.replay import PopulationReplay
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.envs import ContinuousTradingEnv, EnvConfig
from trading_rl.training.params import ICMConfig

# Members with their own bars and settings; episodes of 15-25 steps, so 70 steps cross several resets.
MARKETS = [(90, 1, {"episode_length": 15}), (120, 2, {"episode_length": 25, "allow_short": True}), (70, 3, {})]


def _env(i: int) -> ContinuousTradingEnv:
    n_bars, seed, config = MARKETS[i]
    prices = random_walk_prices(n_bars, seed)
    features = pd.DataFrame(
        np.random.default_rng(seed).normal(size=(n_bars, 2)), index=prices.index, columns=["a", "b"]
    )
    return ContinuousTradingEnv(prices, features, EnvConfig(window_size=4, **{"episode_length": 20, **config}))


def _agent(i: int, learning_starts: int = 1000) -> SACWithICM:
    return SACWithICM(
        "MlpPolicy",
        _env(i),
        icm=ICMConfig(feature_dim=8, hidden_dim=8) if i != 1 else None,
        policy_kwargs={"net_arch": [16]},
        learning_starts=learning_starts,
        batch_size=16,
        buffer_size=500,
        seed=20 + i,
        verbose=0,
    )


def _buffer(model, steps: int) -> dict[str, np.ndarray]:
    buffer = model.replay_buffer
    return {
        name: getattr(buffer, name)[:steps]
        for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    }


def test_population_on_trading_envs_steps_each_member_as_sb3_learn(monkeypatch):
    batched = []
    monkeypatch.setattr(collection, "_BatchedStepper", lambda monitors: batched.append(1) or _Stepper(monitors))
    first, second = 70, 30
    alone = [_agent(i) for i in range(len(MARKETS))]
    for model in alone:
        model.learn(first)
    together = [_agent(i) for i in range(len(MARKETS))]
    PopulationSAC(together).learn(first).release()
    assert batched == [1], "trading envs must step as one BatchedTradingEnv"
    for i, (solo, member) in enumerate(zip(alone, together)):
        assert member.num_timesteps == first and member._episode_num == solo._episode_num >= 2
        assert member.replay_buffer.pos == solo.replay_buffer.pos
        np.testing.assert_equal(_buffer(member, first), _buffer(solo, first), err_msg=f"member {i}")
        assert [(e["r"], e["l"]) for e in member.ep_info_buffer] == [(e["r"], e["l"]) for e in solo.ep_info_buffer]
        np.testing.assert_array_equal(member._last_obs, solo._last_obs)
    # SB3 carries on from where the population left each member's env (episode, portfolio, Monitor).
    for model in alone + together:
        model.learn(second, reset_num_timesteps=False)
    for i, (solo, member) in enumerate(zip(alone, together)):
        np.testing.assert_equal(_buffer(member, first + second), _buffer(solo, first + second), err_msg=f"member {i}")
        assert [(e["r"], e["l"]) for e in member.ep_info_buffer] == [(e["r"], e["l"]) for e in solo.ep_info_buffer]


class _Stepper(collection._BatchedStepper):
    pass


def test_act_is_each_members_policy_and_the_replay_samples_its_own_transitions():
    members = [_agent(i, learning_starts=10) for i in range(len(MARKETS))]
    population = PopulationSAC(members)
    population.learn(40)
    obs = np.stack([m._last_obs[0] for m in members])
    deterministic = population.act(obs, deterministic=True)
    for i, member in enumerate(members):
        expected = member.policy.scale_action(member.predict(obs[i], deterministic=True)[0])
        np.testing.assert_allclose(deterministic[i], expected, atol=1e-6, err_msg=f"member {i}")
    draws = np.stack([population.act(obs) for _ in range(200)])
    assert draws.std(axis=0).min() > 0 and np.abs(draws).max() <= 1.0, "stochastic actions are sampled"
    batch = population.replay.sample(64, population.streams)
    for i, member in enumerate(members):
        stored = {row.tobytes() for row in member.replay_buffer.observations[:40, 0]}
        assert {row.tobytes() for row in batch.observations[i].numpy()} <= stored, f"member {i} sampled another's"
    population.release()
    assert all(isinstance(m.replay_buffer.observations, np.ndarray) and m.replay_buffer.pos == 40 for m in members)


def test_replay_keeps_each_members_position_capacity_and_timeouts():
    obs_space, action_space = spaces.Box(-1, 1, (2,)), spaces.Box(-1, 1, (1,))
    buffers = [ReplayBuffer(size, obs_space, action_space, handle_timeout_termination=True) for size in (4, 6)]
    for i, buffer in enumerate(buffers):
        stored = 3 + i
        for k in range(stored):  # observation 10 i + k, done; the last one a timeout
            info = {"TimeLimit.truncated": k == stored - 1}
            buffer.add(np.full((1, 2), 10 * i + k), np.zeros((1, 2)), np.zeros((1, 1)), np.ones(1), np.ones(1), [info])
    replay = PopulationReplay(buffers, th.device("cpu"))
    for _ in range(2):  # member 0 wraps after one add, member 1 after two
        replay.add(np.full((2, 2), 99.0), np.zeros((2, 2)), np.zeros((2, 1)), np.zeros(2), np.zeros(2), np.zeros(2))
    batch = replay.sample(500, [th.Generator().manual_seed(seed) for seed in (0, 1)])
    for i, (expected, timeout) in enumerate((({1.0, 2.0, 99.0}, 2.0), ({10.0, 11.0, 12.0, 13.0, 99.0}, 13.0))):
        values = batch.observations[i, :, 0]
        assert set(values.tolist()) == expected, f"member {i}"
        dones = batch.dones[i, :, 0]
        assert (dones[values == timeout] == 0).all() and (dones[values == 99.0] == 0).all()
        assert (dones[(values != timeout) & (values != 99.0)] == 1).all()
    replay.release()
    assert (buffers[0].pos, buffers[0].full, buffers[1].pos, buffers[1].full) == (1, True, 0, True)
    assert buffers[0].observations[:, 0, 0].tolist() == [99.0, 1.0, 2.0, 99.0]
    with pytest.raises(PopulationError, match="plain SB3"):
        PopulationSAC([SAC("MlpPolicy", _env(0), replay_buffer_class=_OtherBuffer, buffer_size=10)])


class _OtherBuffer(ReplayBuffer):
    pass


def _trained(groups: list[list[int]]) -> dict[int, SACWithICM]:
    members = {}
    for group in groups:
        models = [_agent(i, learning_starts=10) for i in group]
        PopulationSAC(models).learn(60).release()
        members.update(zip(group, models))
    return members


def test_a_member_trains_the_same_whichever_members_share_its_population():
    """Its own random stream (noise, replay indices) and row-by-row statistics: a member alone, or
    with another in the other order, ends with the weights, ICM statistics and replay it has in a
    population of all three (two of them curious, 50 updates each)."""
    together = _trained([[0, 1, 2]])
    split = _trained([[2], [1, 0]])
    for i in range(len(MARKETS)):
        modules = [lambda m: m.policy] + ([lambda m: m.icm] if together[i].icm is not None else [])
        for module in modules:
            expected, actual = module(together[i]).state_dict(), module(split[i]).state_dict()
            for name, value in expected.items():
                assert th.equal(actual[name], value), f"member {i}: {name}"
        np.testing.assert_equal(_buffer(split[i], 60), _buffer(together[i], 60), err_msg=f"member {i}")
