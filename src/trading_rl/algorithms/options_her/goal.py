"""Goal-conditioned view of a trading env, for Hindsight Experience Replay.

The goal is a *return*: ``achieved_goal`` is the net return of the episode so far (equity over the
equity at reset, minus one) and ``desired_goal`` is a target return drawn once per episode. The
observation becomes the ``gymnasium`` Dict that SB3's ``HerReplayBuffer`` expects, plus
``time_to_go``: the share of the episode still ahead (1 at reset, 0 on its last bar). Without it the
agent cannot tell a target it still has time to reach from one it must lock in now.

Goals are in *goal units* (``goal_unit`` of return per unit, 1% by default), so that a 5% target is 5
next to robust-scaled features of about ±5; in raw return units (0–0.05) behind zero-initialised
input columns they barely moved the network.

Reward per step, so that agents with and without HER optimise comparable objectives:

    pnl_weight · pnl_scale · log equity change  +  goal_weight · goal_reward(achieved, desired)

``pnl_scale`` is the learner's P&L reward scale (the warm-start source's ``reward_scale``), so the
P&L part is exactly what a SAC without HER learns from, and the copied critic and entropy
coefficient stay calibrated for it. :meth:`GoalConditionedView.compute_reward` is only the goal part:
HER calls it on relabelled goals, and the replay buffer swaps the goal part of the stored reward
(``algorithms.options_her.her.FastHerReplayBuffer``). The env's own reward stays in ``info["base_reward"]``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from trading_rl.envs.continuous import trading_env

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal", "time_to_go")


def goal_reward(
    achieved_goal: np.ndarray,
    desired_goal: np.ndarray,
    tolerance: float = 0.005,
    reward_distance: float = 0.05,
) -> np.ndarray:
    """1 when ``|achieved - desired| <= tolerance``, else ``max(0, 1 - distance / reward_distance)``,
    all in return units.

    Works on one goal ``(1,)`` (returns a 0-d array) or a batch ``(n, 1)`` (returns ``(n,)``).
    """
    distance = np.abs(np.asarray(achieved_goal, dtype=np.float64) - np.asarray(desired_goal, dtype=np.float64))
    distance = distance.max(axis=-1) if distance.ndim else distance
    shaped = np.maximum(0.0, 1.0 - distance / reward_distance)
    return np.where(distance <= tolerance, 1.0, shaped).astype(np.float32)


class GoalConditionedView(gym.Wrapper):
    """Dict observation with a return goal and the time left; reward as in the module docstring.

    ``desired_goal`` is drawn uniformly from ``[goal_low, goal_high]`` (return units) with the env's
    own ``np_random`` at every reset (so ``reset(seed=...)`` fixes it), unless
    ``reset(options={"desired_goal": g})`` names it. ``info["is_success"]`` is 1.0 while the achieved
    return is within ``tolerance`` of the target; ``info`` carries both goals in return units.
    """

    def __init__(
        self,
        env: gym.Env,
        goal_low: float = 0.0,
        goal_high: float = 0.05,
        tolerance: float = 0.005,
        reward_distance: float = 0.05,
        goal_unit: float = 0.01,
        pnl_weight: float = 1.0,
        goal_weight: float = 0.1,
        pnl_scale: float = 1.0,
    ) -> None:
        super().__init__(env)
        self._trading_env = trading_env(env, "the goal view")
        if goal_low > goal_high:
            raise ValueError(f"goal_low ({goal_low}) must not exceed goal_high ({goal_high})")
        if tolerance < 0 or reward_distance <= 0 or goal_unit <= 0:
            raise ValueError("tolerance must be >= 0, reward_distance and goal_unit > 0")
        if pnl_weight < 0 or goal_weight < 0 or pnl_weight + goal_weight == 0 or pnl_scale <= 0:
            raise ValueError("pnl_weight and goal_weight must be >= 0 (not both 0) and pnl_scale > 0")
        self.goal_low = float(goal_low)
        self.goal_high = float(goal_high)
        self.tolerance = float(tolerance)
        self.reward_distance = float(reward_distance)
        self.goal_unit = float(goal_unit)
        self.pnl_weight = float(pnl_weight)
        self.goal_weight = float(goal_weight)
        self.pnl_scale = float(pnl_scale)
        goal_space = gym.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                "observation": env.observation_space,
                "achieved_goal": goal_space,
                "desired_goal": goal_space,
                "time_to_go": gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
            }
        )
        self._initial_equity = 1.0
        self._desired = 0.0

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """The goal part of the reward, vectorised over goal units; ``info`` is accepted for the
        GoalEnv signature and not used."""
        achieved = np.asarray(achieved_goal, dtype=np.float64) * self.goal_unit
        desired = np.asarray(desired_goal, dtype=np.float64) * self.goal_unit
        return (self.goal_weight * goal_reward(achieved, desired, self.tolerance, self.reward_distance)).astype(
            np.float32
        )

    def _time_to_go(self) -> float:
        start, end = self._trading_env.episode_bounds
        return float(end - self._trading_env.bar_index) / max(end - start, 1)

    def _observation(self, observation: np.ndarray, achieved_return: float) -> dict[str, np.ndarray]:
        return {
            "observation": observation,
            "achieved_goal": np.array([achieved_return / self.goal_unit], dtype=np.float32),
            "desired_goal": np.array([self._desired / self.goal_unit], dtype=np.float32),
            "time_to_go": np.array([self._time_to_go()], dtype=np.float32),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        observation, info = self.env.reset(seed=seed)
        self._initial_equity = float(info["equity"])
        if options and "desired_goal" in options:
            self._desired = float(options["desired_goal"])
        else:
            self._desired = float(self.np_random.uniform(self.goal_low, self.goal_high))
        goal_obs = self._observation(observation, 0.0)
        return goal_obs, {**info, "desired_goal": self._desired, "achieved_goal": 0.0, "is_success": 0.0}

    def step(self, action):
        observation, base_reward, terminated, truncated, info = self.env.step(action)
        achieved = float(info["equity"]) / self._initial_equity - 1.0
        goal_obs = self._observation(observation, achieved)
        goal_part = float(self.compute_reward(goal_obs["achieved_goal"], goal_obs["desired_goal"], info))
        reward = self.pnl_weight * self.pnl_scale * float(base_reward) + goal_part
        info = {
            **info,
            "base_reward": float(base_reward),
            "goal_reward": goal_part,
            "achieved_goal": achieved,
            "desired_goal": self._desired,
            "is_success": float(abs(achieved - self._desired) <= self.tolerance),
        }
        return goal_obs, reward, terminated, truncated, info
