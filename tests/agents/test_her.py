"""HER on SB3's HerReplayBuffer: goal view, vectorised reward, relabelling within the episode."""

import numpy as np
import pytest
import torch
from options_her_env import small_spec
from stable_baselines3 import HerReplayBuffer
from stable_baselines3.common.vec_env import DummyVecEnv

from trading_rl.agents.her import goal_achievement, goal_view, relabelled_fraction, resolve_her_params
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


def _filled_buffer(strategy: str, lengths=(7, 12, 5, 9)) -> HerReplayBuffer:
    spec = small_spec()
    venv = DummyVecEnv([lambda: goal_view(spec.make_env("train"), resolve_her_params({}))])
    space = venv.observation_space
    buffer = HerReplayBuffer(
        500, space, venv.action_space, env=venv, n_sampled_goal=4, goal_selection_strategy=strategy
    )
    obs_dim = space["observation"].shape[0]
    for episode, length in enumerate(lengths):
        for step in range(length):
            def goal_obs(k):
                return {
                    "observation": np.full((1, obs_dim), episode, dtype=np.float32),
                    "achieved_goal": np.array([[episode * EPISODE_WIDTH + k * EPISODE_STEP]], dtype=np.float32),
                    "desired_goal": np.array([[-9.0]], dtype=np.float32),  # never a real achieved goal
                }
            done = np.array([step == length - 1])
            buffer.add(goal_obs(step), goal_obs(step + 1), np.zeros((1, 1)), np.array([-5.0]), done, [{}])
    return buffer


def _decode(goal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    episode = np.floor(goal / EPISODE_WIDTH + 1e-6)
    step = np.round((goal - episode * EPISODE_WIDTH) / EPISODE_STEP)
    return episode.astype(int), step.astype(int)


@pytest.mark.parametrize("strategy", ["future", "episode"])
def test_relabelled_goals_come_from_the_same_episode(strategy):
    np.random.seed(0)
    buffer = _filled_buffer(strategy)
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


def test_goal_achievement_counts():
    result = goal_achievement(np.array([0.0100, 0.03, -0.01]), np.array([0.0105, 0.02, 0.02]), 0.001)
    assert result["goal_achievement_rate"] == pytest.approx(1 / 3)
    assert result["target_reached_rate"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="goal_selection_strategy"):
        resolve_her_params({"goal_selection_strategy": "final_ish"})
