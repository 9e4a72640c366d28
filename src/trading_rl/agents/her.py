"""Hindsight Experience Replay settings on SB3's ``HerReplayBuffer`` and goal-achievement statistics.

SB3's buffer serves this project as it is: the goal-conditioned view (``envs.goal``) gives it the
Dict observation and the vectorised ``compute_reward`` it needs, the option wrapper only extends the
``observation`` entry (goals untouched), and relabelling keeps every other part of a transition.
So no buffer is written here — only its configuration and the reporting around it.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from trading_rl.envs.goal import GoalConditionedView

DEFAULT_HER_PARAMS: dict[str, Any] = {
    "enabled": True,
    "n_sampled_goal": 4,
    "goal_selection_strategy": "future",
    "goal_low": 0.0,
    "goal_high": 0.05,
    "tolerance": 0.001,
    "reward_distance": 0.05,
}
GOAL_SELECTION_STRATEGIES = ("future", "episode")
_GOAL_KEYS = ("goal_low", "goal_high", "tolerance", "reward_distance")


def resolve_her_params(params: dict | None) -> dict[str, Any]:
    """Defaults overlaid with ``params``; unknown keys and strategies raise ``ValueError``."""
    resolved = copy.deepcopy(DEFAULT_HER_PARAMS)
    for key, value in (params or {}).items():
        if key not in resolved:
            raise ValueError(f"unknown her parameter {key!r}; expected one of {sorted(resolved)}")
        resolved[key] = value
    if resolved["goal_selection_strategy"] not in GOAL_SELECTION_STRATEGIES:
        raise ValueError(
            f"her.goal_selection_strategy must be one of {GOAL_SELECTION_STRATEGIES}, "
            f"got {resolved['goal_selection_strategy']!r}"
        )
    if int(resolved["n_sampled_goal"]) < 1:
        raise ValueError(f"her.n_sampled_goal must be >= 1, got {resolved['n_sampled_goal']}")
    return resolved


def relabelled_fraction(n_sampled_goal: int) -> float:
    """Share of a sampled batch that carries a relabelled goal: ``k / (k + 1)`` (0.8 for k = 4)."""
    return n_sampled_goal / (n_sampled_goal + 1.0)


def replay_buffer_kwargs(her: dict[str, Any]) -> dict[str, Any]:
    """``replay_buffer_kwargs`` for an SB3 off-policy model using ``HerReplayBuffer``."""
    return {"n_sampled_goal": int(her["n_sampled_goal"]), "goal_selection_strategy": her["goal_selection_strategy"]}


def goal_view(env, her: dict[str, Any]) -> GoalConditionedView:
    return GoalConditionedView(env, **{key: her[key] for key in _GOAL_KEYS})


def goal_achievement(achieved: np.ndarray, desired: np.ndarray, tolerance: float) -> dict[str, float]:
    """Per-episode final return vs its target: share within ``tolerance`` (HER's success), share
    at or above the target, and the mean absolute miss."""
    achieved = np.asarray(achieved, dtype=np.float64)
    desired = np.asarray(desired, dtype=np.float64)
    if achieved.size == 0:
        raise ValueError("goal_achievement needs at least one episode")
    miss = np.abs(achieved - desired)
    return {
        "episodes": int(achieved.size),
        "goal_achievement_rate": float(np.mean(miss <= tolerance)),
        "target_reached_rate": float(np.mean(achieved >= desired)),
        "mean_abs_goal_miss": float(miss.mean()),
        "mean_final_return": float(achieved.mean()),
        "mean_target_return": float(desired.mean()),
    }
