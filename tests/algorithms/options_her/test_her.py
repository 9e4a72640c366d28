"""HER: goal view, vectorised reward, relabelling within the episode, FastHerReplayBuffer sampling."""

import numpy as np
import pytest
import torch
from helpers.options_her_env import small_spec
from stable_baselines3 import HerReplayBuffer
from stable_baselines3.common.vec_env import DummyVecEnv

from trading_rl.algorithms.options_her.goal import GoalConditionedView, goal_reward
from trading_rl.algorithms.options_her.her import (
    FastHerReplayBuffer,
    HerParams,
    goal_achievement,
    goal_achievement_against_control,
    goal_responsiveness,
    goal_view,
    relabelled_fraction,
)

torch.set_num_threads(1)
EPISODE_STEP = 0.001  # achieved goal of step k of episode e is e * EPISODE_WIDTH + k * EPISODE_STEP
EPISODE_WIDTH = 0.1


def test_goal_reward_values():
    assert float(goal_reward(np.array([0.02]), np.array([0.0245]))) == 1.0  # inside the 0.5% tolerance
    assert float(goal_reward(np.array([0.02]), np.array([0.0205]), tolerance=0.0001)) == pytest.approx(0.99)
    assert float(goal_reward(np.array([0.0]), np.array([0.025]))) == pytest.approx(0.5)
    assert float(goal_reward(np.array([0.0]), np.array([0.05]))) == 0.0
    assert float(goal_reward(np.array([0.0]), np.array([-0.2]))) == 0.0
    achieved = np.random.default_rng(0).normal(0, 0.03, (100, 1))
    desired = np.random.default_rng(1).normal(0, 0.03, (100, 1))
    batch = goal_reward(achieved, desired)
    distance = np.abs(achieved - desired)[:, 0]
    expected = np.where(distance <= 0.005, 1.0, np.maximum(0.0, 1.0 - distance / 0.05))
    assert batch.shape == (100,) and np.allclose(batch, expected)


def test_goal_view_tracks_return_in_goal_units_time_to_go_and_keeps_the_pnl_reward():
    spec = small_spec()
    env = GoalConditionedView(
        spec.make_env("train"),
        goal_low=0.01,
        goal_high=0.03,
        goal_unit=0.01,
        pnl_weight=1.0,
        goal_weight=0.1,
        pnl_scale=100.0,
    )
    obs, info = env.reset(seed=3)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal", "time_to_go"}
    desired = info["desired_goal"]
    assert 0.01 <= desired <= 0.03 and obs["achieved_goal"][0] == 0.0
    assert obs["desired_goal"][0] == pytest.approx(desired / 0.01)  # goal units: 1% per unit
    assert obs["time_to_go"][0] == 1.0
    assert env.reset(seed=3)[1]["desired_goal"] == desired  # the seed fixes the target
    start, end = env.unwrapped.episode_bounds
    initial = info["equity"]
    for step in range(1, 21):
        obs, reward, _, _, info = env.step(np.array([0.9], dtype=np.float32))
        achieved = info["equity"] / initial - 1.0
        assert obs["achieved_goal"][0] == pytest.approx(achieved / 0.01, rel=1e-5, abs=1e-6)
        assert info["achieved_goal"] == pytest.approx(achieved)
        assert obs["time_to_go"][0] == pytest.approx((end - start - step) / (end - start))
        # P&L at the learner's scale + 0.1 x the goal reward in return units
        goal_part = 0.1 * float(goal_reward(np.array([achieved]), np.array([desired])))
        assert info["goal_reward"] == pytest.approx(goal_part, abs=1e-6)
        assert reward == pytest.approx(100.0 * info["base_reward"] + goal_part, abs=1e-6)
        assert info["is_success"] == float(abs(achieved - desired) <= 0.005)
    named, named_info = env.reset(options={"desired_goal": 0.042})
    assert named["desired_goal"][0] == pytest.approx(4.2) and named_info["desired_goal"] == 0.042


