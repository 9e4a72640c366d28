"""HER: goal view, vectorised reward, relabelling within the episode, FastHerReplayBuffer sampling."""

import numpy as np
import pytest
import torch
from options_her_env import small_spec
from stable_baselines3 import HerReplayBuffer
from stable_baselines3.common.vec_env import DummyVecEnv

from trading_rl.agents.her import FastHerReplayBuffer, goal_achievement, goal_view, relabelled_fraction, resolve_her_params
from trading_rl.envs.goal import GoalConditionedView, goal_reward

torch.set_num_threads(1)
EPISODE_STEP = 0.001  # achieved goal of step k of episode e is e * EPISODE_WIDTH + k * EPISODE_STEP
EPISODE_WIDTH = 0.1


def test_goal_reward_values():
    assert float(goal_reward(np.array([0.02]), np.array([0.0205]))) == 1.0  # inside tolerance
    assert float(goal_reward(np.array([0.0]), np.array([0.025]))) == pytest.approx(0.5)
    assert float(goal_reward(np.array([0.0]), np.array([0.05]))) == 0.0
    assert float(goal_reward(np.array([0.0]), np.array([-0.2]))) == 0.0
    achieved = np.random.default_rng(0).normal(0, 0.03, (100, 1))
    desired = np.random.default_rng(1).normal(0, 0.03, (100, 1))
    batch = goal_reward(achieved, desired)
    distance = np.abs(achieved - desired)[:, 0]
    expected = np.where(distance <= 0.001, 1.0, np.maximum(0.0, 1.0 - distance / 0.05))
    assert batch.shape == (100,) and np.allclose(batch, expected)


def test_goal_view_tracks_return_and_keeps_base_reward():
    spec = small_spec()
    env = GoalConditionedView(spec.make_env("train"), goal_low=0.01, goal_high=0.03)
    obs, info = env.reset(seed=3)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"}
    desired = float(obs["desired_goal"][0])
    assert 0.01 <= desired <= 0.03 and obs["achieved_goal"][0] == 0.0
    assert env.reset(seed=3)[0]["desired_goal"][0] == desired  # the seed fixes the target
    initial = info["equity"]
    for _ in range(20):
        obs, reward, _, _, info = env.step(np.array([0.9], dtype=np.float32))
        assert obs["achieved_goal"][0] == pytest.approx(info["equity"] / initial - 1.0, abs=1e-6)
        assert reward == pytest.approx(float(goal_reward(obs["achieved_goal"], obs["desired_goal"])))
        assert np.isfinite(info["base_reward"])
    named, _ = env.reset(options={"desired_goal": 0.042})
    assert named["desired_goal"][0] == pytest.approx(0.042)


def _filled_buffer(
    strategy: str,
    lengths=(7, 12, 5, 9),
    buffer_class=FastHerReplayBuffer,
    size: int = 500,
    unfinished_last: bool = False,
) -> HerReplayBuffer:
    """Episodes of the given lengths (the last one left without its ``done`` if ``unfinished_last``);
    ``observation`` carries ``(episode, step)`` and the achieved goal encodes both too."""
    spec = small_spec()
    venv = DummyVecEnv([lambda: goal_view(spec.make_env("train"), resolve_her_params({}))])
    space = venv.observation_space
    buffer = buffer_class(
        size, space, venv.action_space, env=venv, n_sampled_goal=4, goal_selection_strategy=strategy
    )
    obs_dim = space["observation"].shape[0]
    for episode, length in enumerate(lengths):
        for step in range(length):
            def goal_obs(k):
                observation = np.full((1, obs_dim), episode, dtype=np.float32)
                observation[0, 1] = step
                return {
                    "observation": observation,
                    "achieved_goal": np.array([[episode * EPISODE_WIDTH + k * EPISODE_STEP]], dtype=np.float32),
                    "desired_goal": np.array([[-9.0]], dtype=np.float32),  # never a real achieved goal
                }
            done = np.array([step == length - 1 and not (unfinished_last and episode == len(lengths) - 1)])
            buffer.add(goal_obs(step), goal_obs(step + 1), np.zeros((1, 1)), np.array([-5.0]), done, [{}])
    return buffer


