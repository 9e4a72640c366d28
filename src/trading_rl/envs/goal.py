"""Goal-conditioned view of a trading env, for Hindsight Experience Replay.

The goal is a *return*: ``achieved_goal`` is the net return of the episode so far (equity over the
equity at reset, minus one) and ``desired_goal`` is a target return drawn once per episode. The
observation becomes the ``gymnasium`` Dict (``observation``, ``achieved_goal``, ``desired_goal``)
that SB3's ``HerReplayBuffer`` expects, and the reward is :meth:`GoalConditionedView.compute_reward`,
which HER calls again on relabelled goals — so it must be a pure, vectorised function of the goals.

The env's own reward (log equity change) is kept in ``info["base_reward"]`` for anything that still
needs P&L (the option controller, evaluation).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


def goal_reward(
    achieved_goal: np.ndarray,
    desired_goal: np.ndarray,
    tolerance: float = 0.001,
    reward_distance: float = 0.05,
) -> np.ndarray:
    """1 when ``|achieved - desired| <= tolerance``, else ``max(0, 1 - distance / reward_distance)``.

    Works on one goal ``(1,)`` (returns a 0-d array) or a batch ``(n, 1)`` (returns ``(n,)``).
    """
    distance = np.abs(np.asarray(achieved_goal, dtype=np.float64) - np.asarray(desired_goal, dtype=np.float64))
    distance = distance.max(axis=-1) if distance.ndim else distance
    shaped = np.maximum(0.0, 1.0 - distance / reward_distance)
    return np.where(distance <= tolerance, 1.0, shaped).astype(np.float32)


class GoalConditionedView(gym.Wrapper):
    """Dict observation with a return goal; reward from :meth:`compute_reward`.

    ``desired_goal`` is drawn uniformly from ``[goal_low, goal_high]`` with the env's own
    ``np_random`` at every reset (so ``reset(seed=...)`` fixes it), unless
    ``reset(options={"desired_goal": g})`` names it. ``info["is_success"]`` is 1.0 while the achieved
    return is within ``tolerance`` of the target.
    """

    def __init__(
        self,
        env: gym.Env,
        goal_low: float = 0.0,
        goal_high: float = 0.05,
        tolerance: float = 0.001,
        reward_distance: float = 0.05,
    ) -> None:
        super().__init__(env)
        if goal_low > goal_high:
            raise ValueError(f"goal_low ({goal_low}) must not exceed goal_high ({goal_high})")
        if tolerance < 0 or reward_distance <= 0:
            raise ValueError("tolerance must be >= 0 and reward_distance > 0")
        self.goal_low = float(goal_low)
        self.goal_high = float(goal_high)
        self.tolerance = float(tolerance)
        self.reward_distance = float(reward_distance)
        goal_space = gym.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": env.observation_space, "achieved_goal": goal_space, "desired_goal": goal_space}
        )
        self._initial_equity = 1.0
        self._desired = np.zeros(1, dtype=np.float32)

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """Vectorised goal reward; ``info`` is accepted for the GoalEnv signature and not used."""
        return goal_reward(achieved_goal, desired_goal, self.tolerance, self.reward_distance)

    def _observation(self, observation: np.ndarray, equity: float) -> dict[str, np.ndarray]:
        achieved = np.array([equity / self._initial_equity - 1.0], dtype=np.float32)
        return {"observation": observation, "achieved_goal": achieved, "desired_goal": self._desired.copy()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        observation, info = self.env.reset(seed=seed)
        self._initial_equity = float(info["equity"])
        if options and "desired_goal" in options:
            desired = float(options["desired_goal"])
        else:
            desired = float(self.np_random.uniform(self.goal_low, self.goal_high))
        self._desired = np.array([desired], dtype=np.float32)
        goal_obs = self._observation(observation, self._initial_equity)
        return goal_obs, {**info, "desired_goal": desired, "is_success": 0.0}

    def step(self, action):
        observation, base_reward, terminated, truncated, info = self.env.step(action)
        goal_obs = self._observation(observation, float(info["equity"]))
        reward = float(self.compute_reward(goal_obs["achieved_goal"], goal_obs["desired_goal"], info))
        distance = abs(float(goal_obs["achieved_goal"][0]) - float(self._desired[0]))
        info = {
            **info,
            "base_reward": float(base_reward),
            "achieved_goal": float(goal_obs["achieved_goal"][0]),
            "desired_goal": float(self._desired[0]),
            "is_success": float(distance <= self.tolerance),
        }
        return goal_obs, reward, terminated, truncated, info