def _filled_buffer(
    strategy: str,
    lengths=(7, 12, 5, 9),
    buffer_class=FastHerReplayBuffer,
    size: int = 500,
    unfinished_last: bool = False,
    n_sampled_goal: int = 4,
) -> HerReplayBuffer:
    """Episodes of the given lengths (the last one left without its ``done`` if ``unfinished_last``);
    ``observation`` carries ``(episode, step)`` and the achieved goal encodes both too."""
    spec = small_spec()
    venv = DummyVecEnv([lambda: goal_view(spec.make_env("train"), HerParams())])
    space = venv.observation_space
    buffer = buffer_class(
        size, space, venv.action_space, env=venv, n_sampled_goal=n_sampled_goal, goal_selection_strategy=strategy
    )
    obs_dim = space["observation"].shape[0]

    def goal_obs(episode: int, step: int, length: int, k: int) -> dict[str, np.ndarray]:
        observation = np.full((1, obs_dim), episode, dtype=np.float32)
        observation[0, 1] = step
        return {
            "observation": observation,
            "achieved_goal": np.array([[episode * EPISODE_WIDTH + k * EPISODE_STEP]], dtype=np.float32),
            "desired_goal": np.array([[-9.0]], dtype=np.float32),  # never a real achieved goal
            "time_to_go": np.array([[1.0 - k / length]], dtype=np.float32),
        }

    for episode, length in enumerate(lengths):
        for step in range(length):
            done = np.array([step == length - 1 and not (unfinished_last and episode == len(lengths) - 1)])
            obs, next_obs = goal_obs(episode, step, length, step), goal_obs(episode, step, length, step + 1)
            buffer.add(obs, next_obs, np.zeros((1, 1)), np.array([-5.0]), done, [{}])
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
    # next observation keeps the relabelled goal; the goal part of the reward is recomputed from it
    assert np.array_equal(batch.next_observations["desired_goal"].numpy()[:, 0], desired)
    rewards = batch.rewards.numpy()[:, 0]
    view = buffer.env.envs[0]
    achieved = batch.next_observations["achieved_goal"].numpy()
    new_part = view.compute_reward(achieved, desired[:, None], None)
    if buffer_class is FastHerReplayBuffer:
        # stored reward (-5: the P&L part plus the goal part for the stored goal -9) with its goal
        # part swapped: the P&L part survives relabelling
        old_part = view.compute_reward(achieved, np.full_like(achieved, -9.0), None)
        expected = -5.0 - old_part + new_part
    else:  # SB3's own buffer replaces the whole reward with the goal reward
        expected = new_part
    assert np.allclose(rewards[relabelled], expected[relabelled], atol=1e-6)
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


def test_goal_achievement_against_control_pairs_episodes_and_needs_a_ci_above_zero():
    rng = np.random.default_rng(0)
    desired = rng.uniform(0.0, 0.05, 60)
    steering = desired + rng.normal(0, 0.002, 60)  # lands near its target
    agnostic = rng.normal(0.02, 0.04, 60)  # ignores it
    result = goal_achievement_against_control(steering, agnostic, desired, tolerance=0.005)
    hits = np.abs(steering - desired) <= 0.005
    control_hits = np.abs(agnostic - desired) <= 0.005
    assert result["goal_achievement_rate"] == pytest.approx(hits.mean())
    assert result["control"]["goal_achievement_rate"] == pytest.approx(control_hits.mean())
    assert result["achievement_difference"] == pytest.approx(hits.mean() - control_hits.mean())
    low, high = result["achievement_difference_ci"]
    assert 0 < low <= result["achievement_difference"] <= high and result["beats_control"]
    same = goal_achievement_against_control(agnostic, agnostic, desired, tolerance=0.005)
    assert same["achievement_difference_ci"] == [0.0, 0.0] and not same["beats_control"]
    with pytest.raises(ValueError, match="goal_selection_strategy"):
        HerParams.from_mapping({"goal_selection_strategy": "final_ish"}, "options_her.her")


def test_no_sampled_goal_keeps_the_goals_and_relabels_nothing():
    """``n_sampled_goal: 0``, HER's ablation: the same goal-conditioned agent and reward, no relabelling."""
    assert HerParams.from_mapping({"n_sampled_goal": 0}, "options_her.her").n_sampled_goal == 0
    np.random.seed(0)
    batch = _filled_buffer("future", n_sampled_goal=0).sample(500)
    assert (batch.observations["desired_goal"].numpy() == -9.0).all()  # every goal is the stored one
    assert (batch.rewards.numpy() == -5.0).all()  # and so is every reward
    with pytest.raises(ValueError, match="n_sampled_goal"):
        HerParams.from_mapping({"n_sampled_goal": -1}, "options_her.her")


def test_goal_responsiveness_ranks_steering_above_ignoring_and_counts_success_per_level():
    rng = np.random.default_rng(3)
    desired = rng.uniform(0.0, 0.06, 90)
    steering = desired + rng.normal(0, 0.004, 90)
    steered = goal_responsiveness(steering, desired, tolerance=0.005)
    steered_low, steered_high = steered["goal_rank_correlation_ci"]
    assert 0.8 < steered_low <= steered["goal_rank_correlation"] <= steered_high
    ignoring = goal_responsiveness(np.full(90, 0.01) + rng.normal(0, 0.004, 90), desired, tolerance=0.005)
    low, high = ignoring["goal_rank_correlation_ci"]
    assert abs(ignoring["goal_rank_correlation"]) < 0.3 and high < steered_low
    # ignoring the goal hits only the lowest third (targets 0-2%, returns around 1%)
    assert ignoring["goal_level_edges"] == pytest.approx(np.linspace(desired.min(), desired.max(), 4).tolist())
    first, second, third = ignoring["achievement_rate_by_level"]
    assert first > 0.3 and second < 0.1 and third == 0.0
    assert min(steered["achievement_rate_by_level"]) > 0.6