def _decode(goal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    episode = np.floor(goal / EPISODE_WIDTH + 1e-6)
    step = np.round((goal - episode * EPISODE_WIDTH) / EPISODE_STEP)
    return episode.astype(int), step.astype(int)


@pytest.mark.parametrize("buffer_class", [FastHerReplayBuffer, HerReplayBuffer])
@pytest.mark.parametrize("strategy", ["future", "episode"])
def test_relabelled_goals_come_from_the_same_episode(strategy, buffer_class):
    np.random.seed(0)
    buffer = _filled_buffer(strategy, buffer_class=buffer_class)
    batch = buffer.sample(2000)
    desired = batch.observations["desired_goal"].numpy()[:, 0]
    relabelled = desired != -9.0
    assert relabelled.mean() == pytest.approx(relabelled_fraction(4), abs=1e-3) and relabelled_fraction(4) == 0.8
    own_episode = batch.observations["observation"].numpy()[:, 0].astype(int)
    own_episode_from_goal, own_step = _decode(batch.observations["achieved_goal"].numpy()[:, 0])
    assert np.array_equal(own_episode, own_episode_from_goal)
    goal_episode, goal_step = _decode(desired[relabelled])
    assert np.array_equal(goal_episode, own_episode[relabelled])
    if strategy == "future":
        # the goal is an achieved goal of a next observation at step >= t, i.e. a state after s_t
        assert (goal_step >= own_step[relabelled] + 1).all()
    else:
        assert goal_step.min() == 1 and (goal_step < own_step[relabelled]).any()
    # next observation keeps the relabelled goal; rewards are recomputed from the new goal
    assert np.array_equal(batch.next_observations["desired_goal"].numpy()[:, 0], desired)
    rewards = batch.rewards.numpy()[:, 0]
    expected = goal_reward(batch.next_observations["achieved_goal"].numpy(), desired[:, None])
    assert np.allclose(rewards[relabelled], expected[relabelled])
    assert (rewards[~relabelled] == -5.0).all()


def _sampled_rows(batch) -> np.ndarray:
    """``(episode, step)`` of each sampled transition, read back from its observation."""
    return batch.observations["observation"].numpy()[:, :2].astype(int)


def test_fast_sampling_is_uniform_over_completed_episodes_after_wrap_around():
    # 60 rows: episode 0 (25 steps) is overwritten in part by episode 2 and so invalidated; episode
    # 3 is unfinished. Valid: episode 1 (20 steps) and episode 2 (30 steps, wrapping around).
    np.random.seed(1)
    buffer = _filled_buffer("future", lengths=(25, 20, 30, 4), size=60, unfinished_last=True)
    rows = _sampled_rows(buffer.sample(20_000))
    assert set(map(tuple, rows)) == {(1, k) for k in range(20)} | {(2, k) for k in range(30)}
    counts = np.unique(rows[:, 0] * 100 + rows[:, 1], return_counts=True)[1]
    expected = 20_000 / 50
    chi_square = float((((counts - expected) ** 2) / expected).sum())
    assert chi_square < 95.0  # 49 degrees of freedom: P(chi2 > 95) < 1e-4 under uniformity


def test_fast_sampling_falls_back_when_few_rows_are_valid():
    np.random.seed(2)
    # one finished 5-step episode, then a 600-step unfinished one: rejection rounds cannot fill 256
    buffer = _filled_buffer("episode", lengths=(5, 600), size=1000, unfinished_last=True)
    rows = _sampled_rows(buffer.sample(256))
    assert (rows[:, 0] == 0).all() and set(rows[:, 1]) == set(range(5))
    empty = _filled_buffer("future", lengths=(), size=10)
    with pytest.raises(RuntimeError, match="end of the first episode"):
        empty.sample(8)


def test_goal_achievement_counts():
    result = goal_achievement(np.array([0.0100, 0.03, -0.01]), np.array([0.0105, 0.02, 0.02]), 0.001)
    assert result["goal_achievement_rate"] == pytest.approx(1 / 3)
    assert result["target_reached_rate"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="goal_selection_strategy"):
        resolve_her_params({"goal_selection_strategy": "final_ish"})
